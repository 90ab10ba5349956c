// The public op API: tb::<op>, with LibTorch's names, arguments and semantics. A differentiable
// op records its backward when grad mode is on and an input requires grad, as LibTorch's ops do
// (formulas: engine/autograd/functions/<family>.cpp, beside the kernels' families); an op without
// a gradient (comparisons, logical ops, out= forms, in-place forms without a formula, indices) is
// the tb::ops kernel itself, brought in by a using-declaration. Call these, not tb::ops: kernels
// record nothing and refuse an input that requires grad while grad mode is on (Note [Bare
// kernels] in engine/ops/common.h). Tensor's own view and copy methods (view, reshape, transpose,
// narrow, expand, clone, to, copy_, ...) are differentiable already (See Note [Autograd hooks]).
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/ops.h"

namespace tb {

using ops::DimList;
using ops::Scalar;

// ---- unary lists of engine/ops/elementwise.h (Note [Op lists]): op(x) is differentiable
// (functions/elementwise.cpp); op_out is the kernel ----
#define TB_PUBLIC_UNARY(op)   \
  Tensor op(const Tensor& x); \
  using ops::op##_out;
TB_UNARY_FLOAT_OPS(TB_PUBLIC_UNARY)
TB_UNARY_SAME_DTYPE_OPS(TB_PUBLIC_UNARY)  // sign: gradient zero
#undef TB_PUBLIC_UNARY
// In place: exp_, tanh_, sigmoid_, neg_ and relu_ are differentiable (below); these are kernels.
using ops::abs_;
using ops::cos_;
using ops::expm1_;
using ops::log1p_;
using ops::log_;
using ops::reciprocal_;
using ops::rsqrt_;
using ops::sign_;
using ops::sin_;
using ops::sqrt_;

// ---- no gradient: comparisons, logical ops, predicates (the kernels) ----
#define TB_PUBLIC_KERNEL_FORMS(op) \
  using ops::op;                   \
  using ops::op##_;                \
  using ops::op##_out;
TB_COMPARISON_OPS(TB_PUBLIC_KERNEL_FORMS)
TB_LOGICAL_OPS(TB_PUBLIC_KERNEL_FORMS)
TB_PUBLIC_KERNEL_FORMS(logical_not)
#undef TB_PUBLIC_KERNEL_FORMS
using ops::isfinite;
using ops::isinf;
using ops::isnan;

// ---- elementwise (functions/elementwise.cpp) ----
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
Tensor& exp_(Tensor& self);
Tensor& tanh_(Tensor& self);
Tensor& sigmoid_(Tensor& self);
Tensor& relu_(Tensor& self);
Tensor& neg_(Tensor& self);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // ties split the gradient equally, as PyTorch
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);  // d/da = 1, d/db = -floor(a / b)
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor& add_(Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& b);
Tensor& mul_(Tensor& self, const Scalar& b);
Tensor& div_(Tensor& self, const Tensor& b);
Tensor& div_(Tensor& self, const Scalar& b);
Tensor& clamp_(Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);

// ---- reductions (functions/reduce.cpp) ----
Tensor sum(const Tensor& x, std::optional<DType> dtype = {});
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, std::optional<DType> dtype = {});
Tensor max(const Tensor& x);  // ties share the gradient equally, as PyTorch's full max
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // gradient to the index
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const DimList& dims = {}, bool keepdim = false);  // ties share equally
Tensor amin(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, const DimList& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- normalisation (functions/nn_norm.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor softmax_causal(const Tensor& x);  // see ops::softmax_causal
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x: (N, C, ...); running stats are buffers (updated in place when training, never differentiated);
// training differentiates through the batch statistics. group_norm: G groups of C / G channels.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// ---- linear algebra (functions/linalg.cpp) ----
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta = 1, double alpha = 1);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// relu(linear(x, weight, bias)) in one node: one product with the bias and relu in its epilogue,
// and a backward that masks the gradient and sums the bias gradient in one pass.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
Tensor outer(const Tensor& a, const Tensor& b);
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// ---- nn ops (functions/nn.cpp) ----
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Shape& stride = {1},
              const Shape& padding = {0}, const Shape& dilation = {1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {}, const Shape& padding = {0},
                  const Shape& dilation = {1}, bool ceil_mode = false);
// (out, int64 indices): the gradient goes to each window's argmax.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride = {},
                                                   const Shape& padding = {0}, const Shape& dilation = {1},
                                                   bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride = {}, const Shape& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// The gradient row of padding_idx stays zero.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, core::Generator* gen = nullptr);
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant", double value = 0);

// ---- losses (functions/loss.cpp); reduction: "mean", "sum" or "none" ----
// input: (N, C) or (N, C, d1, ...) log-probabilities; target: int64 class indices (N) / (N, d1, ...).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
// target: class indices (int64) or class probabilities (floating, input's shape; differentiable);
// input may also be an unbatched (C) with a 0-dim target. log_softmax and the loss are fused.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// weight and pos_weight are not differentiable (an error if they require grad, as in PyTorch).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const std::string& reduction = "mean", const Tensor& pos_weight = {});

// ---- shape and index ops (functions/index.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim = 0);  // views
std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim = 0);      // views
Tensor repeat(const Tensor& self, const Shape& repeats);
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1);
Tensor masked_fill(const Tensor& self, const Tensor& mask, double value);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);
Tensor masked_select(const Tensor& self, const Tensor& mask);
std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
Tensor tril(const Tensor& self, int64_t diagonal = 0);
Tensor triu(const Tensor& self, int64_t diagonal = 0);

// ---- the forms without a formula: the kernels (an input that requires grad is refused) ----
using ops::add_out;
using ops::all;
using ops::any;
using ops::argmax;
using ops::argmin;
using ops::argsort;
using ops::cat_out;
using ops::clamp_out;
using ops::cumsum_;
using ops::div_out;
using ops::gelu_;
using ops::gelu_out;
using ops::index_add_;
using ops::index_select_out;
using ops::maximum_out;
using ops::mean_out;
using ops::minimum_out;
using ops::mm_out;
using ops::mul_out;
using ops::nonzero;
using ops::one_hot;
using ops::pow_;
using ops::pow_out;
using ops::remainder_;
using ops::remainder_out;
using ops::scatter_;
using ops::scatter_add_;
using ops::silu_;
using ops::silu_out;
using ops::softplus_out;
using ops::split_with_sizes;
using ops::stack_out;
using ops::sub_out;
using ops::sum_out;
using ops::tril_;
using ops::tril_out;
using ops::triu_;
using ops::triu_out;
using ops::where_out;
// Overloads beside differentiable ones: true division (no rounding mode), dense gather and sort
// (always stable) keep their gradient; the rest are the kernels.
inline Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode) {
  return rounding_mode ? ops::div(a, b, rounding_mode) : tb::div(a, b);
}
inline Tensor div(const Tensor& a, const Scalar& b, const std::optional<std::string>& rounding_mode) {
  return rounding_mode ? ops::div(a, b, rounding_mode) : tb::div(a, b);
}
inline Tensor& div_(Tensor& self, const Tensor& b, const std::optional<std::string>& rounding_mode) {
  return rounding_mode ? ops::div_(self, b, rounding_mode) : tb::div_(self, b);
}
inline Tensor& div_(Tensor& self, const Scalar& b, const std::optional<std::string>& rounding_mode) {
  return rounding_mode ? ops::div_(self, b, rounding_mode) : tb::div_(self, b);
}
inline Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool /*sparse_grad*/) {
  return tb::gather(self, dim, index);
}
inline Tensor& sub_(Tensor& self, const Scalar& b, const Scalar& alpha = 1) { return ops::sub_(self, b, alpha); }
inline Tensor remainder(const Tensor& a, const Scalar& b) { return ops::remainder(a, b); }
inline Tensor& clamp_(Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt) {
  return ops::clamp_(self, min, max);
}
inline Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return ops::masked_fill(self, mask, value);
}
inline Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value) {
  return ops::masked_fill_(self, mask, value);
}
inline Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value) {
  return ops::scatter(self, dim, index, value);
}
inline Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce) {
  return ops::scatter(self, dim, index, src, reduce);
}
inline Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce) {
  return ops::scatter(self, dim, index, value, reduce);
}
inline std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> /*stable: always*/, int64_t dim = -1,
                                       bool descending = false) {
  return tb::sort(self, dim, descending);
}
inline std::vector<Tensor> split(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim = 0) {
  return ops::split(self, split_sizes, dim);  // views, tracked by the view hooks
}

}  // namespace tb
