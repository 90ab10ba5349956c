// Backward formulas of the elementwise ops (engine/ops/elementwise.h). Each function runs the
// kernel and records a closure computing d(input) from d(output); broadcasting is undone by the
// engine (see engine/autograd/function.h).
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"

namespace tb::autograd {

namespace {
// g * alpha, skipping the multiply for alpha == 1.
Tensor scaled(const Tensor& g, const Scalar& alpha) {
  return alpha.is_float() || alpha.i != 1 ? ops::mul(g, alpha) : g;
}
}  // namespace

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

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::mul(a, b); });
  record("mul", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::mul(g[0], ctx.saved(1)) : Tensor(),
                      ctx.needs_grad(1) ? ops::mul(g[0], ctx.saved(0)) : Tensor()};
  });
  return out;
}

Tensor& add_(Tensor& self, const Tensor& b, const Scalar& alpha) {
  check_inplace(self);
  kernel([&] { return ops::add_(self, b, alpha); });
  record_inplace("add_", self, {b}, {}, [alpha](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? scaled(g[0], alpha) : Tensor()};
  });
  return self;
}

}  // namespace tb::autograd
