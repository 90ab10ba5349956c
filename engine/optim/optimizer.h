// Optimizer: parameter groups with per-group options, per-parameter state keyed by the
// parameter's global index (PyTorch's numbering: group order, then order inside the group), and
// state_dict()/load_state_dict() in PyTorch's layout. The update rules live in sgd.h and adam.h;
// gradient clipping in clip_grad.h. This file is not a scheduler (lr_scheduler.h writes
// param_groups()[i].options["lr"]) and knows no particular algorithm.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tensor/tensor.h"

namespace tb::optim {

// Optimizer/scheduler state in PyTorch's state_dict() layout: `json` mirrors torch's dict with
// every tensor replaced by {"tensor": "<key>"}, the key naming an entry of `tensors`
// (e.g. "state.0.exp_avg"), so a checkpoint stores tensors in a tensor file and the rest as JSON.
struct StateDict {
  nlohmann::json json = nlohmann::json::object();
  std::vector<std::pair<std::string, Tensor>> tensors;
};

// "lr", "momentum", "betas": [b1, b2], "eps", "weight_decay", "amsgrad", "maximize",
// "dampening", "nesterov", ... as PyTorch names them; missing ones come from the optimizer's
// defaults when the group is added.
struct ParamGroup {
  std::vector<Tensor> params;
  nlohmann::json options = nlohmann::json::object();
};

namespace detail {
// x rounded to T and back to its compute type: where PyTorch stores an intermediate in a tensor
// of the parameter's dtype, the fused kernels round the same way (a no-op for float/double).
template <typename T>
inline core::opmath_t<T> round_to(core::opmath_t<T> x) {
  if constexpr (std::is_same_v<T, core::opmath_t<T>>) return x;
  else return core::opmath_t<T>(T(x));
}
}  // namespace detail

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, nlohmann::json defaults);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Runs under autograd::NoGradGuard; parameters whose grad is undefined are skipped.
  virtual void step() = 0;
  // set_to_none=false zeroes the gradients in place (keeping their storage), like PyTorch.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }  // schedulers write options["lr"]
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const nlohmann::json& defaults() const { return defaults_; }
  // Fills the group's missing options from the defaults and validates them; a parameter that
  // already belongs to a group is an error (as in PyTorch).
  void add_param_group(ParamGroup g);

  // {"state": {"0": {...}}, "param_groups": [{..options.., "params": [0, 1]}]}
  StateDict state_dict() const;
  // Validates group/param counts and state tensor shapes against this optimizer's parameters,
  // then replaces the options of every group and the whole state. State tensors are copied
  // (cast to the parameter's dtype, except "step", as in PyTorch).
  void load_state_dict(const StateDict& sd);

 protected:
  // The state of one parameter: named tensors ("step", "exp_avg", "momentum_buffer", ...).
  using ParamState = std::map<std::string, Tensor>;

  // Checks one group's options (lr >= 0, ...); throws a tb::core::Error naming the option.
  // Subclass constructors call it for the groups given to the constructor (a virtual call from
  // the base constructor would not reach them); add_param_group calls it afterwards.
  virtual void check_options(const nlohmann::json& options) const = 0;
  void check_all_groups() const;

  // Global index of params of group g, element i.
  int64_t param_index(size_t group, size_t i) const;
  ParamState& state_of(int64_t index) { return state_[index]; }
  // The state of a parameter, or nullptr when it has none yet.
  ParamState* find_state(int64_t index);

  static double opt_double(const ParamGroup& g, const char* key);
  static bool opt_bool(const ParamGroup& g, const char* key);
  static std::pair<double, double> opt_pair(const ParamGroup& g, const char* key);

  // The tensors one fused update kernel walks as flat arrays of `numel` elements in one layout.
  // When the parameter is dense (contiguous or a permutation of it) the parameter and its state
  // are used in place (state is created in the parameter's layout) and only a gradient of another
  // layout is copied; otherwise everything goes through contiguous copies that finish() writes
  // back. finish() also bumps the versions of what was written, as in-place ops do.
  struct FlatUpdate {
    Tensor param, grad;         // working tensors
    std::vector<Tensor> state;  // working tensors, same order as given
    void finish();
    Tensor param_out;  // defined when param is a copy to write back
    std::vector<Tensor> state_out;
  };
  static FlatUpdate flat_update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& state);
  // A zero-filled state tensor in the parameter's dtype and layout (zeros_like, preserve_format).
  static Tensor zeros_state(const Tensor& param);
  // Runs body(begin, end) over [0, n) in chunks on the OpenMP threads (one chunk when small).
  static void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& body);

  std::vector<ParamGroup> groups_;
  nlohmann::json defaults_;
  std::map<int64_t, ParamState> state_;

 private:
  void add_group_unchecked(ParamGroup g);
};

}  // namespace tb::optim
