// State fences: Note [State fences] in state_fence.h.
#include "engine/tensor/state_fence.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace tb {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<uint64_t, std::shared_ptr<const std::function<void()>>> fences;  // by id: registration order
  uint64_t next_id = 0;
  std::atomic<int> count{0};  // the fast path's test, without the lock
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: fences may outlive static destruction order
  return *r;
}

}  // namespace

void state_fence() {
  Registry& r = registry();
  if (r.count.load(std::memory_order_acquire) == 0) return;
  std::vector<std::shared_ptr<const std::function<void()>>> fences;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto& [id, f] : r.fences) fences.push_back(f);
  }
  for (const auto& f : fences) (*f)();  // outside the lock: a fence may wait for long
}

StateFence::StateFence(std::function<void()> wait) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  id_ = r.next_id++;
  r.fences.emplace(id_, std::make_shared<const std::function<void()>>(std::move(wait)));
  r.count.fetch_add(1, std::memory_order_release);
}

StateFence::~StateFence() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.fences.erase(id_);
  r.count.fetch_sub(1, std::memory_order_release);
}

}  // namespace tb
