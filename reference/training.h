// LibTorch's side of the end-to-end training runs (suites/training): torch::optim::AdamW over a
// torch::nn module's parameters with the learning rate set before each step (from the engine's
// schedule, so both sides follow one schedule by construction; the schedules themselves are
// checked in the optim suite), and torch::nn::utils::clip_grad_norm_.
#pragma once
#include <memory>

#include "reference/nn_modules.h"

namespace tb::ref {

class AdamW {
 public:
  AdamW(const NnModule& module, double lr, double beta1, double beta2, double eps, double weight_decay);
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
