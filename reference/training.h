// LibTorch's side of the end-to-end training runs (suites/training): torch::optim::AdamW over a
// torch::nn module's parameters with the learning rate set before each step (from the engine's
// schedule, so both sides follow one schedule by construction; the schedules themselves are
// checked in the optim suite), and torch::nn::utils::clip_grad_norm_.
//
// AdamW::Kind::Fused steps with ATen's fused kernel instead (at::_fused_adamw_, what Python's
// AdamW(fused=True) calls): one pass per parameter, like the engine's AdamW, where
// torch::optim::AdamW runs about ten tensor ops per parameter. The benchmarks time that one, so
// that both sides' optimizers do the same work; the equivalence runs use torch::optim::AdamW.
#pragma once
#include <memory>

#include "reference/nn_modules.h"

namespace tb::ref {

class AdamW {
 public:
  enum class Kind { Standard, Fused };
  AdamW(const NnModule& module, double lr, double beta1, double beta2, double eps, double weight_decay,
        Kind kind = Kind::Standard);
  ~AdamW();
  void set_lr(double lr);
  void zero_grad();
  void step();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Scales the module's gradients so their global 2-norm is at most max_norm; returns the norm.
double clip_grad_norm(const NnModule& module, double max_norm);

}  // namespace tb::ref
