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

// ---- unary (the lists of engine/ops/elementwise.h, Note [Op lists]) ----
#define TB_REF_UNARY(op)            \
  Tensor op(const Tensor& x);       \
  Tensor op##_(const Tensor& self); \
  Tensor op##_out(const Tensor& out, const Tensor& x);
TB_UNARY_FLOAT_OPS(TB_REF_UNARY)
TB_UNARY_SAME_DTYPE_OPS(TB_REF_UNARY)
TB_REF_UNARY(logical_not)
#undef TB_REF_UNARY
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
#define TB_REF_COMPARISON(op)                        \
  Tensor op(const Tensor& a, const Tensor& b);       \
  Tensor op(const Tensor& a, const Scalar& b);       \
  Tensor op##_(const Tensor& self, const Tensor& b); \
  Tensor op##_out(const Tensor& out, const Tensor& a, const Tensor& b);
#define TB_REF_LOGICAL(op)                           \
  Tensor op(const Tensor& a, const Tensor& b);       \
  Tensor op##_(const Tensor& self, const Tensor& b); \
  Tensor op##_out(const Tensor& out, const Tensor& a, const Tensor& b);
TB_COMPARISON_OPS(TB_REF_COMPARISON)
TB_LOGICAL_OPS(TB_REF_LOGICAL)
#undef TB_REF_COMPARISON
#undef TB_REF_LOGICAL
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
