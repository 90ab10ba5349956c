// GradScaler (grad_scaler.h). The arithmetic follows PyTorch's CPU kernels:
// _amp_foreach_non_finite_check_and_unscale_ (each gradient element in its opmath type times a
// float32 inv_scale) and _amp_update_scale_ (float32 scale times a double factor, stored as float32).
#include "engine/optim/grad_scaler.h"

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"

namespace tb::optim {

namespace {

// g *= inv in place; returns whether any element was inf/NaN before the multiplication.
bool unscale_and_check(Tensor& g, float inv) {
  Tensor work = g.is_contiguous() ? g : g.contiguous();
  const bool found = core::dispatch_floating(work.dtype(), "GradScaler.unscale_", [&]<typename S>() {
    using Op = core::opmath_t<S>;
    S* p = work.data_ptr<S>();
    const int64_t n = work.numel();
    const Op inv_op = Op(inv);
    bool bad = false;
#pragma omp parallel for reduction(|| : bad) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const Op v = Op(p[i]);
      bad = bad || !std::isfinite(v);
      p[i] = S(v * inv_op);
    }
    return bad;
  });
  if (work.is_same(g)) {
    g.bump_version();
  } else {
    g.copy_(work);
  }
  return found;
}

}  // namespace

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval,
                       bool enabled)
    : enabled_(enabled),
      init_scale_(init_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  if (!enabled_) return;
  const char* op = "GradScaler";
  TB_CHECK(growth_factor > 1.0, op, "The growth factor must be > 1.0, got ", growth_factor);
  TB_CHECK(backoff_factor < 1.0 && backoff_factor > 0, op, "The backoff factor must be in (0, 1), got ",
           backoff_factor);
  TB_CHECK(std::isfinite(init_scale) && init_scale > 0, op, "init_scale must be a positive finite number, got ",
           init_scale);
  TB_CHECK(growth_interval >= 1, op, "growth_interval must be >= 1, got ", growth_interval);
}

void GradScaler::check_started(const char* op) const {
  TB_CHECK(scale_.has_value(), op,
           "no scale yet: call scaler.scale(loss) and backward() on the result earlier in "
           "the iteration");
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!enabled_) return loss;
  TB_CHECK(loss.defined(), "GradScaler.scale", "the loss is an undefined tensor");
  if (!scale_) {
    scale_ = float(init_scale_);
    growth_tracker_ = int32_t(init_growth_tracker_);
  }
  return tb::mul(loss, scalar_tensor(double(*scale_), DType::Float32));
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!enabled_) return;
  const char* op = "GradScaler.unscale_";
  check_started(op);
  OptState& st = per_optimizer_[&opt];
  TB_CHECK(st.stage != Stage::Unscaled, op,
           "unscale_() has already been called on this optimizer since the last "
           "update(); call it at most once per iteration");
  TB_CHECK(st.stage != Stage::Stepped, op, "unscale_() is being called after step(); unscale before stepping");
  // Check every gradient's dtype before touching any, so an error leaves the gradients as they were.
  for (const ParamGroup& g : opt.param_groups())
    for (const Tensor& p : g.params) {
      const Tensor grad = p.grad();
      if (grad.defined())
        TB_CHECK(grad.dtype() != DType::Float16, op,
                 "Attempting to unscale FP16 gradients: keep float32 master "
                 "parameters (the model may compute in float16) so gradients accumulate in float32");
    }
  const float inv = float(1.0 / double(*scale_));
  autograd::NoGradGuard no_grad;
  std::optional<bool> found;
  for (ParamGroup& g : opt.param_groups())
    for (Tensor& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      const bool bad = unscale_and_check(grad, inv);
      found = found.value_or(false) || bad;
    }
  st.found_inf = found;
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(Optimizer& opt) {
  if (!enabled_) {
    opt.step();
    return true;
  }
  const char* op = "GradScaler.step";
  check_started(op);
  TB_CHECK(per_optimizer_[&opt].stage != Stage::Stepped, op,
           "step() has already been called since the last update(); call update() once per iteration");
  if (per_optimizer_[&opt].stage == Stage::Ready) unscale_(opt);
  OptState& st = per_optimizer_[&opt];
  TB_CHECK(st.found_inf.has_value(), op,
           "No inf checks were recorded for this optimizer: none of its parameters has "
           "a gradient; call backward() on scaler.scale(loss) before step()");
  const bool ok = !*st.found_inf;
  if (ok) opt.step();
  st.stage = Stage::Stepped;
  return ok;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_started("GradScaler.update");
  bool any_check = false, found = false;
  for (const auto& [opt, st] : per_optimizer_) {
    if (!st.found_inf) continue;
    any_check = true;
    found = found || *st.found_inf;
  }
  TB_CHECK(any_check, "GradScaler.update",
           "No inf checks were recorded prior to update(): call step(optimizer) "
           "(or unscale_(optimizer)) after backward() and before update()");
  if (found) {
    scale_ = float(double(*scale_) * backoff_factor_);
    growth_tracker_ = 0;
  } else {
    const int32_t successful = growth_tracker_ + 1;
    if (successful == growth_interval_) {
      const float grown = float(double(*scale_) * growth_factor_);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_started("GradScaler.update");
  TB_CHECK(std::isfinite(new_scale) && new_scale > 0, "GradScaler.update",
           "new_scale must be a positive finite number, got ", new_scale);
  scale_ = float(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_ ? double(*scale_) : init_scale_;
}

int64_t GradScaler::growth_tracker() const {
  if (!enabled_) return 0;
  return scale_ ? int64_t(growth_tracker_) : init_growth_tracker_;
}

nlohmann::json GradScaler::state_dict() const {
  if (!enabled_) return nlohmann::json::object();
  return {{"scale", get_scale()},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", growth_interval_},
          {"_growth_tracker", growth_tracker()}};
}

void GradScaler::load_state_dict(const nlohmann::json& sd) {
  if (!enabled_) return;
  const char* op = "GradScaler.load_state_dict";
  TB_CHECK(sd.is_object(), op, "a GradScaler state dict must be a JSON object, got ", sd.type_name());
  TB_CHECK(!sd.empty(), op,
           "The source state dict is empty, possibly because it was saved from a disabled "
           "instance of GradScaler.");
  auto num = [&](const char* key) {
    TB_CHECK(sd.contains(key) && sd[key].is_number(), op, "state dict entry '", key, "' is missing or not a number");
    return sd[key].get<double>();
  };
  auto integer = [&](const char* key) {
    TB_CHECK(sd.contains(key) && sd[key].is_number_integer(), op, "state dict entry '", key,
             "' is missing or not an integer");
    return sd[key].get<int64_t>();
  };
  const double scale = num("scale"), growth = num("growth_factor"), backoff = num("backoff_factor");
  const int64_t interval = integer("growth_interval"), tracker = integer("_growth_tracker");
  TB_CHECK(std::isfinite(scale) && scale > 0, op, "'scale' must be positive and finite, got ", scale);
  TB_CHECK(growth > 1.0, op, "'growth_factor' must be > 1.0, got ", growth);
  TB_CHECK(backoff < 1.0 && backoff > 0, op, "'backoff_factor' must be in (0, 1), got ", backoff);
  TB_CHECK(interval >= 1, op, "'growth_interval' must be >= 1, got ", interval);
  TB_CHECK(tracker >= 0 && tracker < interval, op, "'_growth_tracker' must be in [0, growth_interval), got ", tracker);
  init_scale_ = scale;
  if (scale_) scale_ = float(scale);
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = interval;
  init_growth_tracker_ = tracker;
  if (scale_) growth_tracker_ = int32_t(tracker);
}

}  // namespace tb::optim
