// LibTorch's optimizers and gradient clipping seen from the suites, without including LibTorch:
// Optim is an opaque handle to a torch::optim::SGD / Adam / AdamW over ref::Tensors (the C++ API,
// which has no `maximize`). Every LibTorch error surfaces as ref::RefError.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/tensor.h"

namespace tb::ref {

class Optim {
 public:
  struct Impl;
  // kind: "sgd" | "adam" | "adamw". Options use PyTorch's names (lr, momentum, dampening,
  // weight_decay, nesterov, betas [b1, b2], eps, amsgrad); a group's missing options come from
  // `defaults`, missing defaults from LibTorch's. "maximize": true is a RefError (not in C++).
  Optim(const std::string& kind, const std::vector<std::vector<Tensor>>& groups,
        const std::vector<nlohmann::json>& group_options, const nlohmann::json& defaults);
  void step();
  void zero_grad();
  // LibTorch's per-parameter state by field name, the defined tensors only, "step" as a 0-dim
  // float32 tensor (LibTorch keeps an int64 count); empty when the parameter has no state.
  std::vector<std::pair<std::string, Tensor>> state_of(const Tensor& param) const;
  // The options of group g as LibTorch holds them, under PyTorch's names.
  nlohmann::json group_options(size_t g) const;

 private:
  std::shared_ptr<Impl> impl_;
};

// param.mutable_grad() = grad (a copy, so later in-place steps do not touch the caller's tensor);
// an undefined grad clears it.
void set_grad(const Tensor& param, const Tensor& grad);

// torch::nn::utils::clip_grad_norm_ / clip_grad_value_ (on the params' .grad).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite);
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace tb::ref
