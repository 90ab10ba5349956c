// Conv2d, as torch.nn.Conv2d with padding_mode "zeros": weight (out, in / groups, kH, kW),
// bias (out); PyTorch's init.
#pragma once
#include "engine/nn/module.h"

namespace tb::nn {

struct Conv2dOptions {
  int64_t in_channels = 1, out_channels = 1;
  Shape kernel_size = {1, 1};
  Shape stride = {1, 1}, padding = {0, 0}, dilation = {1, 1};
  int64_t groups = 1;
  bool bias = true;
  DType dtype = DType::Float32;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& o);
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t padding = 0, bool bias = true,
         DType dtype = DType::Float32);
  // x: (N, Cin, H, W) or (Cin, H, W) -> (N, Cout, Ho, Wo)
  Tensor forward(const Tensor& x) override;
  // kaiming_uniform_(a = sqrt(5)) with fan_in = Cin / groups * kH * kW; bias U(-1/sqrt(fan_in), ..).
  void reset_parameters(core::Generator* gen = nullptr);

  Conv2dOptions options;
  Tensor weight, bias;
};

}  // namespace tb::nn
