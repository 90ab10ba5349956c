// Backward formulas of the shape and index ops (engine/ops/index.h), after PyTorch's
// derivatives.yaml: joins give slices of the output gradient back; gathers scatter-add it back;
// scatters gather it; mask ops zero it where the mask replaced the input; sort/topk scatter the
// values' gradient to the returned indices. split/chunk are views (tracked by the view hooks).
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

// A zero gradient of `sizes` with index-addressed values of g written in: PyTorch's
// value_selecting_reduction_backward for indices that are distinct along `dim` (sort, topk).
// indices: same ndim as sizes; g: indices' shape.
Tensor scatter_to_indices(const Tensor& g, int64_t dim, const Tensor& indices, const Shape& sizes) {
  if (sizes.empty()) return g.reshape({});  // 0-dim sort/topk: the identity
  Tensor r = zeros(sizes, g.dtype());
  ops::scatter_(r, dim, indices, g);
  return r;
}

}  // namespace

// ---- joining and splitting ----

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = kernel([&] { return ops::cat(tensors, dim); });
  if (!any_requires_grad(tensors)) return out;
  // Where each input's slab starts along the cat dim. A skipped 1-D empty input gets no slab and,
  // as in PyTorch, an empty gradient: defined, so that the graph behind it still runs (and its
  // saved-tensor checks with it) and a leaf there gets an empty .grad.
  const int64_t d = core::wrap_dim(dim, out.dim(), "cat");
  std::vector<std::pair<int64_t, int64_t>> slabs;  // (start, length); length -1: skipped
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) {
      slabs.push_back({0, -1});
      continue;
    }
    slabs.push_back({off, t.size(d)});
    off += t.size(d);
  }
  record("cat", tensors, {out}, {}, [d, slabs](BackwardContext& ctx, const TensorList& g) {
    TensorList r(slabs.size());
    for (size_t i = 0; i < slabs.size(); ++i)
      if (ctx.needs_grad(i))
        r[i] = slabs[i].second >= 0 ? g[0].narrow(d, slabs[i].first, slabs[i].second) : zeros({0}, g[0].dtype());
    return r;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = kernel([&] { return ops::stack(tensors, dim); });
  if (!any_requires_grad(tensors)) return out;
  const int64_t d = core::wrap_dim(dim, out.dim(), "stack");
  record("stack", tensors, {out}, {}, [d, n = tensors.size()](BackwardContext& ctx, const TensorList& g) {
    TensorList r(n);
    for (size_t i = 0; i < n; ++i)
      if (ctx.needs_grad(i)) r[i] = g[0].select(d, int64_t(i));
    return r;
  });
  return out;
}

// The pieces are narrow() views of self: the view hooks give each its own ViewBackward node, so
// any subset of the pieces may be used later. As in PyTorch (CreationMeta::MULTI_OUTPUT_NODE),
// they may not be modified in place while they require grad, nor may views of them.
namespace {
std::vector<Tensor> mark_multi_output(std::vector<Tensor> pieces) {
  if (grad_mode_enabled())
    for (Tensor& p : pieces) ensure_meta(p).multi_output_view = true;
  return pieces;
}
}  // namespace

std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  return mark_multi_output(ops::split(self, split_size, dim));
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  return mark_multi_output(ops::chunk(self, chunks, dim));
}

Tensor repeat(const Tensor& self, const Shape& repeats) {
  Tensor out = kernel([&] { return ops::repeat(self, repeats); });
  record("repeat", {self}, {out}, {}, [sizes = self.sizes(), repeats](BackwardContext&, const TensorList& g) {
    // g viewed as (r0, s0, r1, s1, ...) summed over every r_i (self padded with leading 1s).
    const size_t nd = repeats.size(), lead = nd - sizes.size();
    Shape big;
    ops::DimList rdims;
    for (size_t i = 0; i < nd; ++i) {
      rdims.push_back(int64_t(big.size()));
      big.push_back(repeats[i]);
      big.push_back(i < lead ? 1 : sizes[i - lead]);
    }
    if (g[0].numel() == 0) return TensorList{zeros(sizes, g[0].dtype())};
    if (nd == 0) return TensorList{g[0]};  // a 0-dim self repeated by {}: the identity
    return TensorList{ops::sum(g[0].reshape(big), rdims).reshape(sizes)};
  });
  return out;
}

// ---- triangles ----

Tensor tril(const Tensor& self, int64_t diagonal) {
  Tensor out = kernel([&] { return ops::tril(self, diagonal); });
  record("tril", {self}, {out}, {},
         [diagonal](BackwardContext&, const TensorList& g) { return TensorList{ops::tril(g[0], diagonal)}; });
  return out;
}

Tensor triu(const Tensor& self, int64_t diagonal) {
  Tensor out = kernel([&] { return ops::triu(self, diagonal); });
  record("triu", {self}, {out}, {},
         [diagonal](BackwardContext&, const TensorList& g) { return TensorList{ops::triu(g[0], diagonal)}; });
  return out;
}

// ---- masks ----

Tensor masked_fill(const Tensor& self, const Tensor& mask, double value) {
  Tensor out = kernel([&] { return ops::masked_fill(self, mask, value); });
  // g has the broadcast shape; the engine sums it down to self's.
  record("masked_fill", {self}, {out}, {mask}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::masked_fill(g[0], ctx.saved(0), 0.0)};
  });
  return out;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value) {
  check_inplace(self);
  kernel([&] { return ops::masked_fill_(self, mask, value); });
  record_inplace("masked_fill_", self, {}, {mask}, [](BackwardContext& ctx, const TensorList& g) {
    return TensorList{ops::masked_fill(g[0], ctx.saved(0), 0.0)};
  });
  return self;
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  Tensor out = kernel([&] { return ops::masked_select(self, mask); });
  if (!any_requires_grad({self})) return out;
  const Shape b = core::broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  // PyTorch's masked_scatter of g into zeros of the broadcast shape: g[j] goes to the j-th set
  // position of the mask in row-major order.
  record("masked_select", {self}, {out}, {mask}, [b](BackwardContext& ctx, const TensorList& g) {
    const Tensor flat_mask = ctx.saved(0).expand(b).reshape({-1});
    const Tensor pos = ops::nonzero(flat_mask).reshape({-1});
    Tensor r = zeros({flat_mask.numel()}, g[0].dtype());
    ops::index_add_(r, 0, pos, g[0]);
    return TensorList{r.reshape(b)};
  });
  return out;
}

// ---- indexing ----

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = kernel([&] { return ops::index_select(self, dim, index); });
  record("index_select", {self}, {out}, {index},
         [dim, sizes = self.sizes()](BackwardContext& ctx, const TensorList& g) {
           Tensor r = zeros(sizes, g[0].dtype());
           ops::index_add_(r, dim, ctx.saved(0), g[0]);
           return TensorList{r};
         });
  return out;
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = kernel([&] { return ops::gather(self, dim, index); });
  record("gather", {self}, {out}, {index}, [dim, sizes = self.sizes()](BackwardContext& ctx, const TensorList& g) {
    Tensor r = zeros(sizes, g[0].dtype());
    ops::scatter_add_(r, dim, ctx.saved(0), g[0]);
    return TensorList{r};
  });
  return out;
}

// d/dself: g with the scattered-to positions zeroed; d/dsrc: g gathered at the index (as
// PyTorch, also for a src element whose write a later duplicate index overwrote).
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = kernel([&] { return ops::scatter(self, dim, index, src); });
  record("scatter", {self, src}, {out}, {index}, [dim](BackwardContext& ctx, const TensorList& g) {
    const Tensor index = ctx.saved(0);
    return TensorList{ctx.needs_grad(0) ? ops::scatter(g[0], dim, index, 0.0) : Tensor(),
                      ctx.needs_grad(1) ? ops::gather(g[0], dim, index) : Tensor()};
  });
  return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = kernel([&] { return ops::scatter_add(self, dim, index, src); });
  record("scatter_add", {self, src}, {out}, {index}, [dim](BackwardContext& ctx, const TensorList& g) {
    return TensorList{g[0], ctx.needs_grad(1) ? ops::gather(g[0], dim, ctx.saved(0)) : Tensor()};
  });
  return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  Tensor out = kernel([&] { return ops::index_add(self, dim, index, source, alpha); });
  record("index_add", {self, source}, {out}, {index}, [dim, alpha](BackwardContext& ctx, const TensorList& g) {
    Tensor gs;
    if (ctx.needs_grad(1)) {
      // A 0-dim source was added as one slice: its gradient is the selected element.
      gs = g[0].dim() == 0 ? g[0] : ops::index_select(g[0], dim, ctx.saved(0));
      if (alpha != 1) gs = ops::mul(gs, alpha);
    }
    return TensorList{g[0], gs};
  });
  return out;
}

// ---- ordering ----

std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending) {
  auto [values, indices] = kernel([&] { return ops::sort(self, dim, descending); });
  record("sort", {self}, {values, indices}, {indices},
         [dim, sizes = self.sizes()](BackwardContext& ctx, const TensorList& g) {
           return TensorList{scatter_to_indices(g[0], dim, ctx.saved(0), sizes)};
         });
  return {values, indices};
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  auto [values, indices] = kernel([&] { return ops::topk(self, k, dim, largest, sorted); });
  record("topk", {self}, {values, indices}, {indices},
         [dim, sizes = self.sizes()](BackwardContext& ctx, const TensorList& g) {
           return TensorList{scatter_to_indices(g[0], dim, ctx.saved(0), sizes)};
         });
  return {values, indices};
}

}  // namespace tb
