// What every op family shares: PyTorch's result_type (dimensioned tensors outrank 0-dim tensors,
// which outrank Python scalars, unless the lower one is of a higher category: bool < int < float)
// and the handling of out= arguments, and the check that keeps a bare kernel from dropping an
// autograd graph (Note [Bare kernels]).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "engine/core/profiler.h"
#include "engine/core/scalar.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/grad_mode_flag.h"
#include "engine/tensor/tensor.h"

namespace tb::ops {

// A Python-style number argument (bool, int or float): see engine/core/scalar.h.
using core::Scalar;

// Result dtype of an op over tensors a and b (dimensioned tensors outrank 0-dim ones).
DType result_type(const Tensor& a, const Tensor& b);
// The same over up to any number of tensors (null entries are skipped): clamp, where.
DType result_type(std::initializer_list<const Tensor*> ts);
// Result dtype of a tensor with a scalar (a scalar of a higher category wins).
DType result_type(const Tensor& a, const Scalar& s);
// A dtype combined with a scalar's category (clamp with scalar bounds).
DType combine_scalar(DType t, const Scalar& s);
// Float ops on integer inputs compute in float32 (PyTorch's default dtype), like torch.sqrt(int).
inline DType to_float_dtype(DType t) { return core::is_floating(t) ? t : DType::Float32; }

// Validates or allocates an out= tensor: a defined `out` of another shape is resized in place (as
// PyTorch does) and its dtype must be one the result can be cast to; returns the tensor to write.
Tensor prepare_out(Tensor* out, const Shape& shape, DType dtype, const char* op);

// Note [Bare kernels]
// tb::ops functions are bare kernels: they compute values and record no autograd graph. The op
// API users call is tb:: (engine/autograd/functions.h): it records a graph when grad mode is on
// and an input requires grad, as LibTorch's ops do, and runs these kernels with grad mode off
// (autograd::kernel), as do backward formulas. So that a kernel can never silently drop a graph,
// every kernel of a differentiable op (its forward, in-place and out= forms) starts with a
// BareKernel guard: with grad mode on, a tensor argument that requires grad (an input, the
// in-place self or out) is an error naming the differentiable function to call. Ops without a
// gradient in LibTorch either (comparisons, logical ops, argmax, nonzero, ...) and the backward
// kernels (called with grad mode off) need no check. Cost: one thread-local read while grad mode
// is off; one pointer test per tensor while it is on.
//
// The guard is also the kernel's event in a profile (profiler::OpScope, with its inputs' shapes
// and dtypes): a kernel called by a backward formula shows inside its node ("mul" inside
// "MulBackward0"), as aten::mul does in PyTorch's traces, and so does one called by an optimizer
// or a user. Inside the differentiable op of the same name it records nothing (the op's own event
// is that call). Off: one relaxed load more.
[[noreturn]] void bare_kernel_error(const char* op);
inline bool requires_grad_here(const Tensor& t) {
  return t.defined() && t.impl()->autograd_meta && requires_grad_hook()(t);
}

// A kernel's event in a profile (profiler::OpScope with its inputs' shapes and dtypes), none
// inside an op event of the same name. Off: one relaxed load.
class KernelEvent {
 public:
  KernelEvent(const char* op, std::initializer_list<const Tensor*> args) : prof_(op) {
    if (prof_.active()) record_inputs(args);
  }
  KernelEvent(const char* op, const std::vector<Tensor>& args) : prof_(op) {
    if (prof_.active()) record_inputs(args);
  }
  KernelEvent(const KernelEvent&) = delete;
  KernelEvent& operator=(const KernelEvent&) = delete;

 private:
  void record_inputs(std::initializer_list<const Tensor*> args);  // null pointers (no out=) left out
  void record_inputs(const std::vector<Tensor>& args);
  profiler::OpScope prof_;
};

class BareKernel {
 public:
  BareKernel(const char* op, std::initializer_list<const Tensor*> args) : event_(op, args) {
    if (!grad_mode_flag()) return;
    for (const Tensor* t : args)
      if (t && requires_grad_here(*t)) bare_kernel_error(op);
  }
  BareKernel(const char* op, const std::vector<Tensor>& args) : event_(op, args) {
    if (!grad_mode_flag()) return;
    for (const Tensor& t : args)
      if (requires_grad_here(t)) bare_kernel_error(op);
  }
  BareKernel(const BareKernel&) = delete;
  BareKernel& operator=(const BareKernel&) = delete;

 private:
  KernelEvent event_;
};

// Note [Backward kernels]
// The kernels that only backward formulas call (gelu_backward, softmax_backward_data,
// convolution_backward, ...) have no differentiable op and no grad check (they run with grad mode
// off), but each starts with a KernelEvent, so a profile shows it inside its node
// ("gelu_backward" inside "GeluBackward0"), as aten::gelu_backward shows in PyTorch's traces,
// and the node's self time is what the node adds around its kernels.

}  // namespace tb::ops
