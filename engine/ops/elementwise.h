// Elementwise ops: unary math and activations, binary arithmetic with broadcasting, comparisons,
// logical ops, clamp and where, and the activations' fused backward kernels. Names, arguments,
// type promotion, supported dtypes and errors follow LibTorch's C++ API (torch::add,
// torch::add_out, Tensor::add_ ...): in-place forms are `op_(self, ...)` and bump self's version,
// out= forms are `op_out(out, ...)` and return `out`.
// Kernels live in engine/ops/cpu/elementwise_*.cpp; this header is the whole public surface.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "engine/ops/common.h"

namespace tb::ops {

// Note [Op lists]
// Each regular op group is listed once, here: its list expands into the kernel declarations below,
// into the public tb:: declarations (engine/autograd/functions.h) and into the LibTorch reference
// (reference/elementwise.h, and reference/elementwise.cpp where the LibTorch call has the same
// name), so adding an op of such a group is one entry in its list plus its kernel. Irregular
// signatures are declared one by one.
//
// Unary math, forms op(x), op_(self), op_out(out, x): integer and bool inputs compute in float32,
// like torch.exp(int).
#define TB_UNARY_FLOAT_OPS(X) \
  X(exp) X(expm1) X(log) X(log1p) X(sqrt) X(rsqrt) X(reciprocal) X(sin) X(cos) X(tanh) X(sigmoid)
// Unary, dtype-preserving, the same forms: neg and abs refuse bool, sign accepts it.
#define TB_UNARY_SAME_DTYPE_OPS(X) X(neg) X(abs) X(sign)
// Comparisons, forms op(a, b), op(a, scalar), op_(self, b), op_out(out, a, b): bool results (in
// place: written into self's dtype as 0/1). No gradient.
#define TB_COMPARISON_OPS(X) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)
// Logical ops, forms op(a, b), op_(self, b), op_out(out, a, b): nonzero is true; bool results (in
// place: self's dtype). logical_not has the unary forms. No gradient.
#define TB_LOGICAL_OPS(X) X(logical_and) X(logical_or) X(logical_xor)

#define TB_UNARY_KERNELS(op)   \
  Tensor op(const Tensor& x);  \
  Tensor& op##_(Tensor& self); \
  Tensor& op##_out(Tensor& out, const Tensor& x);
#define TB_COMPARISON_KERNELS(op)               \
  Tensor op(const Tensor& a, const Tensor& b);  \
  Tensor op(const Tensor& a, const Scalar& b);  \
  Tensor& op##_(Tensor& self, const Tensor& b); \
  Tensor& op##_out(Tensor& out, const Tensor& a, const Tensor& b);
#define TB_LOGICAL_KERNELS(op)                  \
  Tensor op(const Tensor& a, const Tensor& b);  \
  Tensor& op##_(Tensor& self, const Tensor& b); \
  Tensor& op##_out(Tensor& out, const Tensor& a, const Tensor& b);
TB_UNARY_FLOAT_OPS(TB_UNARY_KERNELS)
TB_UNARY_SAME_DTYPE_OPS(TB_UNARY_KERNELS)
TB_UNARY_KERNELS(logical_not)
TB_COMPARISON_OPS(TB_COMPARISON_KERNELS)
TB_LOGICAL_OPS(TB_LOGICAL_KERNELS)
#undef TB_UNARY_KERNELS
#undef TB_COMPARISON_KERNELS
#undef TB_LOGICAL_KERNELS

// ---- activations: relu on any numeric dtype (LibTorch has no relu out=); the rest on floats ----
Tensor relu(const Tensor& x);
Tensor& relu_(Tensor& self);
// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor& gelu_(Tensor& self, const std::string& approximate = "none");
Tensor& gelu_out(Tensor& out, const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor& silu_(Tensor& self);
Tensor& silu_out(Tensor& out, const Tensor& x);
// x where beta * x > threshold, else log1p(exp(beta * x)) / beta.
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
Tensor& softplus_out(Tensor& out, const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);

// ---- backward kernels: the fused gradients of the activations, as LibTorch's at:: functions ----
// grad_output and self (or output) broadcast together, any strides; floating dtypes only; the
// result has result_type(grad_output, self). Kernels in cpu/elementwise_backward.cpp.
// grad_output where self > threshold, else 0 (relu's backward, from relu's output).
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold);
// grad_output * gelu'(self), for approximate "none" (erf) or "tanh".
Tensor gelu_backward(const Tensor& grad_output, const Tensor& self, const std::string& approximate = "none");
// grad_output * s (1 + self (1 - s)), s = sigmoid(self).
Tensor silu_backward(const Tensor& grad_output, const Tensor& self);
// From the forward's output y: grad_output * (1 - y) * y and grad_output * (1 - y * y).
Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output);
Tensor tanh_backward(const Tensor& grad_output, const Tensor& output);
// grad_output where beta * self > threshold, else grad_output * z / (z + 1), z = exp(beta * self).
Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, const Scalar& beta, const Scalar& threshold);

// ---- predicates (bool results) ----
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// ---- binary arithmetic (broadcasting, PyTorch promotion) ----
// a + alpha * b; bool + bool is logical or; an integral result refuses a float alpha.
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
// a - alpha * b; any bool operand is an error, as in PyTorch.
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_out(Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor& mul_(Tensor& self, const Tensor& b);
Tensor& mul_(Tensor& self, const Scalar& b);
Tensor& mul_out(Tensor& out, const Tensor& a, const Tensor& b);
// rounding_mode: none (true division, integers -> float32), "trunc" or "floor" (integers stay
// integers; integer division by zero is an error, as in PyTorch).
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode = std::nullopt);
Tensor div(const Tensor& a, const Scalar& b, const std::optional<std::string>& rounding_mode = std::nullopt);
Tensor& div_(Tensor& self, const Tensor& b, const std::optional<std::string>& rounding_mode = std::nullopt);
Tensor& div_(Tensor& self, const Scalar& b, const std::optional<std::string>& rounding_mode = std::nullopt);
Tensor& div_out(Tensor& out, const Tensor& a, const Tensor& b,
                const std::optional<std::string>& rounding_mode = std::nullopt);
// Python's %: the result has the sign of the divisor.
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor& remainder_(Tensor& self, const Tensor& b);
Tensor& remainder_(Tensor& self, const Scalar& b);
Tensor& remainder_out(Tensor& out, const Tensor& a, const Tensor& b);
// Integer powers stay integers (negative integer exponents of a tensor are an error for a
// scalar exponent, and give 0 / +-1 for a tensor exponent, as in PyTorch).
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor& pow_(Tensor& self, const Tensor& b);
Tensor& pow_(Tensor& self, const Scalar& b);
Tensor& pow_out(Tensor& out, const Tensor& a, const Tensor& b);
// NaN-propagating elementwise max/min.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor& maximum_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor& minimum_out(Tensor& out, const Tensor& a, const Tensor& b);

// ---- clamp: min(max(x, lo), hi); at least one bound; lo > hi gives hi everywhere ----
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor& clamp_(Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor& clamp_out(Tensor& out, const Tensor& x, const std::optional<Scalar>& min,
                  const std::optional<Scalar>& max = std::nullopt);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor& clamp_(Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor& clamp_out(Tensor& out, const Tensor& x, const std::optional<Tensor>& min,
                  const std::optional<Tensor>& max = std::nullopt);

// ---- where: cond must be bool; the result has result_type(a, b) ----
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor& where_out(Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace tb::ops
