// SGD with momentum, dampening, Nesterov, weight decay and maximize: torch.optim.SGD's
// single-tensor algorithm (torch 2.11), one fused pass per parameter. Not a scheduler.
#pragma once
#include "engine/optim/optimizer.h"

namespace tb::optim {

class SGD : public Optimizer {
 public:
  struct Options {
    double lr = 1e-3;
    double momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false, maximize = false;
  };
  SGD(std::vector<Tensor> params, Options o);
  SGD(std::vector<ParamGroup> groups, Options defaults);
  void step() override;

  static nlohmann::json to_json(const Options& o);

 protected:
  void check_options(const nlohmann::json& options) const override;
};

}  // namespace tb::optim
