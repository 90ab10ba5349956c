// Tensor metadata, views and the layout checks behind them.
#include "engine/tensor/tensor.h"

#include "engine/tensor/stride_order.h"

#include <algorithm>
#include <span>
#include <numeric>

#include "engine/core/profiler.h"
#include "engine/memory/site.h"
#include "engine/tensor/grad_mode_flag.h"
#include "engine/tensor/view_replay.h"

namespace tb {

using core::to_string;
using core::wrap_dim;

namespace {
Tensor contiguous_copy(const Tensor& t) {
  Tensor out = empty(t.sizes(), t.dtype());
  out.copy_(t);
  return out;
}
}  // namespace

// wrap_dim accepts dim 0 / -1 of a 0-dim tensor (as a dim list may name it); its size may not.
int64_t Tensor::size(int64_t d) const {
  TB_CHECK(dim() > 0, "size", "dimension specified as ", d, " but tensor has no dimensions");
  return impl_->sizes[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  TB_CHECK(dim() > 0, "stride", "dimension specified as ", d, " but tensor has no dimensions");
  return impl_->strides[wrap_dim(d, dim(), "stride")];
}

int64_t Tensor::numel() const {
  // Unsigned: with a 0 among sizes such as [2^63 - 1, 2, 0] the partial products may wrap (no UB)
  // and the result is still 0; without one the product fits int64 (checked_numel at creation).
  uint64_t n = 1;
  for (int64_t s : impl_->sizes) n *= uint64_t(s);
  return int64_t(n);
}

void* Tensor::data() const { return static_cast<char*>(impl_->storage->data()) + impl_->offset * int64_t(itemsize()); }

double Tensor::item_double() const { return item<double>(); }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (impl_->sizes[d] == 1) continue;
    if (impl_->strides[d] != expected) return false;
    expected *= impl_->sizes[d];
  }
  return true;
}

int64_t reach(const Shape& sizes, const Shape& strides, int64_t offset) {
  return core::checked_storage_nbytes(sizes, strides, offset, 1, "reach");
}

Tensor empty(const Shape& sizes, DType dtype) {
  const int64_t n = core::checked_numel(sizes, "empty");
  int64_t nbytes = 0;
  TB_CHECK(!__builtin_mul_overflow(n, int64_t(core::itemsize(dtype)), &nbytes), "empty",
           "storage size calculation overflowed: size ", to_string(sizes), " of ", core::name(dtype),
           " needs more than 2^63 bytes");
  Shape strides = core::contiguous_strides(sizes, "empty");  // before allocating: it can throw
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(nbytes), memory::cpu_allocator());
  impl->sizes = sizes;
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  impl->inference = inference_mode_flag();
  return Tensor(std::move(impl));
}

bool is_non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  std::vector<int64_t> dims;  // dims of size >= 2; size-1 dims never matter
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.sizes()[d] >= 2) dims.push_back(d);
  std::stable_sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return t.strides()[a] < t.strides()[b]; });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.strides()[d] != expected) return false;
    expected *= t.sizes()[d];
  }
  return true;
}

Tensor empty_like_preserve(const Tensor& t, DType dtype) {
  if (t.is_contiguous() || !is_non_overlapping_and_dense(t)) return empty(t.sizes(), dtype);
  // Same strides as t over a fresh, exactly-sized storage.
  Tensor base = empty({t.numel()}, dtype);
  return make_view(base, t.sizes(), t.strides(), 0);
}

// Note [Channels-last by strides]
// PyTorch keeps no memory-format tag on a tensor; it reads one off the strides. Walking the dims
// from the innermost channels-last dim outwards (C, W, H, (D,) N), each stride must be at least
// the span of the dims walked so far (sizes of 1 spanning nothing); a zero-size dim, a zero
// channel stride, or N's stride equal to C's (N111 tensors, which fit both layouts) says
// contiguous instead. Ambiguous layouts (size-1 dims) thus fall as PyTorch's do, which is what
// decides whether .view() works on such an op's result.
namespace {
constexpr size_t kChannelsLast4[] = {1, 3, 2, 0}, kChannelsLast5[] = {1, 4, 3, 2, 0};  // innermost first
std::span<const size_t> channels_last_order(size_t nd) {
  return nd == 4 ? std::span<const size_t>(kChannelsLast4) : std::span<const size_t>(kChannelsLast5);
}
}  // namespace

bool suggests_channels_last(const Tensor& t) {
  if (t.dim() != 4 && t.dim() != 5) return false;
  const Shape& sz = t.sizes();
  const Shape& st = t.strides();
  if (st[1] == 0) return false;
  int64_t span = 0;
  for (size_t d : channels_last_order(sz.size())) {
    if (sz[d] == 0 || st[d] < span) return false;
    if (d == 0 && span == st[1]) return false;
    span = st[d] * (sz[d] > 1 ? sz[d] : 1);
  }
  return true;
}

bool is_channels_last_contiguous(const Tensor& t) {
  if (t.dim() != 4) return false;
  int64_t expected = 1;
  for (size_t d : channels_last_order(4)) {
    const int64_t size = t.sizes()[d];
    if (size == 1) continue;
    if (t.strides()[d] != expected) return false;
    expected *= size;
  }
  return true;
}

Tensor empty_channels_last(const Shape& sizes, DType dtype) {
  TB_CHECK(sizes.size() == 4 || sizes.size() == 5, "empty_channels_last", "expected a 4-D or 5-D shape, got ",
           to_string(sizes));
  Shape strides(sizes.size());
  int64_t next = 1;
  for (size_t d : channels_last_order(sizes.size())) {
    strides[d] = next;
    next *= sizes[d];
  }
  const Tensor flat = empty({core::checked_numel(sizes, "empty_channels_last")}, dtype);
  return make_tensor(flat.storage(), sizes, strides, 0, dtype, "empty_channels_last");
}

Tensor in_memory_format_of(const Tensor& like, const Tensor& r) {
  if (r.dim() != like.dim() || !suggests_channels_last(like)) return r;
  Tensor out = empty_channels_last(r.sizes(), r.dtype());
  out.copy_(r);
  return out;
}

Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides, int64_t offset,
                   DType dtype, const char* op) {
  TB_CHECK(sizes.size() == strides.size(), op, "sizes ", to_string(sizes), " and strides ", to_string(strides),
           " differ in length");
  core::checked_numel(sizes, op);
  TB_CHECK(offset >= 0, op, "negative storage offset ", offset);
  for (int64_t s : strides) TB_CHECK(s >= 0, op, "negative strides are not supported: ", to_string(strides));
  const int64_t avail = int64_t(storage->nbytes() / core::itemsize(dtype));
  TB_CHECK(core::checked_storage_nbytes(sizes, strides, offset, 1, op) <= avail, op, "size ", to_string(sizes),
           " with strides ", to_string(strides), " and offset ", offset, " reaches past a storage of ", avail,
           " elements");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  impl->inference = inference_mode_flag();
  return Tensor(std::move(impl));
}

namespace {
// make_view without the autograd hook.
Tensor alias_with(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  impl->version = t.impl()->version;
  impl->inference = t.impl()->inference;
  return Tensor(std::move(impl));
}
}  // namespace

Tensor make_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  Tensor v = alias_with(t, sizes, strides, offset);
  if (autograd_hooks().on_view) autograd_hooks().on_view(t, v);
  return v;
}

OnReplayedView& on_replayed_view_hook() {
  static OnReplayedView hook = nullptr;
  return hook;
}

namespace {
// A view op's replay, built only for a self-overlapping base (the rare case that needs it), so
// ordinary views pay nothing for it. See view_replay.h.
template <typename F>
ViewReplay replay_if_overlapping(const Tensor& base, F&& f) {
  for (int64_t d = 0; d < base.dim(); ++d)
    if (base.strides()[size_t(d)] == 0 && base.sizes()[size_t(d)] > 1) return ViewReplay(std::forward<F>(f));
  return {};
}

// make_view that hands autograd the op's replay when there is one.
Tensor make_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset, const ViewReplay& replay) {
  if (!replay || !on_replayed_view_hook()) return tb::make_view(t, sizes, strides, offset);
  Tensor v = alias_with(t, sizes, strides, offset);
  on_replayed_view_hook()(t, v, replay);
  return v;
}
// A view with the base's own geometry (transpose(d, d), squeeze of a non-1 dim, ...).
Tensor same_view(const Tensor& t) {
  return make_view(t, t.sizes(), t.strides(), t.storage_offset(),
                   replay_if_overlapping(t, [](const Tensor& p) { return p; }));
}
}  // namespace

AutogradHooks& autograd_hooks() {
  static AutogradHooks hooks;
  return hooks;
}

bool& inference_mode_flag() {
  thread_local bool on = false;
  return on;
}

bool& grad_mode_flag() {
  thread_local bool on = true;
  return on;
}

RequiresGradFn& requires_grad_hook() {
  static RequiresGradFn fn = nullptr;
  return fn;
}

// Can `new_sizes` be laid over the memory of (old_sizes, old_strides) without a copy? Walks
// the old dims from the innermost, grouping them into runs that are contiguous with each other
// ("chunks"), and requires each chunk to be covered exactly by a run of new dims.
std::optional<Shape> compute_view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes) {
  Shape new_strides(new_sizes.size());
  if (old_sizes.empty()) {
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  uint64_t numel = 1;  // unsigned as in Tensor::numel: a 0 with huge neighbours must not overflow
  for (int64_t s : old_sizes) numel *= uint64_t(s);
  if (numel == 0) {
    if (old_sizes == new_sizes) return old_strides;
    return core::contiguous_strides(new_sizes, "view");
  }
  int64_t view_d = int64_t(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_sizes[tensor_d];
    if (tensor_d == 0 ||
        (old_sizes[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor Tensor::view(const Shape& shape) const {
  Shape sizes = core::infer_size(shape, numel(), "view");
  auto strides = compute_view_strides(impl_->sizes, impl_->strides, sizes);
  TB_CHECK(strides.has_value(), "view", "view size ", to_string(sizes), " is not compatible with input tensor's size ",
           to_string(impl_->sizes), " and stride ", to_string(impl_->strides),
           " (at least one dimension spans across two contiguous subspaces); use .reshape(...) instead");
  return make_view(*this, sizes, *strides, impl_->offset,
                   replay_if_overlapping(*this, [sizes](const Tensor& p) { return p.view(sizes); }));
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape sizes = core::infer_size(shape, numel(), "reshape");
  if (auto strides = compute_view_strides(impl_->sizes, impl_->strides, sizes))
    return make_view(*this, sizes, *strides, impl_->offset,
                     replay_if_overlapping(*this, [sizes](const Tensor& p) { return p.view(sizes); }));
  memory::OpScope op("reshape", /*keep_outer=*/true);              // names the copy in OOM reports and snapshots
  profiler::OpScope prof("reshape", {{&this->sizes(), dtype()}});  // and in a profile (one relaxed load when off)
  return contiguous_copy(*this).view(sizes);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return same_view(*this);
  Shape sz = sizes(), st = strides();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [d0, d1](const Tensor& p) { return p.transpose(d0, d1); }));
}

Tensor Tensor::t() const {
  TB_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  TB_CHECK(int64_t(dims.size()) == dim(), "permute", "number of dims don't match: input has ", dim(),
           " dims, permutation ", to_string(dims), " has ", dims.size());
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    TB_CHECK(!seen[d], "permute", "repeated dim ", dims[i], " in permutation ", to_string(dims));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [dims](const Tensor& p) { return p.permute(dims); }));
}

Tensor Tensor::expand(const Shape& shape) const {
  TB_CHECK(int64_t(shape.size()) >= dim(), "expand", "the number of sizes provided (", shape.size(),
           ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  const int64_t lead = int64_t(shape.size()) - dim();
  Shape sz(shape.size()), st(shape.size());
  for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
    const int64_t j = i - lead;
    if (j >= 0) {
      const int64_t cur = sizes()[j];
      int64_t want = shape[i] == -1 ? cur : shape[i];
      TB_CHECK(cur == want || cur == 1, "expand", "the expanded size of the tensor (", want,
               ") must match the existing size (", cur, ") at non-singleton dimension ", i,
               ". Target sizes: ", to_string(shape), ". Tensor sizes: ", to_string(sizes()));
      TB_CHECK(want >= 0, "expand", "invalid size ", want, " in ", to_string(shape));
      sz[i] = want;
      st[i] = cur == want ? strides()[j] : 0;
    } else {
      TB_CHECK(shape[i] >= 0, "expand", "the expanded size ", shape[i],
               " is not allowed in a leading, non-existing dimension; target sizes ", to_string(shape));
      sz[i] = shape[i];
      st[i] = 0;
    }
  }
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [sz](const Tensor& p) { return p.expand(sz); }));
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TB_CHECK(dim() > 0, "narrow", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  if (start < 0) start += n;
  TB_CHECK(start >= 0 && start <= n, "narrow", "start (", start, ") out of range for dimension ", d, " of size ", n);
  TB_CHECK(length >= 0 && start + length <= n, "narrow", "start (", start, ") + length (", length,
           ") exceeds dimension size (", n, ")");
  return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TB_CHECK(dim() > 0, "select", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes()[d];
  TB_CHECK(index >= -n && index < n, "select", "index ", index, " out of range for tensor of size ", to_string(sizes()),
           " at dimension ", d);
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  const int64_t off = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, sz, st, off,
                   replay_if_overlapping(*this, [d, index](const Tensor& p) { return p.select(d, index); }));
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt, int64_t step) const {
  TB_CHECK(dim() > 0, "slice", "cannot be applied to a 0-dim tensor");
  TB_CHECK(step > 0, "slice", "step must be positive, got ", step);
  d = wrap_dim(d, dim(), "slice");
  const int64_t n = sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(n);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes(), st = strides();
  const int64_t off = storage_offset() + start * st[d];
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return make_view(*this, sz, st, off, replay_if_overlapping(*this, [d, start, end, step](const Tensor& p) {
    return p.slice(d, start, end, step);
  }));
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (sizes()[d] != 1) sz.push_back(sizes()[d]), st.push_back(strides()[d]);
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [](const Tensor& p) { return p.squeeze(); }));
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || sizes()[d] != 1) return same_view(*this);
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [d](const Tensor& p) { return p.squeeze(d); }));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  const int64_t s = d >= dim() ? 1 : sz[d] * st[d];
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return make_view(*this, sz, st, storage_offset(),
                   replay_if_overlapping(*this, [d](const Tensor& p) { return p.unsqueeze(d); }));
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  TB_CHECK(start_dim <= end_dim, "flatten", "start_dim (", start_dim, ") cannot come after end_dim (", end_dim, ")");
  if (start_dim == end_dim) return same_view(*this);
  Shape sz(sizes().begin(), sizes().begin() + start_dim);
  uint64_t m = 1;  // unsigned as in Tensor::numel
  for (int64_t d = start_dim; d <= end_dim; ++d) m *= uint64_t(sizes()[d]);
  sz.push_back(int64_t(m));
  sz.insert(sz.end(), sizes().begin() + end_dim + 1, sizes().end());
  return reshape(sz);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes_in) const {
  TB_CHECK(dim() > 0, "unflatten", "cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "unflatten");
  TB_CHECK(!sizes_in.empty(), "unflatten", "sizes must be non-empty");
  Shape inner = core::infer_size(sizes_in, sizes()[d], "unflatten");
  Shape sz(sizes().begin(), sizes().begin() + d);
  sz.insert(sz.end(), inner.begin(), inner.end());
  sz.insert(sz.end(), sizes().begin() + d + 1, sizes().end());
  return view(sz);
}

Tensor Tensor::as_strided(const Shape& sz, const Shape& st, std::optional<int64_t> offset) const {
  Tensor v = make_tensor(storage(), sz, st, offset.value_or(storage_offset()), dtype(), "as_strided");
  v.impl()->version = impl_->version;
  v.impl()->inference = impl_->inference;
  if (autograd_hooks().on_view) autograd_hooks().on_view(*this, v);
  return v;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  memory::OpScope op("contiguous", /*keep_outer=*/true);
  profiler::OpScope prof("contiguous", {{&sizes(), dtype()}});
  return contiguous_copy(*this);
}

namespace {
// PyTorch's memory_format=preserve for clone() and to(): a dense t keeps its strides
// (empty_like_preserve); any other t gets a dense layout in the order of its strides, so a
// sliced, transposed tensor clones transposed, as in PyTorch.
Tensor empty_preserving_order(const Tensor& t, DType dtype) {
  if (t.is_contiguous() || is_non_overlapping_and_dense(t)) return empty_like_preserve(t, dtype);
  return empty_in_stride_order(t.sizes(), dtype, {t});
}
}  // namespace

Tensor empty_in_stride_order(const Shape& shape, DType dtype, std::initializer_list<Tensor> operands) {
  const size_t nd = shape.size();
  auto should_swap = [&](size_t a, size_t b) {  // a currently inner of b
    for (const Tensor& t : operands) {
      if (!t.defined()) continue;
      const int64_t sa = t.strides()[a], sb = t.strides()[b];
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb ? -1 : 1;
      if (shape[a] > shape[b]) return 1;
    }
    return 0;
  };
  std::vector<size_t> perm(nd);  // dims innermost first, starting from row-major
  for (size_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (size_t i = 1; i < nd; ++i) {
    size_t d1 = i;
    for (size_t d0 = i; d0-- > 0;) {
      const int cmp = should_swap(perm[d0], perm[d1]);
      if (cmp > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  bool row_major = true;
  for (size_t i = 0; i < nd; ++i) row_major &= perm[i] == nd - 1 - i;
  if (row_major) return empty(shape, dtype);
  Shape strides(nd);
  int64_t next = 1;
  for (size_t d : perm) {
    strides[d] = next;
    next *= shape[d];
  }
  const Tensor flat = empty({core::checked_numel(shape, "empty_in_stride_order")}, dtype);
  return make_tensor(flat.storage(), shape, strides, 0, dtype, "empty_in_stride_order");
}

Tensor Tensor::clone() const {
  memory::OpScope op("clone", /*keep_outer=*/true);
  profiler::OpScope prof("clone", {{&sizes(), dtype()}});
  Tensor out = empty_preserving_order(*this, dtype());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  memory::OpScope op("to", /*keep_outer=*/true);
  profiler::OpScope prof("to", {{&sizes(), dtype()}});
  Tensor out = empty_preserving_order(*this, t);
  out.copy_(*this);
  return out;
}

}  // namespace tb
