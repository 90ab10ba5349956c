// CPU autocast (mixed precision), as LibTorch's CPU autocast does it in torch 2.x: inside an
// AutocastGuard, the ops of the lower-precision list run in the autocast dtype (bfloat16 by
// default) and the ops of the float32 list run in float32; every other op runs in the dtype of
// its inputs (ordinary promotion). The lists, checked against the pinned LibTorch:
//   lower precision: mm, bmm, matmul, addmm, linear, conv2d, einsum
//   float32:         prod, nll_loss, cross_entropy, mse_loss, l1_loss,
//                    binary_cross_entropy_with_logits, pad (reflect, replicate)
// (softmax, the norms and the other reductions are NOT cast by LibTorch on the CPU: they follow
// their input's dtype and compute in float internally.) Casts are differentiable (Tensor::to),
// so gradients flow back to the float32 parameters in float32. Backward closures never autocast:
// each backward runs in the dtypes its forward ran in.
//
// Note [Autocast weight cache]
// As LibTorch's autocast, the lower-precision copy of a leaf that requires grad (a parameter) is
// cached while grad mode is on, so a weight used twice in a forward is cast once. The cache lives
// while an AutocastGuard or an AutocastCacheScope is alive on this thread and is emptied when the
// last one ends (PyTorch empties it on leaving the outermost autocast region). A Trainer holds an
// AutocastCacheScope over the micro-batches of one optimizer step, so gradient accumulation casts
// each weight once per optimizer step. Unlike PyTorch's, an entry remembers the weight's version:
// a weight changed in place (an optimizer step inside the scope) is cast again, never served
// stale. The cast's backward node saves nothing, so several backwards may run through it.
#pragma once
#include "engine/core/dtype.h"
#include "engine/tensor/tensor.h"

namespace tb::autograd {

bool autocast_enabled();
DType autocast_dtype();

class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled = true, DType dtype = DType::BFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool prev_enabled_;
  DType prev_dtype_;
};

// Keeps the weight cache alive across AutocastGuards (Note [Autocast weight cache]).
class AutocastCacheScope {
 public:
  AutocastCacheScope();
  ~AutocastCacheScope();
  AutocastCacheScope(const AutocastCacheScope&) = delete;
  AutocastCacheScope& operator=(const AutocastCacheScope&) = delete;
};
// Number of cached casts on this thread (for tests and memory accounting).
size_t autocast_cache_size();

// For the functions of the two lists: a floating tensor in the list's dtype when autocast is on,
// else `t` itself. Undefined tensors pass through.
Tensor autocast_lower(const Tensor& t);
Tensor autocast_fp32(const Tensor& t);

}  // namespace tb::autograd
