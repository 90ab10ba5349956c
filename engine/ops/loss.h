// Loss functions, named and typed like LibTorch's (torch::nn::functional): nll_loss, cross_entropy
// (class-index or class-probability targets, label smoothing), mse_loss, l1_loss and
// binary_cross_entropy_with_logits, with their forward/backward kernels (nll_loss_forward /
// nll_loss_backward as ATen's; cross_entropy_forward / cross_entropy_backward fuse log_softmax with
// the loss). reduction is "mean", "sum" or "none". The class dim is dim 1 (dim 0 for an
// unbatched (C) input). Kernels: loss.cpp.
#pragma once
#include <string>
#include <tuple>

#include "engine/ops/common.h"

namespace tb::ops {

// input: (N, C) or (N, C, d1, ...) log-probabilities, any strides; target: int64 (N), () or
// (N, d1, ...); weight: (C) or undefined. mean divides by the summed weight of the non-ignored
// targets (NaN when there is none, as PyTorch). A target outside [0, C) other than ignore_index
// is an error.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
// (loss, total_weight): total_weight is the 0-dim sum of the non-ignored targets' weights.
std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& input, const Tensor& target, const Tensor& weight,
                                            const std::string& reduction, int64_t ignore_index);
// grad_output: the loss's shape. Returns d input (input's shape and dtype, contiguous).
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& input, const Tensor& target, const Tensor& weight,
                         const std::string& reduction, int64_t ignore_index, const Tensor& total_weight);

// input: logits as for nll_loss, or an unbatched (C) with a 0-dim target; target: int64 class indices (as nll_loss) or floating class
// probabilities of input's shape.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100, double label_smoothing = 0.0);
// (loss, log_probs, denominator): log_probs = log_softmax(input, class dim) in input's dtype;
// denominator: 0-dim float64, what a mean reduction divided by (1 otherwise).
std::tuple<Tensor, Tensor, Tensor> cross_entropy_forward(const Tensor& input, const Tensor& target,
                                                         const Tensor& weight, const std::string& reduction,
                                                         int64_t ignore_index, double label_smoothing);
// (d input, d target): d target only for probability targets when want_target.
std::tuple<Tensor, Tensor> cross_entropy_backward(const Tensor& grad_output, const Tensor& log_probs,
                                                  const Tensor& target, const Tensor& weight,
                                                  const std::string& reduction, int64_t ignore_index,
                                                  double label_smoothing, const Tensor& denominator,
                                                  bool want_target = false);

// input, target: broadcastable (LibTorch warns when their shapes differ; so do we not).
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// loss = weight * ((1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)); weight, pos_weight broadcast.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const std::string& reduction = "mean", const Tensor& pos_weight = {});

// Applies reduction "mean" / "sum" / "none" to an elementwise loss (an error for any other string).
Tensor apply_loss_reduction(const Tensor& loss, const std::string& reduction);

}  // namespace tb::ops
