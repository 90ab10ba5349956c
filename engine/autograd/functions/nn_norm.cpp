// Backward formulas of the normalisation ops (engine/ops/nn_norm.h). Each forward keeps what its
// fused backward kernel needs (softmax: its output; the norms: the per-row mean and rstd they
// normalised with), so backward recomputes no statistics.
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/nn_norm.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::softmax(x, dim, dtype); });
  record("softmax", {x}, {out}, {out}, [dim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::softmax_backward_data(g[0], ctx.saved(0), dim)};
  });
  return out;
}

// Masked entries are exactly 0 in the output, so softmax's backward gives them zero gradient.
Tensor softmax_causal(const Tensor& x) {
  Tensor out = kernel([&] { return ops::softmax_causal(x); });
  record("softmax_causal", {x}, {out}, {out}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::softmax_backward_data(g[0], ctx.saved(0), -1)};
  });
  return out;
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::log_softmax(x, dim, dtype); });
  record("log_softmax", {x}, {out}, {out}, [dim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::log_softmax_backward_data(g[0], ctx.saved(0), dim)};
  });
  return out;
}

// Inputs x, weight, bias (weight and bias may be undefined); gradients from one fused kernel.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  auto [out, mean, rstd] = kernel([&] { return ops::layer_norm_with_stats(x, normalized_shape, weight, bias, eps); });
  record("native_layer_norm", {x, weight, bias}, {out}, {x, weight, mean, rstd},
         [normalized_shape](BackwardContext& ctx, const TensorList& g) {
           auto [dx, dw, db] = ops::layer_norm_backward(g[0], ctx.saved(0), normalized_shape, ctx.saved(2),
                                                        ctx.saved(3), ctx.saved(1),
                                                        {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)});
           return TensorList{dx, dw, db};
         });
  return out;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  auto [out, mean, rstd] = kernel([&] { return ops::group_norm_with_stats(x, num_groups, weight, bias, eps); });
  record("native_group_norm", {x, weight, bias}, {out}, {x, weight, mean, rstd},
         [num_groups](BackwardContext& ctx, const TensorList& g) {
           auto [dx, dw, db] = ops::group_norm_backward(g[0], ctx.saved(0), ctx.saved(2), ctx.saved(3), ctx.saved(1),
                                                        num_groups,
                                                        {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)});
           return TensorList{dx, dw, db};
         });
  return out;
}

// Running stats are buffers: updated in place by the kernel (training), never differentiated.
// Training differentiates through the batch statistics; evaluation's d x is an affine scale.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  auto [out, mean, invstd] = kernel(
      [&] { return ops::batch_norm_with_stats(x, running_mean, running_var, weight, bias, training, momentum, eps); });
  record("native_batch_norm", {x, weight, bias}, {out}, {x, weight, mean, invstd},
         [training](BackwardContext& ctx, const TensorList& g) {
           auto [dx, dw, db] = ops::batch_norm_backward(g[0], ctx.saved(0), ctx.saved(1), ctx.saved(2), ctx.saved(3),
                                                        training,
                                                        {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)});
           return TensorList{dx, dw, db};
         });
  return out;
}

}  // namespace tb
