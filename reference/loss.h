// LibTorch references of the losses (engine/ops/loss.h): torch::nn::functional with options.
#pragma once
#include <string>

#include "reference/tensor.h"

namespace tb::ref {

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const std::string& reduction = "mean", const Tensor& pos_weight = {});

}  // namespace tb::ref
