// CPU autocast (mixed precision), as LibTorch's CPU autocast does it in torch 2.x: inside an
// AutocastGuard, the ops of the lower-precision list run in the autocast dtype (bfloat16 by
// default) and the ops of the float32 list run in float32; every other op runs in the dtype of
// its inputs (ordinary promotion). The lists, checked against the pinned LibTorch:
//   lower precision: mm, bmm, matmul, addmm, linear, conv2d, einsum where it contracts a label
//                    of two operands (LibTorch's reaches bmm only then; "ij->j", "i,j->ij" or
//                    "ij,ij->ij" run in their inputs' dtype)
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
// each weight once per optimizer step. Unlike PyTorch's, an entry remembers the weight's version
// (the counter and its value: FSDP re-points a layer's weight at its master's counter): a weight
// changed in place (an optimizer step inside the scope, a checkpoint load) is cast again, never
// served stale. So every write to a weight must bump its version, raw ones included (a
// checkpoint's reads, FSDP's gathers). The cast's backward node saves nothing, so several backwards may run through it.
//
// Note [Autocast weight shadows]
// Without help, every step casts every weight again: the optimizer has just written the float32
// weights, and the next forward reads them all once more to round them to bfloat16 (0.35 ms of
// the MLP's 7.3 ms bfloat16 step on a Zen 4 host). So the cast of a float32 parameter to bfloat16
// registers the parameter for a shadow: the fused Adam/AdamW step asks autocast_shadow_buffer for
// a bfloat16 buffer and writes each updated value's rounding into it while the value is still in
// registers' reach (chunks of a few KiB, the same conversion as Tensor::to, so the bits are the
// cast's), then autocast_shadow_written records the version the step left the parameter at. The
// next cast of the parameter at exactly that version is the shadow (a fresh tensor on its storage,
// with the cast's own backward node); any other write to the parameter bumps its version and the
// cast is made afresh. The registry holds parameters weakly (an entry dies with its parameter) and
// a shadow buffer is refilled in place only while no cast handed out still holds it, so a graph
// kept from an earlier step never sees its saved weights change. A shadow costs a bfloat16 copy
// of each such parameter between steps (tagged parameter); a step after which no forward cast the
// parameter (training went on in float32, or only evaluated) drops it and writes no more until a
// cast asks again; autocast_shadows_clear() drops them all.
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

// Note [Autocast weight shadows]. For an optimizer's fused step over a contiguous float32
// parameter: the contiguous bfloat16 buffer of param's shape to write the rounding of its updated
// values into, or an undefined tensor when autocast has not cast param to bfloat16 (nothing to
// write). Until autocast_shadow_written(param), the parameter has no valid shadow.
Tensor autocast_shadow_buffer(const Tensor& param);
// The step has written param and its shadow and bumped param's version: the shadow is valid at
// that version.
void autocast_shadow_written(const Tensor& param);
// Drops every shadow (their memory goes back to the allocator); for tests and memory accounting.
void autocast_shadows_clear();
size_t autocast_shadow_count();  // parameters registered for a shadow
// param's shadow when it is valid at param's current version, else undefined (for tests).
Tensor autocast_valid_shadow(const Tensor& param);

}  // namespace tb::autograd
