// Normalisation ops, named and typed like LibTorch's: softmax and log_softmax along a dim
// (optionally casting the input to `dtype` first), layer_norm over the trailing
// normalized_shape, and functional batch_norm (training mode normalises with the batch's
// biased variance and updates running_mean/running_var in place with the unbiased one).
// Floating inputs only, as in PyTorch. Kernels: nn_norm.cpp over cpu/reduce_kernel.h.
#pragma once
#include <optional>

#include "engine/ops/common.h"

namespace tb::ops {

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// x: (..., *normalized_shape); weight, bias: normalized_shape or undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// x: (N, C, ...); running_mean, running_var, weight, bias: (C) or undefined. Running stats are
// required when !training and updated in place when training.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

}  // namespace tb::ops
