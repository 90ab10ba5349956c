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

// The unary lists of engine/ops/elementwise.h: torch::op, Tensor::op_ and torch::op_out.
#define TB_REF_UNARY(op)                                            \
  Tensor op(const Tensor& x) {                                      \
    return guarded(#op, [&] { return wrap(torch::op(T(x))); });     \
  }                                                                 \
  Tensor op##_(const Tensor& self) {                                \
    return guarded(#op "_", [&] { return wrap(T(self).op##_()); }); \
  }                                                                 \
  Tensor op##_out(const Tensor& out, const Tensor& x) {             \
    return guarded(#op "_out", [&] {                                \
      torch::Tensor o = T(out);                                     \
      return wrap(torch::op##_out(o, T(x)));                        \
    });                                                             \
  }
TB_UNARY_FLOAT_OPS(TB_REF_UNARY)
TB_UNARY_SAME_DTYPE_OPS(TB_REF_UNARY)
TB_REF_UNARY(logical_not)
#undef TB_REF_UNARY
Tensor relu(const Tensor& x) {
  return guarded("relu", [&] { return wrap(torch::relu(T(x))); });
}
Tensor relu_(const Tensor& self) {
  return guarded("relu_", [&] { return wrap(T(self).relu_()); });
}
Tensor gelu(const Tensor& x, const std::string& a) {
  return guarded("gelu", [&] { return wrap(torch::gelu(T(x), a)); });
}
Tensor gelu_(const Tensor& self, const std::string& a) {
  return guarded("gelu_", [&] {
    torch::Tensor s = T(self);
    return wrap(torch::gelu_(s, a));
  });
}
Tensor gelu_out(const Tensor& out, const Tensor& x, const std::string& a) {
  return guarded("gelu_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::gelu_out(o, T(x), a));
  });
}
Tensor silu(const Tensor& x) {
  return guarded("silu", [&] { return wrap(torch::silu(T(x))); });
}
Tensor silu_(const Tensor& self) {
  return guarded("silu_", [&] {
    torch::Tensor s = T(self);
    return wrap(torch::silu_(s));
  });
}
Tensor silu_out(const Tensor& out, const Tensor& x) {
  return guarded("silu_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::silu_out(o, T(x)));
  });
}
Tensor softplus(const Tensor& x, const Scalar& b, const Scalar& th) {
  return guarded("softplus", [&] { return wrap(torch::softplus(T(x), S(b), S(th))); });
}
Tensor softplus_out(const Tensor& out, const Tensor& x, const Scalar& b, const Scalar& th) {
  return guarded("softplus_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::softplus_out(o, T(x), S(b), S(th)));
  });
}
Tensor isnan(const Tensor& x) {
  return guarded("isnan", [&] { return wrap(torch::isnan(T(x))); });
}
Tensor isinf(const Tensor& x) {
  return guarded("isinf", [&] { return wrap(torch::isinf(T(x))); });
}
Tensor isfinite(const Tensor& x) {
  return guarded("isfinite", [&] { return wrap(torch::isfinite(T(x))); });
}
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("add", [&] { return wrap(torch::add(T(a), T(b), S(alpha))); });
}
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return guarded("add", [&] { return wrap(torch::add(T(a), S(b), S(alpha))); });
}
Tensor add_(const Tensor& self, const Tensor& b, const Scalar& alpha) {
  return guarded("add_", [&] { return wrap(T(self).add_(T(b), S(alpha))); });
}
Tensor add_(const Tensor& self, const Scalar& b, const Scalar& alpha) {
  return guarded("add_", [&] { return wrap(T(self).add_(S(b), S(alpha))); });
}
Tensor add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("add_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::add_out(o, T(a), T(b), S(alpha)));
  });
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("sub", [&] { return wrap(torch::sub(T(a), T(b), S(alpha))); });
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return guarded("sub", [&] { return wrap(torch::sub(T(a), S(b), S(alpha))); });
}
Tensor sub_(const Tensor& self, const Tensor& b, const Scalar& alpha) {
  return guarded("sub_", [&] { return wrap(T(self).sub_(T(b), S(alpha))); });
}
Tensor sub_(const Tensor& self, const Scalar& b, const Scalar& alpha) {
  return guarded("sub_", [&] { return wrap(T(self).sub_(S(b), S(alpha))); });
}
Tensor sub_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return guarded("sub_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::sub_out(o, T(a), T(b), S(alpha)));
  });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return guarded("mul", [&] { return wrap(torch::mul(T(a), T(b))); });
}
Tensor mul(const Tensor& a, const Scalar& b) {
  return guarded("mul", [&] { return wrap(torch::mul(T(a), S(b))); });
}
Tensor mul_(const Tensor& self, const Tensor& b) {
  return guarded("mul_", [&] { return wrap(T(self).mul_(T(b))); });
}
Tensor mul_(const Tensor& self, const Scalar& b) {
  return guarded("mul_", [&] { return wrap(T(self).mul_(S(b))); });
}
Tensor mul_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("mul_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::mul_out(o, T(a), T(b)));
  });
}
Tensor div(const Tensor& a, const Tensor& b, const OptStr& rounding_mode) {
  return guarded("div", [&] { return wrap(torch::div(T(a), T(b), SV(rounding_mode))); });
}
Tensor div(const Tensor& a, const Scalar& b, const OptStr& rounding_mode) {
  return guarded("div", [&] { return wrap(torch::div(T(a), S(b), SV(rounding_mode))); });
}
Tensor div_(const Tensor& self, const Tensor& b, const OptStr& rounding_mode) {
  return guarded("div_", [&] { return wrap(T(self).div_(T(b), SV(rounding_mode))); });
}
Tensor div_(const Tensor& self, const Scalar& b, const OptStr& rounding_mode) {
  return guarded("div_", [&] { return wrap(T(self).div_(S(b), SV(rounding_mode))); });
}
Tensor div_out(const Tensor& out, const Tensor& a, const Tensor& b, const OptStr& rounding_mode) {
  return guarded("div_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::div_out(o, T(a), T(b), SV(rounding_mode)));
  });
}
Tensor remainder(const Tensor& a, const Tensor& b) {
  return guarded("remainder", [&] { return wrap(torch::remainder(T(a), T(b))); });
}
Tensor remainder(const Tensor& a, const Scalar& b) {
  return guarded("remainder", [&] { return wrap(torch::remainder(T(a), S(b))); });
}
Tensor remainder_(const Tensor& self, const Tensor& b) {
  return guarded("remainder_", [&] { return wrap(T(self).remainder_(T(b))); });
}
Tensor remainder_(const Tensor& self, const Scalar& b) {
  return guarded("remainder_", [&] { return wrap(T(self).remainder_(S(b))); });
}
Tensor remainder_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("remainder_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::remainder_out(o, T(a), T(b)));
  });
}
Tensor pow(const Tensor& a, const Tensor& b) {
  return guarded("pow", [&] { return wrap(torch::pow(T(a), T(b))); });
}
Tensor pow(const Tensor& a, const Scalar& b) {
  return guarded("pow", [&] { return wrap(torch::pow(T(a), S(b))); });
}
Tensor pow_(const Tensor& self, const Tensor& b) {
  return guarded("pow_", [&] { return wrap(T(self).pow_(T(b))); });
}
Tensor pow_(const Tensor& self, const Scalar& b) {
  return guarded("pow_", [&] { return wrap(T(self).pow_(S(b))); });
}
Tensor pow_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("pow_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::pow_out(o, T(a), T(b)));
  });
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return guarded("maximum", [&] { return wrap(torch::maximum(T(a), T(b))); });
}
Tensor maximum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("maximum_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::maximum_out(o, T(a), T(b)));
  });
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return guarded("minimum", [&] { return wrap(torch::minimum(T(a), T(b))); });
}
Tensor minimum_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("minimum_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::minimum_out(o, T(a), T(b)));
  });
}
// The comparison and logical lists of engine/ops/elementwise.h.
#define TB_REF_BINARY_FORMS(op)                                          \
  Tensor op(const Tensor& a, const Tensor& b) {                          \
    return guarded(#op, [&] { return wrap(torch::op(T(a), T(b))); });    \
  }                                                                      \
  Tensor op##_(const Tensor& self, const Tensor& b) {                    \
    return guarded(#op "_", [&] { return wrap(T(self).op##_(T(b))); });  \
  }                                                                      \
  Tensor op##_out(const Tensor& out, const Tensor& a, const Tensor& b) { \
    return guarded(#op "_out", [&] {                                     \
      torch::Tensor o = T(out);                                          \
      return wrap(torch::op##_out(o, T(a), T(b)));                       \
    });                                                                  \
  }
#define TB_REF_COMPARISON(op)                                         \
  TB_REF_BINARY_FORMS(op)                                             \
  Tensor op(const Tensor& a, const Scalar& b) {                       \
    return guarded(#op, [&] { return wrap(torch::op(T(a), S(b))); }); \
  }
TB_COMPARISON_OPS(TB_REF_COMPARISON)
TB_LOGICAL_OPS(TB_REF_BINARY_FORMS)
#undef TB_REF_COMPARISON
#undef TB_REF_BINARY_FORMS
Tensor pow(const Scalar& a, const Tensor& b) {
  return guarded("pow", [&] { return wrap(torch::pow(S(a), T(b))); });
}

Tensor clamp(const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp", [&] { return wrap(torch::clamp(T(x), S(lo), S(hi))); });
}
Tensor clamp_(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp_", [&] { return wrap(T(self).clamp_(S(lo), S(hi))); });
}
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  return guarded("clamp_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::clamp_out(o, T(x), S(lo), S(hi)));
  });
}
Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp", [&] { return wrap(torch::clamp(T(x), OT(lo), OT(hi))); });
}
Tensor clamp_(const Tensor& self, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp_", [&] { return wrap(T(self).clamp_(OT(lo), OT(hi))); });
}
Tensor clamp_out(const Tensor& out, const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  return guarded("clamp_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::clamp_out(o, T(x), OT(lo), OT(hi)));
  });
}
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return guarded("where", [&] { return wrap(torch::where(T(cond), T(a), T(b))); });
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  return guarded("where", [&] { return wrap(torch::where(T(cond), T(a), S(b))); });
}
Tensor where_out(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  return guarded("where_out", [&] {
    torch::Tensor o = T(out);
    return wrap(torch::where_out(o, T(cond), T(a), T(b)));
  });
}

}  // namespace tb::ref
