// Normalisation ops, named and typed like LibTorch's: softmax and log_softmax along a dim
// (optionally casting the input to `dtype` first), layer_norm over the trailing
// normalized_shape, and functional batch_norm (training mode normalises with the batch's
// biased variance and updates running_mean/running_var in place with the unbiased one).
// Floating inputs only, as in PyTorch. Kernels: nn_norm.cpp over cpu/reduce_kernel.h; the
// fused backward kernels (named like ATen's) sit beside their forwards.
// Statistics tensors (mean, rstd, invstd) are in the opmath dtype (float for bf16/f16).
#pragma once
#include <array>
#include <optional>
#include <tuple>

#include "engine/ops/common.h"

namespace tb::ops {

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
// Softmax along the last dim of x (..., L, S) with row i seeing columns j <= i only (the causal
// mask of attention, aligned top-left as triu(ones(L, S), 1)): equal to
// softmax(x.masked_fill(triu(ones(L, S), 1), -inf), -1) without the masked copy; masked entries
// are exactly 0, so softmax_backward_data is its backward too.
Tensor softmax_causal(const Tensor& x);
// grad, output: the same shape, any strides; output is softmax's (log_softmax's) result. Returns
// d(input) in output's dtype: y * (g - sum(g * y)) and g - exp(y) * sum(g) along dim.
Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim);
Tensor log_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim);

// x: (..., *normalized_shape); weight, bias: normalized_shape or undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// The same, also returning mean and rstd = 1/sqrt(var + eps) per row: (M) for M = x.numel() / N.
std::tuple<Tensor, Tensor, Tensor> layer_norm_with_stats(const Tensor& x, const Shape& normalized_shape,
                                                         const Tensor& weight = {}, const Tensor& bias = {},
                                                         double eps = 1e-5);
// grad, x: (..., *normalized_shape); mean, rstd: (M) from layer_norm_with_stats; weight: normalized_shape or
// undefined. Returns (d x, d weight, d bias), each undefined where mask says it is not wanted.
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& x,
                                                       const Shape& normalized_shape, const Tensor& mean,
                                                       const Tensor& rstd, const Tensor& weight,
                                                       std::array<bool, 3> mask = {true, true, true});

// x: (N, C, *); weight, bias: (C) or undefined. Statistics per (sample, group of C / num_groups channels).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// The same, also returning mean and rstd: (N, num_groups).
std::tuple<Tensor, Tensor, Tensor> group_norm_with_stats(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                                                         const Tensor& bias = {}, double eps = 1e-5);
// grad, x: (N, C, *); mean, rstd: (N, G); weight: (C) or undefined. Returns (d x, d weight, d bias).
std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean,
                                                       const Tensor& rstd, const Tensor& weight, int64_t num_groups,
                                                       std::array<bool, 3> mask = {true, true, true});

// x: (N, C, ...); running_mean, running_var, weight, bias: (C) or undefined. Running stats are
// required when !training and updated in place when training.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// The same, also returning the statistics it normalised with: (C) float64 mean and invstd (the
// batch's when training, the running ones otherwise), as ATen's save_mean / save_invstd.
std::tuple<Tensor, Tensor, Tensor> batch_norm_with_stats(const Tensor& x, const Tensor& running_mean,
                                                         const Tensor& running_var, const Tensor& weight,
                                                         const Tensor& bias, bool training, double momentum = 0.1,
                                                         double eps = 1e-5);
// grad, x: (N, C, ...); mean, invstd: (C) from batch_norm_with_stats; weight: (C) or undefined.
// training: the gradient flows through the batch statistics; otherwise d x = g * weight * invstd.
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                       const Tensor& mean, const Tensor& invstd, bool training,
                                                       std::array<bool, 3> mask = {true, true, true});

}  // namespace tb::ops
