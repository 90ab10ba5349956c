// Backward formulas of the elementwise ops (engine/ops/elementwise.h). Each function runs the
// kernel and records a closure computing d(input) from d(output); broadcasting is undone by the
// engine (see engine/autograd/function.h). The formulas, including their values at special points
// (relu at 0, abs at 0, pow with exponent 0, ties of maximum/minimum, clamp at its bounds), are
// PyTorch's tools/autograd/derivatives.yaml, evaluated in the same order so float results match.
// The hot activations call the fused kernels of ops/cpu/elementwise_backward.cpp.
#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/variable.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

namespace {

// g * alpha, skipping the multiply for alpha == 1 (PyTorch's maybe_multiply).
Tensor scaled(const Tensor& g, const Scalar& alpha) {
  return alpha.is_float() || alpha.i != 1 ? ops::mul(g, alpha) : g;
}

bool is_zero(const Scalar& s) { return s.is_float() ? s.d == 0 : s.i == 0; }

// g where mask, else 0 (PyTorch's where(mask, grad, zeros)).
Tensor keep_where(const Tensor& mask, const Tensor& g) { return ops::where(mask, g, Scalar(0)); }
// g where !mask, else 0 (masked_fill(mask, 0): NaN comparisons are false, so g is kept there).
Tensor zero_where(const Tensor& mask, const Tensor& g) { return ops::where(ops::logical_not(mask), g, Scalar(0)); }

using GradFn = Tensor (*)(const Tensor& g, const Tensor& saved);

// A one-input op whose backward reads one saved tensor: the input or the output.
Tensor unary_record(const char* op, const Tensor& x, const Tensor& out, const Tensor& saved, GradFn f) {
  record(op, {x}, {out}, {saved},
         [f](BackwardContext& ctx, const TensorList& g) { return TensorList{f(g[0], ctx.saved(0))}; });
  return out;
}

// An in-place one-input op whose backward reads self's new value (exp_, tanh_, sigmoid_, relu_).
template <typename K>
Tensor& inplace_from_output(const char* op, Tensor& self, K&& k, GradFn f) {
  check_inplace(self);
  kernel([&] { return k(self); }, op);
  record_inplace(op, self, {}, {self},
                 [f](BackwardContext& ctx, const TensorList& g) { return TensorList{f(g[0], ctx.saved(0))}; });
  return self;
}

// clamp's gradient for x: g where min <= x <= max (either bound may be absent).
template <typename B>
Tensor clamp_self_grad(const Tensor& g, const Tensor& x, const std::optional<B>& min, const std::optional<B>& max) {
  if (min && max) return keep_where(ops::logical_and(ops::ge(x, *min), ops::le(x, *max)), g);
  if (min) return keep_where(ops::ge(x, *min), g);
  if (max) return keep_where(ops::le(x, *max), g);
  return g;
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

}  // namespace

// ---- unary math ----

Tensor exp(const Tensor& x) {
  Tensor out = kernel([&] { return ops::exp(x); });
  return unary_record("exp", x, out, out, [](const Tensor& g, const Tensor& y) { return ops::mul(g, y); });
}

Tensor expm1(const Tensor& x) {
  Tensor out = kernel([&] { return ops::expm1(x); });
  return unary_record("expm1", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::mul(g, ops::add(y, 1)); });
}

Tensor log(const Tensor& x) {
  Tensor out = kernel([&] { return ops::log(x); });
  return unary_record("log", x, out, x, [](const Tensor& g, const Tensor& x) { return ops::div(g, x); });
}

Tensor log1p(const Tensor& x) {
  Tensor out = kernel([&] { return ops::log1p(x); });
  return unary_record("log1p", x, out, x, [](const Tensor& g, const Tensor& x) { return ops::div(g, ops::add(x, 1)); });
}

Tensor sqrt(const Tensor& x) {
  Tensor out = kernel([&] { return ops::sqrt(x); });
  return unary_record("sqrt", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::div(g, ops::mul(y, 2)); });
}

// -0.5 g y^3.
Tensor rsqrt(const Tensor& x) {
  Tensor out = kernel([&] { return ops::rsqrt(x); });
  return unary_record("rsqrt", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::mul(ops::mul(g, -0.5), ops::pow(y, 3)); });
}

// -g y^2.
Tensor reciprocal(const Tensor& x) {
  Tensor out = kernel([&] { return ops::reciprocal(x); });
  return unary_record("reciprocal", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::mul(ops::neg(g), ops::mul(y, y)); });
}

Tensor sin(const Tensor& x) {
  Tensor out = kernel([&] { return ops::sin(x); });
  return unary_record("sin", x, out, x, [](const Tensor& g, const Tensor& x) { return ops::mul(g, ops::cos(x)); });
}

Tensor cos(const Tensor& x) {
  Tensor out = kernel([&] { return ops::cos(x); });
  return unary_record("cos", x, out, x,
                      [](const Tensor& g, const Tensor& x) { return ops::mul(g, ops::neg(ops::sin(x))); });
}

Tensor tanh(const Tensor& x) {
  Tensor out = kernel([&] { return ops::tanh(x); });
  return unary_record("tanh", x, out, out, [](const Tensor& g, const Tensor& y) { return ops::tanh_backward(g, y); });
}

Tensor sigmoid(const Tensor& x) {
  Tensor out = kernel([&] { return ops::sigmoid(x); });
  return unary_record("sigmoid", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::sigmoid_backward(g, y); });
}

Tensor neg(const Tensor& x) {
  Tensor out = kernel([&] { return ops::neg(x); });
  record("neg", {x}, {out}, {}, [](BackwardContext&, const TensorList& g) { return TensorList{ops::neg(g[0])}; });
  return out;
}

// The gradient at 0 is 0 (g * sign(x)).
Tensor abs(const Tensor& x) {
  Tensor out = kernel([&] { return ops::abs(x); });
  return unary_record("abs", x, out, x, [](const Tensor& g, const Tensor& x) { return ops::mul(g, ops::sign(x)); });
}

// Piecewise constant: the gradient is zero (returned undefined), but the output still joins the
// graph, as in PyTorch.
Tensor sign(const Tensor& x) {
  Tensor out = kernel([&] { return ops::sign(x); });
  record("sign", {x}, {out}, {}, [](BackwardContext&, const TensorList&) { return TensorList{Tensor()}; });
  return out;
}

// ---- activations ----

// From the output: g where relu(x) > 0, so the gradient at 0 is 0.
Tensor relu(const Tensor& x) {
  Tensor out = kernel([&] { return ops::relu(x); });
  return unary_record("relu", x, out, out,
                      [](const Tensor& g, const Tensor& y) { return ops::threshold_backward(g, y, 0); });
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  Tensor out = kernel([&] { return ops::gelu(x, approximate); });
  record("gelu", {x}, {out}, {x}, [approximate](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::gelu_backward(g[0], ctx.saved(0), approximate)};
  });
  return out;
}

Tensor silu(const Tensor& x) {
  Tensor out = kernel([&] { return ops::silu(x); });
  return unary_record("silu", x, out, x, [](const Tensor& g, const Tensor& x) { return ops::silu_backward(g, x); });
}

Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  Tensor out = kernel([&] { return ops::softplus(x, beta, threshold); });
  record("softplus", {x}, {out}, {x}, [beta, threshold](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::softplus_backward(g[0], ctx.saved(0), beta, threshold)};
  });
  return out;
}

// ---- in-place unary ----

Tensor& exp_(Tensor& self) {
  return inplace_from_output(
      "exp_", self, [](Tensor& t) -> Tensor& { return ops::exp_(t); },
      [](const Tensor& g, const Tensor& y) { return ops::mul(g, y); });
}

Tensor& tanh_(Tensor& self) {
  return inplace_from_output(
      "tanh_", self, [](Tensor& t) -> Tensor& { return ops::tanh_(t); },
      [](const Tensor& g, const Tensor& y) { return ops::tanh_backward(g, y); });
}

Tensor& sigmoid_(Tensor& self) {
  return inplace_from_output(
      "sigmoid_", self, [](Tensor& t) -> Tensor& { return ops::sigmoid_(t); },
      [](const Tensor& g, const Tensor& y) { return ops::sigmoid_backward(g, y); });
}

Tensor& relu_(Tensor& self) {
  return inplace_from_output(
      "relu_", self, [](Tensor& t) -> Tensor& { return ops::relu_(t); },
      [](const Tensor& g, const Tensor& y) { return ops::threshold_backward(g, y, 0); });
}

Tensor& neg_(Tensor& self) {
  check_inplace(self);
  kernel([&] { return ops::neg_(self); });
  record_inplace("neg_", self, {}, {},
                 [](BackwardContext&, const TensorList& g) { return TensorList{ops::neg(g[0])}; });
  return self;
}

// ---- binary arithmetic ----

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = kernel([&] { return ops::add(a, b, alpha); });
  record("add", {a, b}, {out}, {}, [alpha](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? scaled(g[0], alpha) : Tensor()};
  });
  return out;
}

Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor out = kernel([&] { return ops::add(a, b, alpha); });
  record("add", {a}, {out}, {}, [](BackwardContext&, const TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = kernel([&] { return ops::sub(a, b, alpha); });
  record("sub", {a, b}, {out}, {}, [alpha](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? scaled(ops::neg(g[0]), alpha) : Tensor()};
  });
  return out;
}

Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor out = kernel([&] { return ops::sub(a, b, alpha); });
  record("sub", {a}, {out}, {}, [](BackwardContext&, const TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::mul(a, b); });
  // Each side is saved only when the other needs it.
  record("mul", {a, b}, {out}, {requires_grad(b) ? a : Tensor(), requires_grad(a) ? b : Tensor()},
         [](BackwardContext& ctx, const TensorList& g) {
           return TensorList{ctx.needs_grad(0) ? ops::mul(g[0], ctx.saved(1)) : Tensor(),
                             ctx.needs_grad(1) ? ops::mul(g[0], ctx.saved(0)) : Tensor()};
         });
  return out;
}

Tensor mul(const Tensor& a, const Scalar& b) {
  Tensor out = kernel([&] { return ops::mul(a, b); });
  record("mul", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) { return TensorList{ops::mul(g[0], b)}; });
  return out;
}

// d/da = g / b; d/db = -g * ((a / b) / b).
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::div(a, b); });
  record("div", {a, b}, {out}, {requires_grad(b) ? a : Tensor(), b}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor b = ctx.saved(1);
    return TensorList{ctx.needs_grad(0) ? ops::div(g[0], b) : Tensor(),
                      ctx.needs_grad(1) ? ops::mul(ops::neg(g[0]), ops::div(ops::div(ctx.saved(0), b), b)) : Tensor()};
  });
  return out;
}

Tensor div(const Tensor& a, const Scalar& b) {
  Tensor out = kernel([&] { return ops::div(a, b); });
  record("div", {a}, {out}, {}, [b](BackwardContext&, const TensorList& g) { return TensorList{ops::div(g[0], b)}; });
  return out;
}

// d/da = g * b a^(b-1), zero where b == 0; d/db = g * y log(a), zero where a == 0 and b >= 0.
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::pow(a, b); });
  record("pow", {a, b}, {out}, {a, b, requires_grad(b) ? out : Tensor()},
         [](BackwardContext& ctx, const TensorList& g) {
           const Tensor a = ctx.saved(0), b = ctx.saved(1);
           Tensor ga, gb;
           if (ctx.needs_grad(0)) {
             Tensor d = ops::mul(g[0], ops::mul(b, ops::pow(a, ops::sub(b, 1))));
             ga = ops::where(ops::ne(b, 0.0), d, Scalar(0));
           }
           if (ctx.needs_grad(1)) {
             Tensor zero_base = ops::logical_and(ops::eq(a, 0), ops::ge(b, 0));
             Tensor a_ = a.to(ops::result_type(a, b));
             gb = ops::mul(g[0], zero_where(zero_base, ops::mul(ctx.saved(2), ops::log(a_))));
           }
           return TensorList{ga, gb};
         });
  return out;
}

// d/da = g * (e a^(e-1)); exponent 0 gives a zero gradient.
Tensor pow(const Tensor& a, const Scalar& e) {
  Tensor out = kernel([&] { return ops::pow(a, e); });
  record("pow", {a}, {out}, {a}, [e](BackwardContext& ctx, const TensorList& g) {
    if (is_zero(e)) return TensorList{Tensor()};
    const double ed = e.d;
    return TensorList{ops::mul(g[0], ops::mul(ops::pow(ctx.saved(0), ed - 1), ed))};
  });
  return out;
}

// d/de = g * (y log(base)); for base 0 the gradient is zero where e >= 0.
Tensor pow(const Scalar& base, const Tensor& e) {
  Tensor out = kernel([&] { return ops::pow(base, e); });
  record("pow", {e}, {out}, {out, is_zero(base) ? e : Tensor()}, [base](BackwardContext& ctx, const TensorList& g) {
    const double log_base = std::log(base.d);
    Tensor d = ops::mul(ctx.saved(0), log_base);
    if (is_zero(base)) d = zero_where(ops::ge(ctx.saved(1), 0), d);
    return TensorList{ops::mul(g[0], d)};
  });
  return out;
}

// Ties split the gradient in half: where(a == b, g / 2, g), masked off on the losing side.
Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::maximum(a, b); });
  record("maximum", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor a = ctx.saved(0), b = ctx.saved(1);
    const Tensor shared = ops::where(ops::eq(a, b), ops::div(g[0], 2), g[0]);
    return TensorList{ctx.needs_grad(0) ? zero_where(ops::lt(a, b), shared) : Tensor(),
                      ctx.needs_grad(1) ? zero_where(ops::gt(a, b), shared) : Tensor()};
  });
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::minimum(a, b); });
  record("minimum", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor a = ctx.saved(0), b = ctx.saved(1);
    const Tensor shared = ops::where(ops::eq(a, b), ops::div(g[0], 2), g[0]);
    return TensorList{ctx.needs_grad(0) ? zero_where(ops::gt(a, b), shared) : Tensor(),
                      ctx.needs_grad(1) ? zero_where(ops::lt(a, b), shared) : Tensor()};
  });
  return out;
}

// d/da = g; d/db = -g * floor(a / b).
Tensor remainder(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::remainder(a, b); });
  const bool save = requires_grad(b);
  record("remainder", {a, b}, {out}, {save ? a : Tensor(), save ? b : Tensor()},
         [](BackwardContext& ctx, const TensorList& g) {
           return TensorList{g[0], ctx.needs_grad(1)
                                       ? ops::mul(ops::neg(g[0]), ops::div(ctx.saved(0), ctx.saved(1), "floor"))
                                       : Tensor()};
         });
  return out;
}

// ---- clamp, where ----

// The gradient passes where min <= x <= max (so at the bounds too), and nowhere when min > max.
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  Tensor out = kernel([&] { return ops::clamp(x, min, max); });
  record("clamp", {x}, {out}, {x}, [min, max](BackwardContext& ctx, const TensorList& g) {
    return TensorList{clamp_self_grad(g[0], ctx.saved(0), min, max)};
  });
  return out;
}

// Tensor bounds: x as above; min gets g where x < min (and min < max); max gets g where x > max
// or max < min (then the result is max everywhere).
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  Tensor out = kernel([&] { return ops::clamp(x, min, max); });
  const Tensor lo = min.value_or(Tensor()), hi = max.value_or(Tensor());
  record("clamp", {x, lo, hi}, {out}, {x, lo, hi}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor x = ctx.saved(0), lo = ctx.saved(1), hi = ctx.saved(2);
    Tensor gx, glo, ghi;
    if (ctx.needs_grad(0)) gx = clamp_self_grad(g[0], x, opt(lo), opt(hi));
    if (lo.defined() && hi.defined()) {
      if (ctx.needs_grad(1)) glo = keep_where(ops::logical_and(ops::lt(x, lo), ops::lt(lo, hi)), g[0]);
      if (ctx.needs_grad(2)) ghi = keep_where(ops::logical_or(ops::gt(x, hi), ops::lt(hi, lo)), g[0]);
    } else if (lo.defined() && ctx.needs_grad(1)) {
      glo = keep_where(ops::lt(x, lo), g[0]);
    } else if (hi.defined() && ctx.needs_grad(2)) {
      ghi = keep_where(ops::gt(x, hi), g[0]);
    }
    return TensorList{gx, glo, ghi};
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::where(cond, a, b); });
  record("where", {a, b}, {out}, {cond}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor c = ctx.saved(0);
    return TensorList{ctx.needs_grad(0) ? keep_where(c, g[0]) : Tensor(),
                      ctx.needs_grad(1) ? zero_where(c, g[0]) : Tensor()};
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  Tensor out = kernel([&] { return ops::where(cond, a, b); });
  record("where", {a}, {out}, {cond},
         [](BackwardContext& ctx, const TensorList& g) { return TensorList{keep_where(ctx.saved(0), g[0])}; });
  return out;
}

// ---- in-place arithmetic: gradient 0 is for self's value before the op ----

Tensor& add_(Tensor& self, const Tensor& b, const Scalar& alpha) {
  check_inplace(self, {b});
  kernel([&] { return ops::add_(self, b, alpha); });
  record_inplace("add_", self, {b}, {}, [alpha](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? scaled(g[0], alpha) : Tensor()};
  });
  return self;
}

Tensor& add_(Tensor& self, const Scalar& b, const Scalar& alpha) {
  check_inplace(self);
  kernel([&] { return ops::add_(self, b, alpha); });
  record_inplace("add_", self, {}, {}, [](BackwardContext&, const TensorList& g) { return TensorList{g[0]}; });
  return self;
}

Tensor& sub_(Tensor& self, const Tensor& b, const Scalar& alpha) {
  check_inplace(self, {b});
  kernel([&] { return ops::sub_(self, b, alpha); });
  record_inplace("sub_", self, {b}, {}, [alpha](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? scaled(ops::neg(g[0]), alpha) : Tensor()};
  });
  return self;
}

Tensor& mul_(Tensor& self, const Tensor& b) {
  check_inplace(self, {b});
  // b's gradient needs self's old value: keep a copy only then.
  const Tensor old = grad_mode_enabled() && requires_grad(b) ? kernel([&] { return self.clone(); }) : Tensor();
  kernel([&] { return ops::mul_(self, b); });
  record_inplace("mul_", self, {b}, {b, old}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::mul(g[0], ctx.saved(0)) : Tensor(),
                      ctx.needs_grad(1) ? ops::mul(g[0], ctx.saved(1)) : Tensor()};
  });
  return self;
}

Tensor& mul_(Tensor& self, const Scalar& b) {
  check_inplace(self);
  kernel([&] { return ops::mul_(self, b); });
  record_inplace("mul_", self, {}, {},
                 [b](BackwardContext&, const TensorList& g) { return TensorList{ops::mul(g[0], b)}; });
  return self;
}

Tensor& div_(Tensor& self, const Tensor& b) {
  check_inplace(self, {b});
  const Tensor old = grad_mode_enabled() && requires_grad(b) ? kernel([&] { return self.clone(); }) : Tensor();
  kernel([&] { return ops::div_(self, b); });
  record_inplace("div_", self, {b}, {b, old}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor b = ctx.saved(0);
    return TensorList{ctx.needs_grad(0) ? ops::div(g[0], b) : Tensor(),
                      ctx.needs_grad(1) ? ops::mul(ops::neg(g[0]), ops::div(ops::div(ctx.saved(1), b), b)) : Tensor()};
  });
  return self;
}

Tensor& div_(Tensor& self, const Scalar& b) {
  check_inplace(self);
  kernel([&] { return ops::div_(self, b); });
  record_inplace("div_", self, {}, {},
                 [b](BackwardContext&, const TensorList& g) { return TensorList{ops::div(g[0], b)}; });
  return self;
}

Tensor& clamp_(Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  check_inplace(self);
  const Tensor old = grad_mode_enabled() && requires_grad(self) ? kernel([&] { return self.clone(); }) : Tensor();
  kernel([&] { return ops::clamp_(self, min, max); });
  record_inplace("clamp_", self, {}, {old}, [min, max](BackwardContext& ctx, const TensorList& g) {
    return TensorList{clamp_self_grad(g[0], ctx.saved(0), min, max)};
  });
  return self;
}

}  // namespace tb
