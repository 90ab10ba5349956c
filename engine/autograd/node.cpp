#include "engine/autograd/node.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <numeric>
#include <optional>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/variable.h"
#include "engine/memory/allocator.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"

namespace tb::autograd {

uint64_t next_sequence_nr() {
  static std::atomic<uint64_t> seq{0};
  return seq.fetch_add(1, std::memory_order_relaxed);
}

std::string backward_name(const std::string& forward_op) {
  std::string out;
  bool up = true;
  for (char ch : forward_op) {
    if (ch == '_') {
      up = true;
      continue;
    }
    out += up ? char(std::toupper(static_cast<unsigned char>(ch))) : ch;
    up = false;
  }
  return out + "Backward0";
}

// ---- SavedTensor ----

SavedTensor::SavedTensor(const Tensor& t) : defined_(t.defined()) {
  if (!t.defined()) return;
  TB_CHECK(!t.is_inference(), "autograd",
           "Inference tensors cannot be saved for backward. To work around you can make a clone to get a "
           "normal tensor and use it in autograd.");
  if (detail::discard_saved) {
    discarded_ = true;
    return;
  }
  data_ = t.detach();
  original_ = t.impl_ptr();
  version_ = t.version();
}

Tensor SavedTensor::unpack(const Node& owner) const {
  if (!defined_) return Tensor();
  TB_CHECK(!discarded_, owner.name(),
           "this tensor was saved inside the forward of a checkpointed region (autograd::checkpoint), which "
           "keeps no activations; backpropagate through the region's outputs instead");
  TB_CHECK(!released_, owner.name(),
           "Trying to backward through the graph a second time (or directly access saved tensors after they "
           "have already been freed). Saved intermediate values of the graph are freed when you call "
           ".backward() or autograd::grad(). Specify retain_graph=true if you need to backward through the "
           "graph a second time.");
  if (data_.version() == version_) return data_;
  std::string producer;  // PyTorch names the node whose output the tensor now is
  if (std::shared_ptr<TensorImpl> impl = original_.lock())
    if (std::shared_ptr<Node> fn = Tensor(impl).grad_fn())
      producer = ", which is output " + std::to_string(Tensor(impl).output_nr()) + " of " + fn->name() + ",";
  TB_CHECK(false, owner.name(),
           "one of the variables needed for gradient computation has been modified by an inplace operation: [",
           core::name(data_.dtype()), " ", core::to_string(data_.sizes()), "]", producer, " is at version ",
           data_.version(), "; expected version ", version_, " instead. It was saved by ", owner.name(),
           ", the backward of ", owner.forward_op(),
           ". Hint: clone the tensor before modifying it in place, or enable anomaly "
           "mode to find the op.");
  return data_;
}

// ---- Node ----

Node::Node(std::string name, std::string forward_op)
    : seq_(next_sequence_nr()), name_(std::move(name)), forward_op_(std::move(forward_op)) {}

FunctionNode::FunctionNode(std::string forward_op, std::vector<SavedTensor> saved, BackwardFn fn)
    : Node(backward_name(forward_op), forward_op), saved_(std::move(saved)), fn_(std::move(fn)) {}

TensorList FunctionNode::apply(TensorList&& grads) {
  BackwardContext ctx(*this, saved_);
  return fn_(ctx, grads);
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : saved_) s.release();
}

// ---- AccumulateGrad ----

AccumulateGrad::AccumulateGrad(Tensor variable) : Node("AccumulateGrad", "leaf"), variable_(std::move(variable)) {
  seq_ = UINT64_MAX;  // leaves accumulate as soon as their gradient is complete
  outputs.push_back({variable_.sizes(), variable_.dtype()});
}

// Note [Gradient buffers]
// A gradient usually lands in a fresh buffer that AccumulateGrad then steals as .grad. DDP with
// gradient_as_bucket_view wants it in its bucket slot instead, and copying it there costs a pass
// over every gradient each step (3.9% of the CPU samples of the 2-rank MLP benchmark on a Zen 3
// host; 2.1% once the slot is written directly and only divided in place). So a leaf's
// accumulator can be offered a buffer: a backward formula that produces the leaf's gradient in
// one piece (linear's weight gradient) asks BackwardContext::grad_buffer for it and writes the
// product straight into it, and AccumulateGrad adopts it as .grad when it arrives unchanged.
// It is lent at most once per offer, so two producers of the same leaf (a weight used twice)
// never share it: the second allocates and the engine sums the two as usual (out of place).
// It is not lent when it could be seen before it becomes .grad -- under grad(), whose results go
// to the caller, or to a leaf with tensor hooks -- nor when .grad already holds a gradient to
// accumulate into. The offer is its owner's to withdraw (DDP's reducer does after each backward).
thread_local bool detail::leaves_accumulate = false;
thread_local bool detail::discard_saved = false;

void AccumulateGrad::offer_grad_buffer(Tensor buffer) {
  offered_ = std::move(buffer);
  lent_ = Tensor();
}

Tensor AccumulateGrad::take_grad_buffer() {
  Tensor b = std::move(offered_);
  offered_ = Tensor();
  const AutogradMeta* m = meta_of(variable_);
  if (!b.defined() || !detail::leaves_accumulate || variable_.grad().defined() || (m && !m->hooks.empty()) ||
      b.sizes() != variable_.sizes() || b.strides() != variable_.strides() || b.dtype() != variable_.dtype())
    return Tensor();
  lent_ = b;
  return b;
}

Tensor BackwardContext::grad_buffer(size_t i) const {
  if (!needs_grad(i)) return Tensor();
  auto* acc = dynamic_cast<AccumulateGrad*>(node_.next_edges[i].fn.get());
  return acc ? acc->take_grad_buffer() : Tensor();
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  const Tensor lent = std::move(lent_);
  lent_ = Tensor();
  Tensor g = run_tensor_hooks(variable_, grads.at(0));
  if (!g.defined()) return {};
  NoGradGuard no_grad;
  Tensor old = variable_.grad();
  if (!old.defined() && lent.defined() && g.is_same(lent)) {
    variable_.set_grad(g.detach());  // the lent buffer came back as the gradient: adopt it
    return {};
  }
  if (!old.defined()) {
    // Steal the incoming buffer when nobody else can see it and it has the leaf's layout; else
    // copy it into a fresh buffer laid out like the leaf (PyTorch's gradient layout contract).
    // The engine keeps one more reference for the post hooks' `received` list (DDP's reducer
    // hooks every parameter): as PyTorch's 1 + !post_hooks().empty(), that one does not count.
    const long expected = 2 + (post_hooks.empty() ? 0 : 1);
    const bool alone = g.impl_ptr().use_count() <= expected && g.storage().use_count() == 1;
    // PyTorch's layout contract: the leaf's strides when it is dense, else row-major (an expanded
    // leaf must never adopt an expanded gradient).
    const bool layout_ok = is_non_overlapping_and_dense(variable_) ? g.strides() == variable_.strides()
                                                                   : g.is_contiguous();
    // Either way the buffer is .grad's alone from now on: count it as gradient memory (it may
    // have been allocated under another tag, e.g. by a create_graph backward). Note [Memory tags]
    if (alone && layout_ok && g.storage_offset() == 0) {
      if (g.storage()) g.storage()->set_tag(memory::Tag::Gradient);
      variable_.set_grad(g.detach());
    } else {
      memory::TagGuard tag(memory::Tag::Gradient);
      Tensor fresh = empty_like_preserve(variable_, variable_.dtype());
      fresh.copy_(g);
      variable_.set_grad(fresh);
    }
  } else {
    ops::add_(old, g);
  }
  return {};
}

// ---- views ----
// Note [View backward]
// A view and its base share storage, so both are described by (sizes, strides, offset) in one
// coordinate space. The base's gradient is built in a buffer with the base's geometry: the
// view's gradient is added into the buffer at the view's geometry, and the buffer read back with
// the base's geometry. This is exact for any view of a non-overlapping base: dims of stride 0
// (expand) are summed first, so every buffer element receives at most one add. A view of an
// overlapping base (a view of an expanded tensor) has no storage-to-index inverse: there the view
// op is replayed on a dense proxy of the base's shape (ViewReplay, tensor.h) and the node works
// in that proxy's geometry, so the gradient lands in the base's index space as PyTorch's per-op
// formulas put it. as_strided (storage-addressed, no replay) of an overlapping base maps through
// the nearest non-overlapping tensor below it that requires grad: a leaf made from a view
// (AutogradMeta::leaf_base), else the root base; only without one is it refused when its backward
// runs. A view that tiles its row-major base (a transpose, permute or
// reshape) skips the buffer: the view's gradient read in storage order is the base's gradient.

namespace {

bool non_overlapping(const Shape& sizes, const Shape& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t extent = 0;  // the last position reached by the dims so far
  for (size_t d : dims) {
    if (strides[d] <= extent) return false;
    extent += (sizes[d] - 1) * strides[d];
  }
  return true;
}

int64_t numel_of(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>()); }

struct ViewBuffer {
  Tensor buf, base, region;
  ops::DimList summed;  // stride-0 dims of the view, summed before writing
};

ViewBuffer make_view_buffer(const Geometry& base, const Geometry& view, DType dtype, bool zero, const std::string& op) {
  TB_CHECK(non_overlapping(base.sizes, base.strides), op,
           "cannot compute the gradient of a view of an overlapping tensor (a view of an expanded tensor, sizes ",
           core::to_string(base.sizes), " strides ", core::to_string(base.strides),
           "); call .contiguous() on the expanded tensor before taking the view");
  const int64_t len = reach(base.sizes, base.strides, 0);
  const int64_t rel = view.offset - base.offset;
  TB_CHECK(rel >= 0 && reach(view.sizes, view.strides, rel) <= len, op,
           "the view reaches outside its base; its gradient is undefined");
  ViewBuffer vb;
  vb.buf = zero ? zeros({len}, dtype) : empty({len}, dtype);
  Shape vs = view.sizes;
  for (size_t d = 0; d < vs.size(); ++d)
    if (view.strides[d] == 0 && vs[d] > 1) {
      vb.summed.push_back(int64_t(d));
      vs[d] = 1;
    }
  TB_CHECK(non_overlapping(vs, view.strides), op, "cannot compute the gradient of an overlapping as_strided view");
  vb.base = make_view(vb.buf, base.sizes, base.strides, 0);
  vb.region = make_view(vb.buf, vs, view.strides, rel);
  return vb;
}

// Dims of size > 1 ordered by stride, largest first, when they tile a contiguous block (a
// permutation of a contiguous layout, its dims possibly split or merged); else nothing.
std::optional<Shape> storage_order(const Shape& sizes, const Shape& strides) {
  Shape dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.push_back(int64_t(d));
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return strides[size_t(a)] > strides[size_t(b)]; });
  int64_t expected = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (strides[size_t(dims[i])] != expected) return std::nullopt;
    expected *= sizes[size_t(dims[i])];
  }
  return dims;
}

}  // namespace

Tensor view_of_base_grad(const Tensor& g, const Geometry& base, const Geometry& view) {
  ViewBuffer vb = make_view_buffer(base, view, g.dtype(), false, "view");
  vb.base.copy_(g);
  return vb.region;
}

ViewNode::ViewNode(Geometry base, Geometry view, DType dtype)
    : Node("ViewBackward0", "view"), base_(std::move(base)), view_(std::move(view)), dtype_(dtype) {
  outputs.push_back({view_.sizes, dtype});
}

TensorList ViewNode::apply(TensorList&& grads) {
  Tensor g = grads.at(0);
  // An empty view (or base) carries no gradient, whatever the base's geometry.
  if (numel_of(view_.sizes) == 0 || numel_of(base_.sizes) == 0) return {zeros(base_.sizes, g.dtype())};
  // A view covering every element of its base (reshape, transpose, permute, squeeze, ...) needs
  // no zero fill.
  const bool covers = numel_of(view_.sizes) == numel_of(base_.sizes) && non_overlapping(view_.sizes, view_.strides);
  // A permuted, split or merged view of a row-major contiguous base: the base's gradient is the view's
  // gradient read in storage order (a permute, then a reshape that copies only when it must), as
  // PyTorch's transpose/permute/view backward formulas are; no buffer, and no copy for a transpose.
  const std::optional<Shape> base_order = storage_order(base_.sizes, base_.strides);
  if (covers && view_.offset == base_.offset && base_order && std::is_sorted(base_order->begin(), base_order->end())) {
    if (std::optional<Shape> order = storage_order(view_.sizes, view_.strides)) {
      for (size_t d = 0; d < view_.sizes.size(); ++d)
        if (view_.sizes[d] <= 1) order->push_back(int64_t(d));
      return {g.permute(*order).reshape(base_.sizes)};
    }
  }
  ViewBuffer vb = make_view_buffer(base_, view_, g.dtype(), !covers, name());
  if (!vb.summed.empty()) g = ops::sum(g, vb.summed, /*keepdim=*/true);
  if (covers) vb.region.copy_(g);
  else ops::add_(vb.region, g);
  return {vb.base};
}

CopySlices::CopySlices(const Edge& base_edge, Geometry base, Geometry view, DType dtype, std::shared_ptr<Node> fn)
    : Node("CopySlices", fn->forward_op()), base_(std::move(base)), view_(std::move(view)), fn_(std::move(fn)) {
  outputs.push_back({base_.sizes, dtype});
  next_edges.push_back(base_edge);
  for (size_t i = 1; i < fn_->next_edges.size(); ++i) next_edges.push_back(fn_->next_edges[i]);
}

TensorList CopySlices::apply(TensorList&& grads) {
  const Tensor& g = grads.at(0);
  if (numel_of(view_.sizes) == 0) {
    // The op wrote nothing: the base's gradient passes through. Its backward still runs (on an
    // empty gradient) for its saved-tensor checks and its other inputs' gradients.
    TensorList inner = fn_->apply({zeros(view_.sizes, g.dtype())});
    TensorList out{g};
    for (size_t i = 1; i < inner.size(); ++i) out.push_back(inner[i]);
    out.resize(next_edges.size());
    return out;
  }
  ViewBuffer vb = make_view_buffer(base_, view_, g.dtype(), false, name());
  TB_CHECK(vb.summed.empty(), name(), "an in-place op on an expanded view has no gradient");
  vb.base.copy_(g);
  TensorList inner = fn_->apply({vb.region.clone()});
  if (!inner.empty() && inner[0].defined()) vb.region.copy_(inner[0]);
  else zero_(vb.region);
  TensorList out{vb.base};
  for (size_t i = 1; i < inner.size(); ++i) out.push_back(inner[i]);
  out.resize(next_edges.size());
  return out;
}

}  // namespace tb::autograd
