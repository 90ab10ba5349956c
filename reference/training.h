// LibTorch's side of the end-to-end training runs (suites/training): torch::optim::AdamW over a
// torch::nn module's parameters with the learning rate set before each step (from the engine's
// schedule, so both sides follow one schedule by construction; the schedules themselves are
// checked in the optim suite), and torch::nn::utils::clip_grad_norm_.
//
// AdamW::Kind::Fused steps with ATen's fused kernel instead (at::_fused_adamw_, what Python's
// AdamW(fused=True) calls): one pass per parameter, like the engine's AdamW, where
// torch::optim::AdamW runs about ten tensor ops per parameter. The benchmarks time that one, so
// that both sides' optimizers do the same work; the equivalence runs use torch::optim::AdamW.
//
// For the mixed-precision recipe (suites/training recipe/*): GradScaler is torch.amp.GradScaler
// ("cpu") re-stated over ATen's own kernels (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_: what the Python class calls; LibTorch's C++ API has no GradScaler), and
// ReduceLROnPlateau is LibTorch's torch::optim::ReduceLROnPlateauScheduler.
#pragma once
#include <memory>
#include <string>

#include "reference/nn_modules.h"

namespace tb::ref {

class AdamW {
 public:
  enum class Kind { Standard, Fused };
  AdamW(const NnModule& module, double lr, double beta1, double beta2, double eps, double weight_decay,
        Kind kind = Kind::Standard);
  ~AdamW();
  void set_lr(double lr);
  double lr() const;  // the first group's
  void zero_grad();
  void step();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend class ReduceLROnPlateau;
};

class GradScaler {
 public:
  GradScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval);
  ~GradScaler();
  Tensor scale(const Tensor& loss) const;  // loss * scale
  void unscale_(const NnModule& module);   // the gradients divided by the scale; records inf/NaN
  bool step(AdamW& opt);                   // after unscale_: opt.step() unless inf/NaN; true if stepped
  void update();                           // the scale's backoff or growth
  double get_scale() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// torch::optim::ReduceLROnPlateauScheduler over a Kind::Standard AdamW (mode "min" or "max",
// threshold_mode "rel" or "abs"). Note LibTorch's C++ scheduler holds factor and the metric in
// float32 (Python's in float64).
class ReduceLROnPlateau {
 public:
  ReduceLROnPlateau(AdamW& opt, const std::string& mode, double factor, int64_t patience, double threshold,
                    const std::string& threshold_mode, int64_t cooldown, double min_lr, double eps);
  ~ReduceLROnPlateau();
  void step(double metric);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Scales the module's gradients so their global 2-norm is at most max_norm; returns the norm.
double clip_grad_norm(const NnModule& module, double max_norm);

}  // namespace tb::ref
