// Backward formulas of the linear-algebra ops (engine/ops/linalg.h). For C = A @ B:
// dA = dC @ B^T, dB = A^T @ dC, computed with the same oneDNN kernels as the forward.
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/linalg.h"

namespace tb::autograd {

Tensor mm(const Tensor& a, const Tensor& b) {
  Tensor out = kernel([&] { return ops::mm(a, b); });
  record("mm", {a, b}, {out}, {a, b}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ctx.needs_grad(0) ? ops::mm(g[0], ctx.saved(1).t()) : Tensor(),
                      ctx.needs_grad(1) ? ops::mm(ctx.saved(0).t(), g[0]) : Tensor()};
  });
  return out;
}

}  // namespace tb::autograd
