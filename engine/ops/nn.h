// nn ops without normalisation, named and shaped like torch::nn::functional / at::: conv2d,
// max_pool2d, avg_pool2d, embedding, dropout, one_hot, pad. Spatial ops take (N, C, H, W) or
// unbatched (C, H, W) inputs; size arguments take one value (used for both dims) or two (H, W).
// Kernels: conv2d in cpu/conv2d.cpp (oneDNN for float32, float16/bfloat16 through float32, an
// im2col + gemm loop for float64), pooling in cpu/pool2d.cpp, the rest in nn.cpp. The backward
// kernels (named like at::) sit at the end: convolution in cpu/conv2d.cpp, pooling in
// cpu/pool2d.cpp, padding in nn.cpp, embedding and dropout in cpu/nn_backward.cpp.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <tuple>

#include "engine/core/rng.h"
#include "engine/ops/common.h"

namespace tb::ops {

// x: (N, Cin, H, W) or (Cin, H, W); weight: (Cout, Cin / groups, kH, kW); bias: (Cout) or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Shape& stride = {1},
              const Shape& padding = {0}, const Shape& dilation = {1}, int64_t groups = 1);
// An empty `stride` means stride = kernel_size, as in PyTorch. NaN wins a max window.
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// weight: (V, D), indices: int64/int32 of any shape -> indices.shape + (D). padding_idx only matters
// for the gradient; an index outside [0, V) is an error.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p); identity when not
// training. Draws from `gen` (default_generator() when null), reproducible at any thread count.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, core::Generator* gen = nullptr);
// indices: int64 -> int64 of shape indices.shape + (num_classes); -1 infers max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// pad = (last_left, last_right, second_last_left, ...), like torch.nn.functional.pad. "constant"
// takes any number of dims (negative pads crop); "reflect" and "replicate" pad the last one or
// two dims of a (C, W)/(N, C, W) or (C, H, W)/(N, C, H, W) input.
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0);

// max_pool2d plus, per output element, the flat index h * W + w of its input element inside its
// (H, W) plane (int64, the output's shape). Ties keep the first element of the window in
// row-major order; a NaN takes the index (the last NaN of the window), as PyTorch.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                                                   const Shape& padding = {0}, const Shape& dilation = {1},
                                                   bool ceil_mode = false);
// torch.native_dropout: (output, mask) where mask (bool, x's shape) marks the kept elements. The
// same draws as dropout() from the same generator state. Not training: (x, all true).
std::tuple<Tensor, Tensor> native_dropout(const Tensor& x, double p, bool training, core::Generator* gen = nullptr);

// ---- backward kernels; gradients come back in the grad's dtype, contiguous ----

// grad_output: (N, Cout, OH, OW) or unbatched (Cout, OH, OW), any strides; x and weight as in the
// forward. Returns (grad_input, grad_weight, grad_bias); output_mask says which to compute (the
// others are undefined). float32 runs oneDNN's backward primitives, float16/bfloat16 compute in
// float32 and round once, float64 im2col + gemm with col2im.
std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& x,
                                                        const Tensor& weight, const Shape& stride, const Shape& padding,
                                                        const Shape& dilation, int64_t groups,
                                                        std::array<bool, 3> output_mask);
// Tests only: the oneDNN primitives (convolutions and reorders) conv2d and convolution_backward
// have created in this process; once a shape has run, running it again adds none (Note
// [Convolution primitive cache] in cpu/conv2d.cpp).
int64_t conv2d_primitives_created();
// grad_output: the pooled shape; indices: from max_pool2d_with_indices. Each output's gradient is
// added to the input element its index names. input_sizes: (N, C, H, W) or (C, H, W).
Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Shape& input_sizes, const Tensor& indices);
// Each output's gradient, divided as in the forward, is spread over its window's input elements.
Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_sizes, const Shape& kernel_size,
                           const Shape& stride, const Shape& padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override);
// grad_output: indices.shape + (D) -> (num_weights, D): rows of repeated indices accumulate, the
// padding_idx row stays zero (padding_idx < 0: none).
Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx);
// grad * mask * scale (mask: bool, grad's shape).
Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale);
// The gradient of pad(x, pad, mode) for mode "reflect" or "replicate": each output element's
// gradient is added to the input element it copies. ("constant": pad(grad, -pad).)
Tensor pad_backward(const Tensor& grad_output, const Shape& input_sizes, const Shape& pad, const std::string& mode);

}  // namespace tb::ops
