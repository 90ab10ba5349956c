#include "reference/training.h"

#include "reference/torch_access.h"

namespace tb::ref {

struct AdamW::Impl {
  std::unique_ptr<torch::optim::AdamW> opt;  // Kind::Standard
  // Kind::Fused: the parameters and, from their first step, their moments and step counts (the
  // float32 scalar tensors the fused kernel reads, as torch.optim keeps them).
  std::vector<torch::Tensor> params, exp_avg, exp_avg_sq, steps;
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
};

AdamW::AdamW(const NnModule& module, double lr, double beta1, double beta2, double eps, double weight_decay, Kind kind)
    : impl_(std::make_unique<Impl>()) {
  guarded("AdamW", [&] {
    if (kind == Kind::Standard) {
      impl_->opt = std::make_unique<torch::optim::AdamW>(
          module.module->parameters(),
          torch::optim::AdamWOptions(lr).betas({beta1, beta2}).eps(eps).weight_decay(weight_decay));
      return;
    }
    Impl& f = *impl_;
    f.params = module.module->parameters();
    f.exp_avg.resize(f.params.size());
    f.exp_avg_sq.resize(f.params.size());
    f.steps.resize(f.params.size());
    f.lr = lr, f.beta1 = beta1, f.beta2 = beta2, f.eps = eps, f.weight_decay = weight_decay;
  });
}

AdamW::~AdamW() = default;

void AdamW::set_lr(double lr) {
  if (!impl_->opt) {
    impl_->lr = lr;
    return;
  }
  for (auto& g : impl_->opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

double AdamW::lr() const {
  if (!impl_->opt) return impl_->lr;
  return static_cast<torch::optim::AdamWOptions&>(impl_->opt->param_groups().at(0).options()).lr();
}

void AdamW::zero_grad() {
  if (impl_->opt) return impl_->opt->zero_grad(/*set_to_none=*/true);
  for (torch::Tensor& p : impl_->params) p.mutable_grad() = torch::Tensor();
}

void AdamW::step() {
  if (impl_->opt) return guarded("AdamW.step", [&] { impl_->opt->step(); });
  guarded("AdamW.step (fused)", [&] {
    Impl& f = *impl_;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> ps, gs, ms, vs, ss;
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (!f.params[i].grad().defined()) continue;  // as torch.optim: no gradient, no step
      if (!f.steps[i].defined()) {
        f.exp_avg[i] = torch::zeros_like(f.params[i], at::MemoryFormat::Preserve);
        f.exp_avg_sq[i] = torch::zeros_like(f.params[i], at::MemoryFormat::Preserve);
        f.steps[i] = torch::zeros({}, torch::kFloat32);
      }
      f.steps[i].add_(1);  // the kernel reads the count; torch.optim increments it first
      ps.push_back(f.params[i]);
      gs.push_back(f.params[i].grad());
      ms.push_back(f.exp_avg[i]);
      vs.push_back(f.exp_avg_sq[i]);
      ss.push_back(f.steps[i]);
    }
    if (ps.empty()) return;
    at::_fused_adamw_(ps, gs, ms, vs, /*max_exp_avg_sqs=*/{}, ss, f.lr, f.beta1, f.beta2, f.weight_decay, f.eps,
                      /*amsgrad=*/false, /*maximize=*/false);
  });
}

// ---- GradScaler: torch/amp/grad_scaler.py's steps on ATen's kernels ----

struct GradScaler::Impl {
  torch::Tensor scale, growth_tracker, found_inf;  // float32, int32, float32 (as PyTorch's)
  double growth_factor = 2, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool unscaled = false;
};

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval)
    : impl_(std::make_unique<Impl>()) {
  impl_->scale = torch::full({}, init_scale, torch::kFloat32);
  impl_->growth_tracker = torch::zeros({}, torch::kInt32);
  impl_->growth_factor = growth_factor;
  impl_->backoff_factor = backoff_factor;
  impl_->growth_interval = growth_interval;
}

GradScaler::~GradScaler() = default;

Tensor GradScaler::scale(const Tensor& loss) const {
  return guarded("GradScaler.scale", [&] { return wrap(T(loss) * impl_->scale.to(T(loss).scalar_type())); });
}

void GradScaler::unscale_(const NnModule& module) {
  guarded("GradScaler.unscale_", [&] {
    torch::NoGradGuard no_grad;
    Impl& s = *impl_;
    // _unscale_grads_: inv_scale = 1 / scale in float64 rounded to float32, found_inf per device.
    torch::Tensor inv = s.scale.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
    s.found_inf = torch::zeros({}, torch::kFloat32);
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : module.module->parameters())
      if (p.grad().defined()) grads.push_back(p.grad());
    at::_amp_foreach_non_finite_check_and_unscale_(grads, s.found_inf, inv);
    s.unscaled = true;
  });
}

bool GradScaler::step(AdamW& opt) {
  // The module's parameters are the optimizer's: unscale through the optimizer's own list.
  if (!impl_->unscaled) throw RefError("GradScaler.step: call unscale_(module) first in this reference");
  const bool ok = guarded("GradScaler.step", [&] { return impl_->found_inf.item<float>() == 0.f; });
  if (ok) opt.step();
  return ok;
}

void GradScaler::update() {
  guarded("GradScaler.update", [&] {
    Impl& s = *impl_;
    at::_amp_update_scale_(s.scale, s.growth_tracker, s.found_inf, s.growth_factor, s.backoff_factor,
                           s.growth_interval);
    s.unscaled = false;
  });
}

double GradScaler::get_scale() const { return impl_->scale.item<double>(); }

// ---- ReduceLROnPlateau ----

struct ReduceLROnPlateau::Impl {
  std::unique_ptr<torch::optim::ReduceLROnPlateauScheduler> s;
};

ReduceLROnPlateau::ReduceLROnPlateau(AdamW& opt, const std::string& mode, double factor, int64_t patience,
                                     double threshold, const std::string& threshold_mode, int64_t cooldown,
                                     double min_lr, double eps)
    : impl_(std::make_unique<Impl>()) {
  if (!opt.impl_->opt) throw RefError("ReduceLROnPlateau: needs a Kind::Standard AdamW");
  using S = torch::optim::ReduceLROnPlateauScheduler;
  guarded("ReduceLROnPlateau", [&] {
    impl_->s = std::make_unique<S>(*opt.impl_->opt, mode == "max" ? S::max : S::min, float(factor), int(patience),
                                   threshold, threshold_mode == "abs" ? S::abs : S::rel, int(cooldown),
                                   std::vector<float>{float(min_lr)}, eps);
  });
}

ReduceLROnPlateau::~ReduceLROnPlateau() = default;

void ReduceLROnPlateau::step(double metric) {
  guarded("ReduceLROnPlateau.step", [&] { impl_->s->step(float(metric)); });
}

double clip_grad_norm(const NnModule& module, double max_norm) {
  return guarded("clip_grad_norm_",
                 [&] { return torch::nn::utils::clip_grad_norm_(module.module->parameters(), max_norm); });
}

}  // namespace tb::ref
