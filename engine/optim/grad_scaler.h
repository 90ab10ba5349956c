// GradScaler: dynamic loss scaling for float16 training with torch.amp.GradScaler's semantics
// (torch 2.11): the scale is a float32 value, created lazily by the first scale(); unscale_()
// multiplies every gradient by float32(1 / double(scale)) in place and records whether any
// gradient holds inf/NaN; step() skips optimizer.step() when one did; update() halves the scale
// (backoff_factor) after an overflow and multiplies it by growth_factor after growth_interval
// clean steps in a row (never to inf). Per iteration: scale(loss).backward(); [unscale_(opt);
// clip]; step(opt); update(). Several optimizers may share one scaler, as in PyTorch.
// Not here: sparse gradients, multiple devices, optimizers that consume the scale themselves.
#pragma once
#include <cstdint>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/optim/optimizer.h"
#include "engine/tensor/tensor.h"

namespace tb::optim {

class GradScaler {
 public:
  // A disabled scaler is a pass-through: scale() returns the loss, step() steps, get_scale() is 1.
  explicit GradScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000, bool enabled = true);

  // loss * scale (a float32 0-dim tensor), differentiable through tb::mul.
  Tensor scale(const Tensor& loss);
  // Divides opt's gradients by the scale in place (float16 gradients are an error, as in
  // PyTorch: keep float32 master parameters). At most once per optimizer between update()s,
  // and not after step().
  void unscale_(Optimizer& opt);
  // Unscales if unscale_(opt) was not called, then runs opt.step() unless a gradient was
  // inf/NaN. Returns whether the optimizer stepped. At most once per optimizer between update()s.
  bool step(Optimizer& opt);
  // Adjusts the scale from the inf checks of every optimizer since the last update(), and
  // starts a new iteration.
  void update();
  // Sets the scale to new_scale (rounded to float32) instead; the growth tracker is kept.
  void update(double new_scale);

  double get_scale() const;  // init_scale before the first scale(); 1 when disabled
  int64_t growth_tracker() const;
  bool is_enabled() const { return enabled_; }
  double growth_factor() const { return growth_factor_; }
  double backoff_factor() const { return backoff_factor_; }
  int64_t growth_interval() const { return growth_interval_; }

  // {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} as
  // PyTorch; {} when disabled.
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& sd);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptState {
    Stage stage = Stage::Ready;
    std::optional<bool> found_inf;  // unset until some gradient was checked
  };
  void check_started(const char* op) const;

  bool enabled_;
  double init_scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  std::optional<float> scale_;  // PyTorch's _scale tensor (float32), once scale() ran
  int32_t growth_tracker_ = 0;  // PyTorch's _growth_tracker tensor (int32)
  std::map<const Optimizer*, OptState> per_optimizer_;
};

}  // namespace tb::optim
