// Module: the base of every layer and model. It owns named parameters, buffers and child modules
// (registration order kept, names exactly as PyTorch's), the train/eval switch, state_dict /
// load_state_dict, zero_grad, apply, and forward / full backward hooks. Modules live in
// shared_ptrs (children are shared); they are neither copied nor moved.
// Not here: the layers (linear.h, conv.h, ...) and the initialisers (init.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/rng.h"
#include "engine/tensor/tensor.h"

namespace tb::autograd {
struct CheckpointOptions;
}

namespace tb::nn {

using TensorList = std::vector<Tensor>;

// A vector of (name, value) pairs with a name index: iteration follows insertion order.
template <typename V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;
  void insert(const std::string& key, V value) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    index_.emplace(key, items_.size());
    items_.emplace_back(key, std::move(value));
  }
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const V* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const V& at(const std::string& key) const {
    const V* v = find(key);
    TB_CHECK(v != nullptr, "OrderedDict", "no key '", key, "'");
    return *v;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const Item& i : items_) k.push_back(i.first);
    return k;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

// name -> tensor, parameters and persistent buffers in PyTorch's order (each module's own
// parameters, then its own buffers, then its children's, depth first).
using StateDict = OrderedDict<Tensor>;

struct LoadResult {
  std::vector<std::string> missing_keys;     // in the module, absent from the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, absent from the module
};

class Module;
using ModulePtr = std::shared_ptr<Module>;

// Hooks, as PyTorch's: a forward pre-hook may replace the inputs, a forward hook the output, a
// full backward hook the gradients of the inputs.
using ForwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList& inputs)>;
using ForwardHook = std::function<std::optional<Tensor>(Module&, const TensorList& inputs, const Tensor& output)>;
// grad_input: one entry per forward input (undefined where the input needs no gradient);
// grad_output: the gradient of the output.
using BackwardHook =
    std::function<std::optional<TensorList>(Module&, const TensorList& grad_input, const TensorList& grad_output)>;

struct HookStore;

// Returned by register_*_hook; remove() unregisters (harmless after the module is gone).
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<HookStore> store, int64_t id) : store_(std::move(store)), id_(id) {}
  void remove();
  int64_t id() const { return id_; }

 private:
  std::weak_ptr<HookStore> store_;
  int64_t id_ = -1;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  // The computation; modules with other signatures (MultiheadAttention, GPT) add their own.
  virtual Tensor forward(const Tensor& x);
  // forward with the hooks around it.
  Tensor operator()(const Tensor& x);

  // ---- registration (names must be new, non-empty and without '.') ----
  // An undefined tensor registers a None slot (PyTorch's bias=False): it is listed nowhere.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Replaces the tensor registered as this module's own parameter `name` (which must exist) in
  // parameters() and state_dict(); the layer's own handle (e.g. Linear::weight) is untouched.
  // FSDP registers a parameter's shard here while the layer computes with the gathered tensor.
  void set_parameter(const std::string& name, Tensor t);
  // Non-persistent buffers stay out of state_dict.
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

  // ---- traversal (recursive ones give dotted names, depth first) ----
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  TensorList parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, ModulePtr>> named_children() const;
  // Self first with name "", then every descendant (raw pointers: self may live on the stack).
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<std::pair<std::string, const Module*>> named_modules() const;
  ModulePtr child(const std::string& name) const;  // null if none
  // A parameter or buffer by dotted name (undefined if none).
  Tensor find_tensor(const std::string& dotted) const;

  // ---- modes ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- state ----
  StateDict state_dict() const;
  // Copies values in place (under NoGradGuard) keeping each tensor's identity. A shape mismatch
  // is always an error naming the key and both shapes; with strict, missing or unexpected keys
  // are an error listing them.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);
  // Converts floating parameters and buffers in place (the handles stay the same tensors).
  void to(DType dtype);
  void zero_grad(bool set_to_none = true);
  // fn on every descendant, children first, then self (PyTorch's order).
  void apply(const std::function<void(Module&)>& fn);

  // ---- hooks ----
  RemovableHandle register_forward_pre_hook(ForwardPreHook fn);
  RemovableHandle register_forward_hook(ForwardHook fn);
  // The module must outlive the backward passes through graphs it recorded while hooked.
  // See Note [Full backward hooks] in module.cpp.
  RemovableHandle register_full_backward_hook(BackwardHook fn);
  // Whether any hook is registered: a container may fuse two children's forwards into one op
  // (Sequential: Linear + ReLU) only when neither has a hook that would observe the step between.
  bool has_hooks() const;

  // ---- activation checkpointing (nn::checkpoint_module, engine/nn/activation_checkpoint.h) ----
  // With options, the module's forward runs through autograd::checkpoint (its activations are
  // recomputed in backward); its own hooks run outside, once. Null turns it off.
  void set_checkpoint(std::shared_ptr<const autograd::CheckpointOptions> options);
  bool checkpointed() const { return checkpoint_ != nullptr; }

 protected:
  // Runs `fwd` on `inputs` with every hook around it: for modules whose forward takes several
  // tensors (the backward hook then sees one gradient per input). A checkpointed module copies
  // `fwd` and runs it again in backward, so it must own what it captures (values and `this`,
  // no references to the caller's locals).
  Tensor call_with_hooks(const TensorList& inputs, const std::function<Tensor(const TensorList&)>& fwd);
  void add_child(const std::string& name, ModulePtr m);

 private:
  struct Slot {
    Tensor t;
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void collect_state(const std::string& prefix, StateDict& out) const;

  std::string type_name_;
  bool training_ = true;
  OrderedDict<Tensor> params_;
  OrderedDict<Slot> buffers_;
  OrderedDict<ModulePtr> children_;
  std::shared_ptr<HookStore> hooks_;
  std::shared_ptr<const autograd::CheckpointOptions> checkpoint_;
};

// Shape as PyTorch prints it, for error messages: [3, 4].
std::string shape_str(const Shape& s);

}  // namespace tb::nn
