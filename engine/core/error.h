// The engine's one error type: what went wrong, in which op, with the offending shapes/dtypes.
// Engine code throws; only main() exits. See Note [Errors] in README.md of this room.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace tb::core {

class Error : public std::runtime_error {
 public:
  Error(std::string op, std::string detail)
      : std::runtime_error(op + ": " + detail), op_(std::move(op)), detail_(std::move(detail)) {}
  const std::string& op() const { return op_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string op_;
  std::string detail_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tb::core

// TB_CHECK(cond, op, parts...): throw tb::core::Error(op, concat(parts...)) unless cond holds.
#define TB_CHECK(cond, op, ...)                                                          \
  do {                                                                                   \
    if (!(cond)) throw ::tb::core::Error((op), ::tb::core::detail::concat(__VA_ARGS__)); \
  } while (0)
