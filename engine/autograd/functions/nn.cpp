// Backward formulas of the nn ops (engine/ops/nn.h): conv2d, max/avg pooling, embedding, dropout
// and pad. Each hands its gradient to one fused ops:: backward kernel (convolution_backward,
// max_pool2d_with_indices_backward, avg_pool2d_backward, embedding_dense_backward,
// native_dropout_backward, pad_backward), as PyTorch's derivatives.yaml does.
#include "engine/autograd/autocast.h"
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/nn.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

Tensor conv2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const Shape& stride,
              const Shape& padding, const Shape& dilation, int64_t groups) {
  const Tensor x = autocast_lower(x_in), weight = autocast_lower(weight_in), bias = autocast_lower(bias_in);
  Tensor out = kernel([&] { return ops::conv2d(x, weight, bias, stride, padding, dilation, groups); });
  record("conv2d", {x, weight, bias}, {out}, {x, weight},
         [stride, padding, dilation, groups](BackwardContext& ctx, const TensorList& g) {
           auto [gx, gw, gb] = ops::convolution_backward(g[0], ctx.saved(0), ctx.saved(1), stride, padding, dilation,
                                                         groups,
                                                         {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)});
           return TensorList{gx, gw, gb};
         });
  return out;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride,
                                                   const Shape& padding, const Shape& dilation, bool ceil_mode) {
  auto [out, indices] = kernel(
      [&] { return ops::max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode); });
  // The gradient goes to each window's argmax only (ties: the first, as the forward picked it).
  record("max_pool2d_with_indices", {x}, {out, indices}, {indices},
         [sizes = x.sizes()](BackwardContext& ctx, const TensorList& g) {
           return TensorList{ops::max_pool2d_with_indices_backward(g[0], sizes, ctx.saved(0))};
         });
  return {out, indices};
}

Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  // Without a graph to record, the index-free kernel is enough.
  if (!any_requires_grad({x}))
    return kernel([&] { return ops::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); });
  return std::get<0>(max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  Tensor out = kernel(
      [&] { return ops::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override); });
  record("avg_pool2d", {x}, {out}, {},
         [sizes = x.sizes(), kernel_size, stride, padding, ceil_mode, count_include_pad,
          divisor_override](BackwardContext&, const TensorList& g) {
           return TensorList{ops::avg_pool2d_backward(g[0], sizes, kernel_size, stride, padding, ceil_mode,
                                                      count_include_pad, divisor_override)};
         });
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  Tensor out = kernel([&] { return ops::embedding(weight, indices, padding_idx); });
  record("embedding", {weight}, {out}, {indices},
         [V = weight.size(0), padding_idx](BackwardContext& ctx, const TensorList& g) {
           return TensorList{ops::embedding_dense_backward(g[0], ctx.saved(0), V, padding_idx)};
         });
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training, core::Generator* gen) {
  // p = 0 and eval mode return x itself, as PyTorch does: the identity needs no node.
  if (!training || p == 0 || !any_requires_grad({x})) return kernel([&] { return ops::dropout(x, p, training, gen); });
  auto [out, mask] = kernel([&] { return ops::native_dropout(x, p, training, gen); });
  // grad * mask / (1 - p) with the mask this forward drew (p = 1: every element dropped).
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  record("dropout", {x}, {out}, {mask}, [scale](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::native_dropout_backward(g[0], ctx.saved(0), scale)};
  });
  return out;
}

Tensor pad(const Tensor& x_in, const Shape& pad, const std::string& mode, double value) {
  // LibTorch's CPU autocast runs reflection and replication padding in float32.
  const Tensor x = mode == "constant" ? x_in : autocast_fp32(x_in);
  Tensor out = kernel([&] { return ops::pad(x, pad, mode, value); });
  record("pad", {x}, {out}, {}, [sizes = x.sizes(), pad, mode](BackwardContext&, const TensorList& g) {
    if (mode != "constant") return TensorList{ops::pad_backward(g[0], sizes, pad, mode)};
    // Constant padding's adjoint crops what it added and zero-fills what it cropped: pad by -pad.
    Shape neg = pad;
    for (int64_t& v : neg) v = -v;
    return TensorList{ops::pad(g[0], neg, "constant", 0)};
  });
  return out;
}

}  // namespace tb
