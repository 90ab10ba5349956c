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

double clip_grad_norm(const NnModule& module, double max_norm) {
  return guarded("clip_grad_norm_",
                 [&] { return torch::nn::utils::clip_grad_norm_(module.module->parameters(), max_norm); });
}

}  // namespace tb::ref
