// LibTorch references of the nn_norm family (engine/ops/nn_norm.h).
#pragma once
#include <optional>

#include "reference/tensor.h"

namespace tb::ref {

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// torch::nn::functional::batch_norm; running stats (if defined) are updated in place.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

}  // namespace tb::ref
