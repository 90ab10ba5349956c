// The LibTorch side of the elementwise family: one function per engine op variant used by
// suites/ops/cases_elementwise.cpp, same names and arguments as engine/ops/elementwise.h, taking
// and returning ref::Tensor. No LibTorch include here (see reference/tensor.h).
#pragma once
#include <optional>
#include <string>

#include "engine/ops/elementwise.h"
#include "reference/tensor.h"

namespace tb::ref {

using ops::Scalar;
using OptStr = std::optional<std::string>;

// ---- unary ----
Tensor exp(const Tensor& x);
Tensor exp_(const Tensor& self);
Tensor exp_out(const Tensor& out, const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor expm1_(const Tensor& self);
Tensor expm1_out(const Tensor& out, const Tensor& x);
Tensor log(const Tensor& x);
Tensor log_(const Tensor& self);
Tensor log_out(const Tensor& out, const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor log1p_(const Tensor& self);
Tensor log1p_out(const Tensor& out, const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor sqrt_(const Tensor& self);
Tensor sqrt_out(const Tensor& out, const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor rsqrt_(const Tensor& self);
Tensor rsqrt_out(const Tensor& out, const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor reciprocal_(const Tensor& self);
Tensor reciprocal_out(const Tensor& out, const Tensor& x);
Tensor sin(const Tensor& x);
Tensor sin_(const Tensor& self);
Tensor sin_out(const Tensor& out, const Tensor& x);
Tensor cos(const Tensor& x);
Tensor cos_(const Tensor& self);
Tensor cos_out(const Tensor& out, const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor tanh_(const Tensor& self);
Tensor tanh_out(const Tensor& out, const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor sigmoid_(const Tensor& self);
Tensor sigmoid_out(const Tensor& out, const Tensor& x);
Tensor neg(const Tensor& x);
Tensor neg_(const Tensor& self);
Tensor neg_out(const Tensor& out, const Tensor& x);
Tensor abs(const Tensor& x);
Tensor abs_(const Tensor& self);
Tensor abs_out(const Tensor& out, const Tensor& x);
Tensor sign(const Tensor& x);
Tensor sign_(const Tensor& self);
Tensor sign_out(const Tensor& out, const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor logical_not_(const Tensor& self);
Tensor logical_not_out(const Tensor& out, const Tensor& x);
Tensor relu(const Tensor& x);
Tensor relu_(const Tensor& self);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor gelu_(const Tensor& self, const std::string& approximate = "none");
Tensor gelu_out(const Tensor& out, const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor silu_(const Tensor& self);
Tensor silu_out(const Tensor& out, const Tensor& x);
Tensor softplus(const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
Tensor softplus_out(const Tensor& out, const Tensor& x, const Scalar& beta = 1, const Scalar& threshold = 20);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// ---- binary ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor add_(const Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor add_(const Tensor& self, const Scalar& b, const Scalar& alpha = 1);
Tensor add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub_(const Tensor& self, const Tensor& b, const Scalar& alpha = 1);
Tensor sub_(const Tensor& self, const Scalar& b, const Scalar& alpha = 1);
Tensor sub_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor mul_(const Tensor& self, const Tensor& b);
Tensor mul_(const Tensor& self, const Scalar& b);
Tensor mul_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b, const OptStr& rounding_mode = std::nullopt);
Tensor div(const Tensor& a, const Scalar& b, const OptStr& rounding_mode = std::nullopt);
Tensor div_(const Tensor& self, const Tensor& b, const OptStr& rounding_mode = std::nullopt);
Tensor div_(const Tensor& self, const Scalar& b, const OptStr& rounding_mode = std::nullopt);
Tensor div_out(const Tensor& out, const Tensor& a, const Tensor& b, const OptStr& rounding_mode = std::nullopt);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor remainder_(const Tensor& self, const Tensor& b);
Tensor remainder_(const Tensor& self, const Scalar& b);
Tensor remainder_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow_(const Tensor& self, const Tensor& b);
Tensor pow_(const Tensor& self, const Scalar& b);
Tensor pow_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor minimum_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor eq_(const Tensor& self, const Tensor& b);
Tensor eq_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor ne_(const Tensor& self, const Tensor& b);
Tensor ne_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor lt_(const Tensor& self, const Tensor& b);
Tensor lt_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor le_(const Tensor& self, const Tensor& b);
Tensor le_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor gt_(const Tensor& self, const Tensor& b);
Tensor gt_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Scalar& b);
Tensor ge_(const Tensor& self, const Tensor& b);
Tensor ge_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_and_(const Tensor& self, const Tensor& b);
Tensor logical_and_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_or_(const Tensor& self, const Tensor& b);
Tensor logical_or_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_xor_(const Tensor& self, const Tensor& b);
Tensor logical_xor_out(const Tensor& out, const Tensor& a, const Tensor& b);
Tensor pow(const Scalar& a, const Tensor& b);

// ---- clamp, where ----
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor clamp_(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Scalar>& min,
                 const std::optional<Scalar>& max = std::nullopt);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor clamp_(const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max = std::nullopt);
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Tensor>& min,
                 const std::optional<Tensor>& max = std::nullopt);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where_out(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace tb::ref
