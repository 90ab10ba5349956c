// LibTorch one-liners behind reference/elementwise.h; every body runs inside guarded() so a
// LibTorch error surfaces as ref::RefError.
#include "reference/elementwise.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
c10::Scalar S(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::Bool: return c10::Scalar(s.i != 0);
    case Scalar::Kind::Int: return c10::Scalar(s.i);
    case Scalar::Kind::Float: return c10::Scalar(s.d);
  }
  return c10::Scalar(s.d);
}
std::optional<c10::Scalar> S(const std::optional<Scalar>& s) {
  if (!s) return std::nullopt;
  return S(*s);
}
std::optional<torch::Tensor> OT(const std::optional<Tensor>& t) {
  if (!t) return std::nullopt;
  return T(*t);
}
std::optional<c10::string_view> SV(const OptStr& s) {
  if (!s) return std::nullopt;
  return c10::string_view(*s);
}
}  // namespace

Tensor exp(const Tensor& x) { return guarded("exp", [&] { return wrap(torch::exp(T(x))); }); }
Tensor exp_(const Tensor& self) { return guarded("exp_", [&] { return wrap(T(self).exp_()); }); }
Tensor exp_out(const Tensor& out, const Tensor& x) {
  return guarded("exp_out", [&] { torch::Tensor o = T(out); return wrap(torch::exp_out(o, T(x))); });
}
Tensor expm1(const Tensor& x) { return guarded("expm1", [&] { return wrap(torch::expm1(T(x))); }); }
Tensor expm1_(const Tensor& self) { return guarded("expm1_", [&] { return wrap(T(self).expm1_()); }); }
Tensor expm1_out(const Tensor& out, const Tensor& x) {
  return guarded("expm1_out", [&] { torch::Tensor o = T(out); return wrap(torch::expm1_out(o, T(x))); });
}
Tensor log(const Tensor& x) { return guarded("log", [&] { return wrap(torch::log(T(x))); }); }
Tensor log_(const Tensor& self) { return guarded("log_", [&] { return wrap(T(self).log_()); }); }
Tensor log_out(const Tensor& out, const Tensor& x) {
  return guarded("log_out", [&] { torch::Tensor o = T(out); return wrap(torch::log_out(o, T(x))); });
}
Tensor log1p(const Tensor& x) { return guarded("log1p", [&] { return wrap(torch::log1p(T(x))); }); }
Tensor log1p_(const Tensor& self) { return guarded("log1p_", [&] { return wrap(T(self).log1p_()); }); }
Tensor log1p_out(const Tensor& out, const Tensor& x) {
  return guarded("log1p_out", [&] { torch::Tensor o = T(out); return wrap(torch::log1p_out(o, T(x))); });
}
Tensor sqrt(const Tensor& x) { return guarded("sqrt", [&] { return wrap(torch::sqrt(T(x))); }); }
Tensor sqrt_(const Tensor& self) { return guarded("sqrt_", [&] { return wrap(T(self).sqrt_()); }); }
Tensor sqrt_out(const Tensor& out, const Tensor& x) {
  return guarded("sqrt_out", [&] { torch::Tensor o = T(out); return wrap(torch::sqrt_out(o, T(x))); });
}
Tensor rsqrt(const Tensor& x) { return guarded("rsqrt", [&] { return wrap(torch::rsqrt(T(x))); }); }
Tensor rsqrt_(const Tensor& self) { return guarded("rsqrt_", [&] { return wrap(T(self).rsqrt_()); }); }
Tensor rsqrt_out(const Tensor& out, const Tensor& x) {
  return guarded("rsqrt_out", [&] { torch::Tensor o = T(out); return wrap(torch::rsqrt_out(o, T(x))); });
}
Tensor reciprocal(const Tensor& x) { return guarded("reciprocal", [&] { return wrap(torch::reciprocal(T(x))); }); }
Tensor reciprocal_(const Tensor& self) { return guarded("reciprocal_", [&] { return wrap(T(self).reciprocal_()); }); }
Tensor reciprocal_out(const Tensor& out, const Tensor& x) {
  return guarded("reciprocal_out", [&] { torch::Tensor o = T(out); return wrap(torch::reciprocal_out(o, T(x))); });
}
Tensor sin(const Tensor& x) { return guarded("sin", [&] { return wrap(torch::sin(T(x))); }); }
Tensor sin_(const Tensor& self) { return guarded("sin_", [&] { return wrap(T(self).sin_()); }); }
Tensor sin_out(const Tensor& out, const Tensor& x) {
  return guarded("sin_out", [&] { torch::Tensor o = T(out); return wrap(torch::sin_out(o, T(x))); });
}
Tensor cos(const Tensor& x) { return guarded("cos", [&] { return wrap(torch::cos(T(x))); }); }
Tensor cos_(const Tensor& self) { return guarded("cos_", [&] { return wrap(T(self).cos_()); }); }
Tensor cos_out(const Tensor& out, const Tensor& x) {
  return guarded("cos_out", [&] { torch::Tensor o = T(out); return wrap(torch::cos_out(o, T(x))); });
}
Tensor tanh(const Tensor& x) { return guarded("tanh", [&] { return wrap(torch::tanh(T(x))); }); }
Tensor tanh_(const Tensor& self) { return guarded("tanh_", [&] { return wrap(T(self).tanh_()); }); }
Tensor tanh_out(const Tensor& out, const Tensor& x) {
  return guarded("tanh_out", [&] { torch::Tensor o = T(out); return wrap(torch::tanh_out(o, T(x))); });
}
Tensor sigmoid(const Tensor& x) { return guarded("sigmoid", [&] { return wrap(torch::sigmoid(T(x))); }); }
Tensor sigmoid_(const Tensor& self) { return guarded("sigmoid_", [&] { return wrap(T(self).sigmoid_()); }); }
Tensor sigmoid_out(const Tensor& out, const Tensor& x) {
  return guarded("sigmoid_out", [&] { torch::Tensor o = T(out); return wrap(torch::sigmoid_out(o, T(x))); });
}
Tensor neg(const Tensor& x) { return guarded("neg", [&] { return wrap(torch::neg(T(x))); }); }
Tensor neg_(const Tensor& self) { return guarded("neg_", [&] { return wrap(T(self).neg_()); }); }
Tensor neg_out(const Tensor& out, const Tensor& x) {
  return guarded("neg_out", [&] { torch::Tensor o = T(out); return wrap(torch::neg_out(o, T(x))); });
}
Tensor abs(const Tensor& x) { return guarded("abs", [&] { return wrap(torch::abs(T(x))); }); }
Tensor abs_(const Tensor& self) { return guarded("abs_", [&] { return wrap(T(self).abs_()); }); }
Tensor abs_out(const Tensor& out, const Tensor& x) {
  return guarded("abs_out", [&] { torch::Tensor o = T(out); return wrap(torch::abs_out(o, T(x))); });
}
Tensor sign(const Tensor& x) { return guarded("sign", [&] { return wrap(torch::sign(T(x))); }); }
Tensor sign_(const Tensor& self) { return guarded("sign_", [&] { return wrap(T(self).sign_()); }); }
Tensor sign_out(const Tensor& out, const Tensor& x) {
  return guarded("sign_out", [&] { torch::Tensor o = T(out); return wrap(torch::sign_out(o, T(x))); });
}
Tensor logical_not(const Tensor& x) { return guarded("logical_not", [&] { return wrap(torch::logical_not(T(x))); }); }
Tensor logical_not_(const Tensor& self) { return guarded("logical_not_", [&] { return wrap(T(self).logical_not_()); }); }
Tensor logical_not_out(const Tensor& out, const Tensor& x) {
  return guarded("logical_not_out", [&] { torch::Tensor o = T(out); return wrap(torch::logical_not_out(o, T(x))); });
}
Tensor relu(const Tensor& x) { return guarded("relu", [&] { return wrap(torch::relu(T(x))); }); }
Tensor relu_(const Tensor& self) { return guarded("relu_", [&] { return wrap(T(self).relu_()); }); }
Tensor gelu(const Tensor& x, const std::string& a) { return guarded("gelu", [&] { return wrap(torch::gelu(T(x), a)); }); }
Tensor gelu_(const Tensor& self, const std::string& a) {
  return guarded("gelu_", [&] { torch::Tensor s = T(self); return wrap(torch::gelu_(s, a)); });
}
Tensor gelu_out(const Tensor& out, const Tensor& x, const std::string& a) {
  return guarded("gelu_out", [&] { torch::Tensor o = T(out); return wrap(torch::gelu_out(o, T(x), a)); });
}
Tensor silu(const Tensor& x) { return guarded("silu", [&] { return wrap(torch::silu(T(x))); }); }
Tensor silu_(const Tensor& self) { return guarded("silu_", [&] { torch::Tensor s = T(self); return wrap(torch::silu_(s)); }); }
Tensor silu_out(const Tensor& out, const Tensor& x) {
  return guarded("silu_out", [&] { torch::Tensor o = T(out); return wrap(torch::silu_out(o, T(x))); });
}
Tensor softplus(const Tensor& x, const Scalar& b, const Scalar& th) {
  return guarded("softplus", [&] { return wrap(torch::softplus(T(x), S(b), S(th))); });
}
Tensor softplus_out(const Tensor& out, const Tensor& x, const Scalar& b, const Scalar& th) {
  return guarded("softplus_out", [&] { torch::Tensor o = T(out); return wrap(torch::softplus_out(o, T(x), S(b), S(th))); });
}
Tensor isnan(const Tensor& x) { return guarded("isnan", [&] { return wrap(torch::isnan(T(x))); }); }
Tensor isinf(const Tensor& x) { return guarded("isinf", [&] { return wrap(torch::isinf(T(x))); }); }
Tensor isfinite(const Tensor& x) { return guarded("isfinite", [&] { return wrap(torch::isfinite(T(x))); }); }
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return guarded("add", [&] { return wrap(torch::add(T(a), T(b), S(alpha))); }); }
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return guarded("add", [&] { return wrap(torch::add(T(a), S(b), S(alpha))); }); }
Tensor add_(const Tensor& self, const Tensor& b, const Scalar& alpha) { return guarded("add_", [&] { return wrap(T(self).add_(T(b), S(alpha))); }); }
Tensor add_(const Tensor& self, const Scalar& b, const Scalar& alpha) { return guarded("add_", [&] { return wrap(T(self).add_(S(b), S(alpha))); }); }
Tensor add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("add_out", [&] { torch::Tensor o = T(out); return wrap(torch::add_out(o, T(a), T(b), S(alpha))); });
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return guarded("sub", [&] { return wrap(torch::sub(T(a), T(b), S(alpha))); }); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return guarded("sub", [&] { return wrap(torch::sub(T(a), S(b), S(alpha))); }); }
Tensor sub_(const Tensor& self, const Tensor& b, const Scalar& alpha) { return guarded("sub_", [&] { return wrap(T(self).sub_(T(b), S(alpha))); }); }
Tensor sub_(const Tensor& self, const Scalar& b, const Scalar& alpha) { return guarded("sub_", [&] { return wrap(T(self).sub_(S(b), S(alpha))); }); }
Tensor sub_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("sub_out", [&] { torch::Tensor o = T(out); return wrap(torch::sub_out(o, T(a), T(b), S(alpha))); });
}
Tensor mul(const Tensor& a, const Tensor& b) { return guarded("mul", [&] { return wrap(torch::mul(T(a), T(b))); }); }
Tensor mul(const Tensor& a, const Scalar& b) { return guarded("mul", [&] { return wrap(torch::mul(T(a), S(b))); }); }
Tensor mul_(const Tensor& self, const Tensor& b) { return guarded("mul_", [&] { return wrap(T(self).mul_(T(b))); }); }
Tensor mul_(const Tensor& self, const Scalar& b) { return guarded("mul_", [&] { return wrap(T(self).mul_(S(b))); }); }
Tensor mul_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("mul_out", [&] { torch::Tensor o = T(out); return wrap(torch::mul_out(o, T(a), T(b))); });
}
Tensor div(const Tensor& a, const Tensor& b, const OptStr& rounding_mode) { return guarded("div", [&] { return wrap(torch::div(T(a), T(b), SV(rounding_mode))); }); }
Tensor div(const Tensor& a, const Scalar& b, const OptStr& rounding_mode) { return guarded("div", [&] { return wrap(torch::div(T(a), S(b), SV(rounding_mode))); }); }
Tensor div_(const Tensor& self, const Tensor& b, const OptStr& rounding_mode) { return guarded("div_", [&] { return wrap(T(self).div_(T(b), SV(rounding_mode))); }); }
Tensor div_(const Tensor& self, const Scalar& b, const OptStr& rounding_mode) { return guarded("div_", [&] { return wrap(T(self).div_(S(b), SV(rounding_mode))); }); }
Tensor div_out(const Tensor& out, const Tensor& a, const Tensor& b, const OptStr& rounding_mode) {
  return guarded("div_out", [&] { torch::Tensor o = T(out); return wrap(torch::div_out(o, T(a), T(b), SV(rounding_mode))); });
}
Tensor remainder(const Tensor& a, const Tensor& b) { return guarded("remainder", [&] { return wrap(torch::remainder(T(a), T(b))); }); }
Tensor remainder(const Tensor& a, const Scalar& b) { return guarded("remainder", [&] { return wrap(torch::remainder(T(a), S(b))); }); }
Tensor remainder_(const Tensor& self, const Tensor& b) { return guarded("remainder_", [&] { return wrap(T(self).remainder_(T(b))); }); }
Tensor remainder_(const Tensor& self, const Scalar& b) { return guarded("remainder_", [&] { return wrap(T(self).remainder_(S(b))); }); }
Tensor remainder_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("remainder_out", [&] { torch::Tensor o = T(out); return wrap(torch::remainder_out(o, T(a), T(b))); });
}
Tensor pow(const Tensor& a, const Tensor& b) { return guarded("pow", [&] { return wrap(torch::pow(T(a), T(b))); }); }
Tensor pow(const Tensor& a, const Scalar& b) { return guarded("pow", [&] { return wrap(torch::pow(T(a), S(b))); }); }
Tensor pow_(const Tensor& self, const Tensor& b) { return guarded("pow_", [&] { return wrap(T(self).pow_(T(b))); }); }
Tensor pow_(const Tensor& self, const Scalar& b) { return guarded("pow_", [&] { return wrap(T(self).pow_(S(b))); }); }
Tensor pow_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("pow_out", [&] { torch::Tensor o = T(out); return wrap(torch::pow_out(o, T(a), T(b))); });
}
Tensor maximum(const Tensor& a, const Tensor& b) { return guarded("maximum", [&] { return wrap(torch::maximum(T(a), T(b))); }); }
Tensor maximum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("maximum_out", [&] { torch::Tensor o = T(out); return wrap(torch::maximum_out(o, T(a), T(b))); });
}
Tensor minimum(const Tensor& a, const Tensor& b) { return guarded("minimum", [&] { return wrap(torch::minimum(T(a), T(b))); }); }
Tensor minimum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("minimum_out", [&] { torch::Tensor o = T(out); return wrap(torch::minimum_out(o, T(a), T(b))); });
}
Tensor eq(const Tensor& a, const Tensor& b) { return guarded("eq", [&] { return wrap(torch::eq(T(a), T(b))); }); }
Tensor eq(const Tensor& a, const Scalar& b) { return guarded("eq", [&] { return wrap(torch::eq(T(a), S(b))); }); }
Tensor eq_(const Tensor& self, const Tensor& b) { return guarded("eq_", [&] { return wrap(T(self).eq_(T(b))); }); }
Tensor eq_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("eq_out", [&] { torch::Tensor o = T(out); return wrap(torch::eq_out(o, T(a), T(b))); });
}
Tensor ne(const Tensor& a, const Tensor& b) { return guarded("ne", [&] { return wrap(torch::ne(T(a), T(b))); }); }
Tensor ne(const Tensor& a, const Scalar& b) { return guarded("ne", [&] { return wrap(torch::ne(T(a), S(b))); }); }
Tensor ne_(const Tensor& self, const Tensor& b) { return guarded("ne_", [&] { return wrap(T(self).ne_(T(b))); }); }
Tensor ne_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("ne_out", [&] { torch::Tensor o = T(out); return wrap(torch::ne_out(o, T(a), T(b))); });
}
Tensor lt(const Tensor& a, const Tensor& b) { return guarded("lt", [&] { return wrap(torch::lt(T(a), T(b))); }); }
Tensor lt(const Tensor& a, const Scalar& b) { return guarded("lt", [&] { return wrap(torch::lt(T(a), S(b))); }); }
Tensor lt_(const Tensor& self, const Tensor& b) { return guarded("lt_", [&] { return wrap(T(self).lt_(T(b))); }); }
Tensor lt_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("lt_out", [&] { torch::Tensor o = T(out); return wrap(torch::lt_out(o, T(a), T(b))); });
}
Tensor le(const Tensor& a, const Tensor& b) { return guarded("le", [&] { return wrap(torch::le(T(a), T(b))); }); }
Tensor le(const Tensor& a, const Scalar& b) { return guarded("le", [&] { return wrap(torch::le(T(a), S(b))); }); }
Tensor le_(const Tensor& self, const Tensor& b) { return guarded("le_", [&] { return wrap(T(self).le_(T(b))); }); }
Tensor le_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("le_out", [&] { torch::Tensor o = T(out); return wrap(torch::le_out(o, T(a), T(b))); });
}
Tensor gt(const Tensor& a, const Tensor& b) { return guarded("gt", [&] { return wrap(torch::gt(T(a), T(b))); }); }
Tensor gt(const Tensor& a, const Scalar& b) { return guarded("gt", [&] { return wrap(torch::gt(T(a), S(b))); }); }
Tensor gt_(const Tensor& self, const Tensor& b) { return guarded("gt_", [&] { return wrap(T(self).gt_(T(b))); }); }
Tensor gt_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("gt_out", [&] { torch::Tensor o = T(out); return wrap(torch::gt_out(o, T(a), T(b))); });
}
Tensor ge(const Tensor& a, const Tensor& b) { return guarded("ge", [&] { return wrap(torch::ge(T(a), T(b))); }); }
Tensor ge(const Tensor& a, const Scalar& b) { return guarded("ge", [&] { return wrap(torch::ge(T(a), S(b))); }); }
Tensor ge_(const Tensor& self, const Tensor& b) { return guarded("ge_", [&] { return wrap(T(self).ge_(T(b))); }); }
Tensor ge_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("ge_out", [&] { torch::Tensor o = T(out); return wrap(torch::ge_out(o, T(a), T(b))); });
}
Tensor logical_and(const Tensor& a, const Tensor& b) { return guarded("logical_and", [&] { return wrap(torch::logical_and(T(a), T(b))); }); }
Tensor logical_and_(const Tensor& self, const Tensor& b) { return guarded("logical_and_", [&] { return wrap(T(self).logical_and_(T(b))); }); }
Tensor logical_and_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("logical_and_out", [&] { torch::Tensor o = T(out); return wrap(torch::logical_and_out(o, T(a), T(b))); });
}
Tensor logical_or(const Tensor& a, const Tensor& b) { return guarded("logical_or", [&] { return wrap(torch::logical_or(T(a), T(b))); }); }
Tensor logical_or_(const Tensor& self, const Tensor& b) { return guarded("logical_or_", [&] { return wrap(T(self).logical_or_(T(b))); }); }
Tensor logical_or_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("logical_or_out", [&] { torch::Tensor o = T(out); return wrap(torch::logical_or_out(o, T(a), T(b))); });
}
Tensor logical_xor(const Tensor& a, const Tensor& b) { return guarded("logical_xor", [&] { return wrap(torch::logical_xor(T(a), T(b))); }); }
Tensor logical_xor_(const Tensor& self, const Tensor& b) { return guarded("logical_xor_", [&] { return wrap(T(self).logical_xor_(T(b))); }); }
Tensor logical_xor_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("logical_xor_out", [&] { torch::Tensor o = T(out); return wrap(torch::logical_xor_out(o, T(a), T(b))); });
}
Tensor pow(const Scalar& a, const Tensor& b) { return guarded("pow", [&] { return wrap(torch::pow(S(a), T(b))); }); }

Tensor clamp(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp", [&] { return wrap(torch::clamp(T(x), S(lo), S(hi))); });
}
Tensor clamp_(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp_", [&] { return wrap(T(self).clamp_(S(lo), S(hi))); });
}
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp_out", [&] { torch::Tensor o = T(out); return wrap(torch::clamp_out(o, T(x), S(lo), S(hi))); });
}
Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp", [&] { return wrap(torch::clamp(T(x), OT(lo), OT(hi))); });
}
Tensor clamp_(const Tensor& self, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp_", [&] { return wrap(T(self).clamp_(OT(lo), OT(hi))); });
}
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp_out", [&] { torch::Tensor o = T(out); return wrap(torch::clamp_out(o, T(x), OT(lo), OT(hi))); });
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return guarded("where", [&] { return wrap(torch::where(T(cond), T(a), T(b))); });
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return guarded("where", [&] { return wrap(torch::where(T(cond), T(a), S(b))); });
}
Tensor where_out(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  return guarded("where_out", [&] { torch::Tensor o = T(out); return wrap(torch::where_out(o, T(cond), T(a), T(b))); });
}

}  // namespace tb::ref
