// Gradient clipping as torch.nn.utils.clip_grad_norm_ / clip_grad_value_ (torch 2.11): the
// gradients of the given parameters are changed in place; parameters without a gradient are
// skipped. Not an optimizer: call it between backward() and step().
#pragma once
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::optim {

// Scales every gradient by min(max_norm / (total_norm + 1e-6), 1) and returns the total norm of
// all gradients viewed as one vector: a 0-dim tensor of the gradients' (promoted) dtype, float32
// for float32 gradients and when there are none (then 0). norm_type may be any p > 0, 0 (count of
// non-zeros) or +-infinity. error_if_nonfinite: a NaN/Inf total norm is an error naming the norm
// instead of scaling by it.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient to [-clip_value, clip_value] (NaN stays NaN).
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace tb::optim
