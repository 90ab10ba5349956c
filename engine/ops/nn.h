// nn ops without normalisation, named and shaped like torch::nn::functional / at::: conv2d,
// max_pool2d, avg_pool2d, embedding, dropout, one_hot, pad. Spatial ops take (N, C, H, W) or
// unbatched (C, H, W) inputs; size arguments take one value (used for both dims) or two (H, W).
// Kernels: conv2d in cpu/conv2d.cpp (oneDNN for float32, float16/bfloat16 through float32, an
// im2col + gemm loop for float64), pooling in cpu/pool2d.cpp, the rest in nn.cpp.
#pragma once
#include <optional>
#include <string>

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

}  // namespace tb::ops
