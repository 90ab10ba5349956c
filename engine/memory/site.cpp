#include "engine/memory/site.h"

#include <mutex>
#include <string>
#include <unordered_set>

namespace tb::memory {

namespace detail {
constinit thread_local Site t_site{};
}

namespace {
struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
}  // namespace

const char* intern(std::string_view s) {
  // Leaked on purpose: blocks and events keep these pointers until the process ends, static
  // tensors included. Node-based, so a string never moves when the set grows.
  static auto* names = new std::unordered_set<std::string, Hash, std::equal_to<>>();
  static auto* mu = new std::mutex();
  std::lock_guard<std::mutex> lock(*mu);
  auto it = names->find(s);
  if (it == names->end()) it = names->emplace(s).first;
  return it->c_str();
}

}  // namespace tb::memory
