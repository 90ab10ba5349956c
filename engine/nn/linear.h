// Linear: y = x W^T + b, as torch.nn.Linear (weight (out, in), bias (out); PyTorch's init).
#pragma once
#include "engine/nn/module.h"

namespace tb::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = DType::Float32);
  // x: (*, in_features) -> (*, out_features)
  Tensor forward(const Tensor& x) override;
  // weight: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)); bias the same bound.
  void reset_parameters(core::Generator* gen = nullptr);

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined without bias
};

}  // namespace tb::nn
