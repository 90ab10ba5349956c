// Where an allocation comes from: the op that asked ("matmul", "adamw.step", "MmBackward0"),
// the module whose forward was running ("blocks.3.mlp.fc1") and a label the user set. Each is a
// thread-local pointer to a string that lives for the whole process (a literal or intern()'s),
// so a scope costs two pointer writes and every block can keep its site without a copy.
// Set by autograd::kernel (the op), autograd's backward (the node's name), the optimizers' step,
// DDP/FSDP buffers, nn::Module's forward (the module path), and by users (LabelScope).
#pragma once
#include <string_view>

namespace tb::memory {

struct Site {
  const char* op = nullptr;
  const char* module = nullptr;
  const char* label = nullptr;
};

namespace detail {
extern constinit thread_local Site t_site;
}

// The allocating thread's site now.
inline Site current_site() { return detail::t_site; }

// A process-lifetime copy of `s`: equal strings give the same pointer. Takes a lock: for names
// made at run time (a node's name, a module path), not for every allocation.
const char* intern(std::string_view s);

// Names the op for allocations made while it lives. With keep_outer (autograd::kernel), an op
// already named by an enclosing scope stays: a composite op, or an optimizer step calling
// differentiable ops, keeps the outer name.
class OpScope {
 public:
  explicit OpScope(const char* op, bool keep_outer = false) : prev_(detail::t_site.op) {
    if (!keep_outer || prev_ == nullptr) detail::t_site.op = op;
  }
  ~OpScope() { detail::t_site.op = prev_; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* prev_;
};

// The module path for allocations made while it lives (innermost wins). nn::Module sets it.
class ModuleScope {
 public:
  explicit ModuleScope(const char* path) : prev_(detail::t_site.module) { detail::t_site.module = path; }
  ~ModuleScope() { detail::t_site.module = prev_; }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  const char* prev_;
};

// A user's label ("data", "eval", "step 3"), innermost wins; interned once per distinct text.
class LabelScope {
 public:
  explicit LabelScope(std::string_view label) : prev_(detail::t_site.label) { detail::t_site.label = intern(label); }
  ~LabelScope() { detail::t_site.label = prev_; }
  LabelScope(const LabelScope&) = delete;
  LabelScope& operator=(const LabelScope&) = delete;

 private:
  const char* prev_;
};

}  // namespace tb::memory
