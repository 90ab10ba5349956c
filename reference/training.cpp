#include "reference/training.h"

#include "reference/torch_access.h"

namespace tb::ref {

struct AdamW::Impl {
  std::unique_ptr<torch::optim::AdamW> opt;
};

AdamW::AdamW(const NnModule& module, double lr, double beta1, double beta2, double eps, double weight_decay)
    : impl_(std::make_unique<Impl>()) {
  guarded("AdamW", [&] {
    impl_->opt = std::make_unique<torch::optim::AdamW>(
        module.module->parameters(),
        torch::optim::AdamWOptions(lr).betas({beta1, beta2}).eps(eps).weight_decay(weight_decay));
  });
}

AdamW::~AdamW() = default;

void AdamW::set_lr(double lr) {
  for (auto& g : impl_->opt->param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

void AdamW::zero_grad() { impl_->opt->zero_grad(/*set_to_none=*/true); }

void AdamW::step() {
  guarded("AdamW.step", [&] { impl_->opt->step(); });
}

double clip_grad_norm(const NnModule& module, double max_norm) {
  return guarded("clip_grad_norm_",
                 [&] { return torch::nn::utils::clip_grad_norm_(module.module->parameters(), max_norm); });
}

}  // namespace tb::ref
