// Backward formulas of the reductions (engine/ops/reduce.h): the output gradient is broadcast
// back over the reduced dims (after unsqueezing them when keepdim was false). Formulas follow
// PyTorch's derivatives.yaml / FunctionsManual, including its special points: prod with zeros,
// ties of max/min/amax/amin split evenly, max(dim) feeding only the returned index, norm and std
// giving zero gradient where the result is zero.
#include <cmath>
#include <limits>

#include "engine/autograd/autocast.h"
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/index.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"

namespace tb {

// The public ops are tb::; the machinery that records them (kernel, record, BackwardContext) is
// autograd's.
using namespace autograd;

namespace {

int64_t wrap(int64_t d, const Shape& sizes, const char* op) {
  return core::wrap_dim(d, std::max<int64_t>(int64_t(sizes.size()), 1), op);
}

// g reshaped so that it broadcasts against `sizes` over `dims` (reduced without keepdim).
Tensor unsqueeze_reduced(const Tensor& g, const Shape& sizes, const DimList& dims, bool keepdim) {
  if (keepdim || sizes.empty()) return g;
  if (dims.empty()) return g.reshape(Shape(sizes.size(), 1));
  Shape kept = sizes;
  for (int64_t d : dims) kept[size_t(core::wrap_dim(d, int64_t(sizes.size()), "reduce"))] = 1;
  return g.reshape(kept);
}

// How many elements each output element reduces (`dims` empty: all). A 0-dim input reduces its
// one element whatever dims name it (dim 0 or -1 are valid for it, as in PyTorch).
int64_t reduced_count(const Shape& sizes, const DimList& dims) {
  int64_t n = 1;
  if (dims.empty() || sizes.empty()) {
    for (int64_t s : sizes) n *= s;
  } else {
    for (int64_t d : dims) n *= sizes[size_t(core::wrap_dim(d, int64_t(sizes.size()), "reduce"))];
  }
  return n;
}

// Full max/min: the gradient shared evenly by every element equal to the result (NaN results
// go to the NaN elements), PyTorch's evenly_distribute_backward.
Tensor evenly_distribute(const Tensor& g, const Tensor& x, const Tensor& value) {
  const Tensor mask = std::isnan(value.item_double()) ? ops::isnan(x) : ops::eq(x, value);
  const Tensor share = ops::div(g, ops::sum(mask));
  return ops::masked_fill(zeros(x.sizes(), g.dtype()), mask, share);
}

// amax/amin: (g / count of extremes per slice) * mask, PyTorch's scale_grad_by_count.
Tensor scale_grad_by_count(const Tensor& g, const Tensor& x, const Tensor& result, const DimList& dims, bool keepdim) {
  const Tensor mask = ops::eq(x, unsqueeze_reduced(result, x.sizes(), dims, keepdim));
  const Tensor gu = unsqueeze_reduced(g, x.sizes(), dims, keepdim);
  return ops::mul(ops::div(gu, ops::sum(mask, dims, /*keepdim=*/true)), mask);
}

// max/min along dim: the gradient goes to the returned index only.
Tensor value_selecting_backward(const Tensor& g, const Tensor& indices, const Shape& sizes, int64_t dim, bool keepdim) {
  if (sizes.empty()) return g;
  const Tensor gu = keepdim ? g : g.unsqueeze(dim);
  const Tensor iu = keepdim ? indices : indices.unsqueeze(dim);
  return ops::scatter(zeros(sizes, g.dtype()), dim, iu, gu);
}

// var: (2 / (n - correction)) * g * (x - mean(x)).
Tensor var_backward(const Tensor& g, const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  const double dof = double(reduced_count(x.sizes(), dims)) - correction;
  const Tensor mean = ops::mean(x, dims, /*keepdim=*/true);
  const Tensor gu = unsqueeze_reduced(g, x.sizes(), dims, keepdim);
  if ((dims.empty() || x.dim() == 0) && dof <= 0) {
    // 2 / 0: NaN where x equals its mean (inf * 0), inf elsewhere, as PyTorch (which does so for
    // a whole reduction or a 0-dim x). Compared as x == mean, as PyTorch does: an infinite x is
    // at its mean (x - mean would be NaN), a NaN x is not.
    const Tensor at_mean = ops::eq(x, mean);
    return ops::mul(gu, ops::masked_fill(full(x.sizes(), INFINITY, g.dtype()), at_mean, NAN));
  }
  return ops::mul(ops::mul(gu, Scalar(2.0 / dof)), ops::sub(x, mean));
}

Tensor norm_backward(const Tensor& grad, const Tensor& x, double p, const Tensor& norm, const DimList& dims,
                     bool keepdim) {
  const Tensor g = unsqueeze_reduced(grad, x.sizes(), dims, keepdim);
  const Tensor n = unsqueeze_reduced(norm, x.sizes(), dims, keepdim);
  if (p == 0.0) return Tensor();
  if (p == 1.0) return ops::mul(ops::sign(x), g);
  if (p == 2.0) return ops::mul(g, ops::masked_fill(ops::div(x, n), ops::eq(n, Scalar(0.0)), 0.0));
  if (std::isinf(p)) {
    const Tensor ax = ops::abs(x);
    const Tensor mask = ops::logical_or(ops::eq(ax, n), ops::isnan(ax));
    return ops::mul(ops::sign(x), ops::mul(ops::div(g, ops::sum(mask, dims, /*keepdim=*/true)), mask));
  }
  if (p < 1.0) {
    const Tensor scaled = ops::mul(ops::sign(x), ops::masked_fill(ops::pow(ops::abs(x), Scalar(p - 1)),
                                                                  ops::eq(x, Scalar(0.0)), 0.0));
    return ops::mul(ops::mul(scaled, g), ops::pow(n, Scalar(1 - p)));
  }
  const Tensor scaled = p < 2.0 ? ops::mul(ops::sign(x), ops::pow(ops::abs(x), Scalar(p - 1)))
                                : ops::mul(x, ops::pow(ops::abs(x), Scalar(p - 2)));
  const Tensor scale = ops::masked_fill(ops::div(g, ops::pow(n, Scalar(p - 1))), ops::eq(n, Scalar(0.0)), 0.0);
  return ops::mul(scaled, scale);
}

}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::sum(x, dtype); });
  record("sum", {x}, {out}, {},
         [sizes = x.sizes()](BackwardContext&, const TensorList& g) { return TensorList{g[0].expand(sizes)}; });
  return out;
}

Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::sum(x, dims, keepdim, dtype); });
  record("sum", {x}, {out}, {}, [sizes = x.sizes(), dims, keepdim](BackwardContext&, const TensorList& g) {
    return TensorList{unsqueeze_reduced(g[0], sizes, dims, keepdim).expand(sizes)};
  });
  return out;
}

Tensor mean(const Tensor& x, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::mean(x, dtype); });
  record("mean", {x}, {out}, {}, [sizes = x.sizes()](BackwardContext&, const TensorList& g) {
    return TensorList{ops::div(g[0], Scalar(double(reduced_count(sizes, {})))).expand(sizes)};
  });
  return out;
}

Tensor mean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::mean(x, dims, keepdim, dtype); });
  record("mean", {x}, {out}, {}, [sizes = x.sizes(), dims, keepdim](BackwardContext&, const TensorList& g) {
    const Tensor scaled = ops::div(g[0], Scalar(double(reduced_count(sizes, dims))));
    return TensorList{unsqueeze_reduced(scaled, sizes, dims, keepdim).expand(sizes)};
  });
  return out;
}

Tensor prod(const Tensor& x_in, std::optional<DType> dtype) {
  const Tensor x = autocast_fp32(x_in);
  Tensor out = kernel([&] { return ops::prod(x, dtype); });
  record("prod", {x}, {out}, {x, out}, [](BackwardContext& ctx, const TensorList& g) {
    const Tensor result = ctx.saved(1);
    const Tensor x = ctx.saved(0).to(result.dtype());
    if (x.dim() == 0) return TensorList{g[0]};
    // PyTorch flattens the input, so a zero anywhere is handled along one dim.
    const Tensor flat = x.reshape({x.numel()});
    return TensorList{ops::prod_backward(g[0].reshape({1}), flat, result.reshape({1}), 0).view(x.sizes())};
  });
  return out;
}

Tensor prod(const Tensor& x_in, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  const Tensor x = autocast_fp32(x_in);
  Tensor out = kernel([&] { return ops::prod(x, dim, keepdim, dtype); });
  record("prod", {x}, {out}, {x, out}, [dim, keepdim](BackwardContext& ctx, const TensorList& g) {
    const Tensor result = ctx.saved(1);
    const Tensor x = ctx.saved(0).to(result.dtype());
    if (x.dim() == 0) return TensorList{g[0]};
    const int64_t d = wrap(dim, x.sizes(), "prod");
    const Tensor gu = keepdim ? g[0] : g[0].unsqueeze(d);
    const Tensor ru = keepdim ? result : result.unsqueeze(d);
    return TensorList{ops::prod_backward(gu, x, ru, d)};
  });
  return out;
}

Tensor max(const Tensor& x) {
  Tensor out = kernel([&] { return ops::max(x); });
  record("max", {x}, {out}, {x, out}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{evenly_distribute(g[0], ctx.saved(0), ctx.saved(1))};
  });
  return out;
}

Tensor min(const Tensor& x) {
  Tensor out = kernel([&] { return ops::min(x); });
  record("min", {x}, {out}, {x, out}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{evenly_distribute(g[0], ctx.saved(0), ctx.saved(1))};
  });
  return out;
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = kernel([&] { return ops::max(x, dim, keepdim); });
  const int64_t d = wrap(dim, x.sizes(), "max");
  record("max", {x}, {values, indices}, {indices},
         [sizes = x.sizes(), d, keepdim](BackwardContext& ctx, const TensorList& g) {
           return TensorList{value_selecting_backward(g[0], ctx.saved(0), sizes, d, keepdim)};
         });
  return {values, indices};
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  auto [values, indices] = kernel([&] { return ops::min(x, dim, keepdim); });
  const int64_t d = wrap(dim, x.sizes(), "min");
  record("min", {x}, {values, indices}, {indices},
         [sizes = x.sizes(), d, keepdim](BackwardContext& ctx, const TensorList& g) {
           return TensorList{value_selecting_backward(g[0], ctx.saved(0), sizes, d, keepdim)};
         });
  return {values, indices};
}

Tensor amax(const Tensor& x, const DimList& dims, bool keepdim) {
  Tensor out = kernel([&] { return ops::amax(x, dims, keepdim); });
  record("amax", {x}, {out}, {x, out}, [dims, keepdim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{scale_grad_by_count(g[0], ctx.saved(0), ctx.saved(1), dims, keepdim)};
  });
  return out;
}

Tensor amin(const Tensor& x, const DimList& dims, bool keepdim) {
  Tensor out = kernel([&] { return ops::amin(x, dims, keepdim); });
  record("amin", {x}, {out}, {x, out}, [dims, keepdim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{scale_grad_by_count(g[0], ctx.saved(0), ctx.saved(1), dims, keepdim)};
  });
  return out;
}

Tensor var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  Tensor out = kernel([&] { return ops::var(x, dims, correction, keepdim); });
  record("var", {x}, {out}, {x}, [dims, correction, keepdim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{var_backward(g[0], ctx.saved(0), dims, correction, keepdim)};
  });
  return out;
}

Tensor std(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  Tensor out = kernel([&] { return ops::std(x, dims, correction, keepdim); });
  record("std", {x}, {out}, {x, out}, [dims, correction, keepdim](BackwardContext& ctx, const TensorList& g) {
    const Tensor result = ctx.saved(1);
    // d std = d var / (2 std), zero where std is zero.
    const Tensor gvar = ops::masked_fill(ops::div(g[0], ops::mul(result, Scalar(2.0))), ops::eq(result, Scalar(0.0)),
                                         0.0);
    return TensorList{var_backward(gvar, ctx.saved(0), dims, correction, keepdim)};
  });
  return out;
}

Tensor norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  Tensor out = kernel([&] { return ops::norm(x, p, dims, keepdim); });
  record("norm", {x}, {out}, {x, out}, [p, dims, keepdim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{norm_backward(g[0], ctx.saved(0), p, ctx.saved(1), dims, keepdim)};
  });
  return out;
}

Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim) {
  Tensor out = kernel([&] { return ops::logsumexp(x, dims, keepdim); });
  record("logsumexp", {x}, {out}, {x, out}, [dims, keepdim](BackwardContext& ctx, const TensorList& g) {
    const Tensor x = ctx.saved(0);
    const Tensor r = unsqueeze_reduced(ctx.saved(1), x.sizes(), dims, keepdim);
    return TensorList{ops::mul(unsqueeze_reduced(g[0], x.sizes(), dims, keepdim), ops::exp(ops::sub(x, r)))};
  });
  return out;
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::cumsum(x, dim, dtype); });
  record("cumsum", {x}, {out}, {}, [dim, xdt = x.dtype()](BackwardContext&, const TensorList& g) {
    return TensorList{ops::cumsum_backward(g[0].to(xdt), dim)};
  });
  return out;
}

}  // namespace tb
