// Adam and AdamW: torch.optim.Adam/AdamW's single-tensor algorithm (torch 2.11) with amsgrad,
// maximize and weight decay (L2 for Adam, decoupled for AdamW), one fused pass per parameter.
// State per parameter, as PyTorch: "step" (0-dim float32), "exp_avg", "exp_avg_sq" and, with
// amsgrad, "max_exp_avg_sq" (in the parameter's dtype and layout).
#pragma once
#include <utility>

#include "engine/optim/optimizer.h"

namespace tb::optim {

class Adam : public Optimizer {
 public:
  struct Options {
    double lr = 1e-3;
    std::pair<double, double> betas{0.9, 0.999};
    double eps = 1e-8, weight_decay = 0;
    bool amsgrad = false, maximize = false;
  };
  Adam(std::vector<Tensor> params, Options o);
  Adam(std::vector<ParamGroup> groups, Options defaults);
  void step() override;

  // PyTorch's defaults dict; `decoupled` is AdamW's decoupled_weight_decay.
  static nlohmann::json to_json(const Options& o, bool decoupled);

 protected:
  struct FromJson {};
  Adam(FromJson, std::vector<ParamGroup> groups, nlohmann::json defaults);  // for AdamW
  void check_options(const nlohmann::json& options) const override;
};

// Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam update.
class AdamW : public Adam {
 public:
  struct Options {
    double lr = 1e-3;
    std::pair<double, double> betas{0.9, 0.999};
    double eps = 1e-8, weight_decay = 1e-2;
    bool amsgrad = false, maximize = false;
  };
  AdamW(std::vector<Tensor> params, Options o);
  AdamW(std::vector<ParamGroup> groups, Options defaults);
};

}  // namespace tb::optim
