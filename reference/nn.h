// LibTorch counterparts of engine/ops/nn.h (no LibTorch in this header).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "reference/tensor.h"

namespace tb::ref {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups);
// (grad_input, grad_weight) of conv2d without bias, at::convolution_backward (the kernel autograd
// runs for a convolution's node).
std::pair<Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& x, const Tensor& weight,
                                               const Shape& stride, const Shape& padding, const Shape& dilation,
                                               int64_t groups);
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode);
// (out, int64 indices), torch::max_pool2d_with_indices.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode);
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
// torch::dropout with torch's global generator seeded by `seed` first.
Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0);

}  // namespace tb::ref
