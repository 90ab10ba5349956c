// Backward formulas of the reductions (engine/ops/reduce.h): the output gradient is broadcast
// back over the reduced dims (after unsqueezing them when keepdim was false).
#include "engine/autograd/function.h"
#include "engine/autograd/functions.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"

namespace tb::autograd {

namespace {
// g reshaped so that it broadcasts against `sizes` over `dims` (reduced without keepdim).
Tensor unsqueeze_reduced(const Tensor& g, const Shape& sizes, const DimList& dims, bool keepdim) {
  if (keepdim || sizes.empty()) return g;
  if (dims.empty()) return g.reshape(Shape(sizes.size(), 1));
  Shape kept = sizes;
  for (int64_t d : dims) kept[core::wrap_dim(d, int64_t(sizes.size()), "sum")] = 1;
  return g.reshape(kept);
}
}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::sum(x, dtype); });
  record("sum", {x}, {out}, {}, [sizes = x.sizes()](BackwardContext&, const TensorList& g) {
    return TensorList{g[0].expand(sizes)};
  });
  return out;
}

Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor out = kernel([&] { return ops::sum(x, dims, keepdim, dtype); });
  record("sum", {x}, {out}, {}, [sizes = x.sizes(), dims, keepdim](BackwardContext&, const TensorList& g) {
    return TensorList{unsqueeze_reduced(g[0], sizes, dims, keepdim).expand(sizes)};
  });
  return out;
}

}  // namespace tb::autograd
