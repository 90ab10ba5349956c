// Indexing kernels: index_select, gather, scatter (assign / add / multiply, tensor or scalar
// source), scatter_add, index_add. Every index tensor is first copied to a contiguous int64
// buffer. Ops that write in place range-check it in full first, so a bad index raises core::Error
// before anything is written; ops that write only their fresh result (gather, out-of-place
// scatter) check each slice's indices as they reach it, skip a bad slice and raise after the walk
// (one read of the index from memory less; the half-written result is never returned).
// gather/scatter walk the index's shape with the indexed dim pulled out of the StridedLoop and run
// serially inside each element: elements of the loop then write disjoint outputs, which keeps the
// parallel walk race-free and duplicates resolved in index order (as on PyTorch's CPU).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "engine/ops/cpu/bf16_convert.h"
#include "engine/ops/index.h"
#include "engine/tensor/iterator.h"

namespace tb::ops {

namespace {

// index as a contiguous int64 tensor (same shape), its values not yet checked.
Tensor int64_index(const Tensor& index, const char* op) {
  TB_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op,
           "Expected dtype int32 or int64 for index, got ", core::name(index.dtype()));
  return index.to(DType::Int64).contiguous();
}

// Raises naming the first index of idx (contiguous int64) outside [0, size).
void check_index_range(const Tensor& idx, int64_t size, const char* op) {
  const int64_t* p = idx.data_ptr<int64_t>();
  const int64_t n = idx.numel();
  // One branch-free pass (it vectorises; a check per element kept it scalar), then the first bad
  // index found again for the message. Unsigned, a negative index is out of bounds too.
  bool bad = false;
#pragma omp parallel for num_threads(num_threads()) schedule(static) reduction(| : bad) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) bad |= uint64_t(p[i]) >= uint64_t(size);
  if (bad)
    for (int64_t i = 0; i < n; ++i)
      TB_CHECK(p[i] >= 0 && p[i] < size, op, "index ", p[i], " is out of bounds for dimension with size ", size);
}

// index as a contiguous int64 tensor (same shape), every value checked to lie in [0, size).
Tensor checked_index(const Tensor& index, int64_t size, const char* op) {
  Tensor idx = int64_index(index, op);
  check_index_range(idx, size, op);
  return idx;
}

// Whether the K indices at ip (stride ds) all lie in [0, size): the check a kernel that writes
// only a fresh result makes per slice, just before using the slice's indices, instead of a pass
// of its own over the whole index (a read of the index from memory less).
// A bad slice sets `seen_bad` (the walk raises after it ends, check_index_range).
// The largest index as unsigned (a negative one is past every size): a max vectorises, where
// GCC kept `bad |= index >= size` scalar, 40% of gather's time over a (4096, 1024) float32 tensor.
inline bool slice_in_range(const int64_t* ip, int64_t K, int64_t ds, int64_t size, std::atomic<bool>& seen_bad) {
  uint64_t top = 0;
  if (ds == 1)
    for (int64_t k = 0; k < K; ++k) top = std::max(top, uint64_t(ip[k]));
  else
    for (int64_t k = 0; k < K; ++k) top = std::max(top, uint64_t(ip[k * ds]));
  const bool bad = K > 0 && top >= uint64_t(size);
  if (bad) seen_bad.store(true, std::memory_order_relaxed);
  return !bad;
}

// In-place writes into a broadcast view (stride 0 over a dim of size > 1) would race and keep
// only one of several results; PyTorch refuses them too.
void check_no_internal_overlap(const Tensor& t, const char* op) {
  if (t.numel() == 0) return;  // an empty tensor has no element to write twice (PyTorch agrees)
  for (int64_t d = 0; d < t.dim(); ++d)
    TB_CHECK(t.stride(d) != 0 || t.size(d) <= 1, op,
             "unsupported operation: more than one element of the written-to "
             "tensor refers to a single memory location. Please clone() the tensor before performing the operation.");
}

Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// Loop view of `t` over the index's shape with the indexed dim collapsed to size 1.
Tensor loop_view(const Tensor& t, const Shape& iter) { return make_view(t, iter, t.strides(), t.storage_offset()); }

// The loop's parallel grain in loop elements, each of which walks K indices: the loop alone
// counts one element per K (gather over the rows of a (4096, 1024) tensor ran on one thread).
int64_t grain_for(int64_t K) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(K, 1)); }

// Same-sized copy of element bytes: lets one loop move any dtype.
template <typename F>
void dispatch_bytes(size_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: f.template operator()<uint8_t>(); break;
    case 2: f.template operator()<uint16_t>(); break;
    case 4: f.template operator()<uint32_t>(); break;
    default: f.template operator()<uint64_t>(); break;
  }
}

// Prefetches the next slice's row of the tensor a kernel reads or writes at random positions
// within a row (gather's source, scatter's destination) while the current slice runs: the
// hardware prefetcher does not follow a random order. Rows up to 16 KiB only. Gather over the
// rows of a (4096, 1024) float32 tensor: 0.78x -> 0.84-0.91x LibTorch at two threads.
template <bool kWrite>
inline void prefetch_row(const char* row, int64_t bytes) {
  if (bytes > 16384) return;
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, kWrite ? 1 : 0);
}

// One slice of gather along a contiguous dim: o[k] = sp[ip[k]] for K indices. `stream`: the result
// is too big to stay in cache for its reader (Note [Streaming bf16 stores]), so 4-byte elements go
// out with non-temporal stores (movnti; the write-combining buffers fill whole lines), which skip
// the read of each output line before it is overwritten; the caller fences. Gather over the rows
// of a (4096, 1024) float32 tensor at two threads (80 MB of traffic, 16 of them that read): 2.8 ->
// 2.25 ms. (vpgatherqd with 32-byte streams was slower than these scalar loads: 3.9 ms.) Unlike
// the elementwise ops' float32 results (Note [Streaming float stores]) a gather's streams even
// where the result would fit in the last-level cache: its index, twice the result's bytes, passes
// through that cache in the same walk.
template <typename E>
inline void gather_slice(E* __restrict__ o, const int64_t* ip, const E* sp, int64_t K, bool stream) {
#if defined(__SSE2__)
  if constexpr (sizeof(E) == 4) {
    if (stream) {
      for (int64_t k = 0; k < K; ++k) _mm_stream_si32(reinterpret_cast<int*>(o + k), int(sp[ip[k]]));
      return;
    }
  }
#endif
  for (int64_t k = 0; k < K; ++k) o[k] = sp[ip[k]];
}

enum class Reduce { None, Add, Multiply };

Reduce parse_reduce(const std::string& r) {
  if (r.empty()) return Reduce::None;
  if (r == "add") return Reduce::Add;
  if (r == "multiply") return Reduce::Multiply;
  throw Error("scatter", "reduce argument must be either add or multiply, got '" + r + "'");
}

template <typename T>
inline T combine(T a, T b, Reduce r) {
  if (r == Reduce::None) return b;
  if constexpr (std::is_same_v<T, bool>) {
    return r == Reduce::Add ? (a || b) : (a && b);
  } else {
    using M = core::opmath_t<T>;
    return r == Reduce::Add ? T(M(a) + M(b)) : T(M(a) * M(b));
  }
}

// Shape checks shared by scatter and scatter_add (PyTorch's scatter_shape_check).
void check_scatter_shapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  const auto nonempty = [](const Tensor& t) { return std::max<int64_t>(t.dim(), 1); };
  TB_CHECK(nonempty(index) == nonempty(self), op,
           "Index tensor must have the same number of dimensions as self tensor");
  if (src) {
    TB_CHECK(src->dtype() == self.dtype(), op, "Expected self.dtype to be equal to src.dtype");
    TB_CHECK(nonempty(index) == nonempty(*src), op,
             "Index tensor must have the same number of dimensions as src tensor");
  }
  if (index.numel() == 0) return;
  const auto sz = [](const Tensor& t, int64_t d) { return t.dim() == 0 ? int64_t(1) : t.size(d); };
  for (int64_t d = 0; d < nonempty(self); ++d) {
    TB_CHECK(d == dim || sz(index, d) <= sz(self, d), op, "Expected index ", core::to_string(index.sizes()),
             " to be no larger than self ", core::to_string(self.sizes()), " apart from dimension ", dim);
    TB_CHECK(!src || sz(index, d) <= sz(*src, d), op, "Expected index ", core::to_string(index.sizes()),
             " to be no larger than src ", core::to_string(src->sizes()));
  }
}

// self: any strides, written in place; index: int64, ndim(self); src: index-sized or larger.
// fresh: self is the op's own new result (out-of-place scatter), so a bad index may raise after
// some slices are written, and each slice's indices are checked as it is reached; else (in place)
// every index is checked before anything is written.
void scatter_kernel(Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, double value, Reduce r,
                    const char* op, bool fresh) {
  Tensor s1 = at_least_1d(self);
  const int64_t d = core::wrap_dim(dim, s1.dim(), op);
  check_scatter_shapes(self, d, index, src, op);
  check_no_internal_overlap(self, op);
  if (r != Reduce::None && core::is_reduced_float(self.dtype())) {
    // Like PyTorch, accumulate bf16/f16 in float and round once at the end.
    Tensor acc = self.to(DType::Float32);
    const Tensor src32 = src ? src->to(DType::Float32) : Tensor();
    scatter_kernel(acc, dim, index, src ? &src32 : nullptr, value, r, op, /*fresh=*/true);  // self written after
    self.copy_(acc);
    return;
  }
  self.bump_version();
  if (index.numel() == 0) return;
  const int64_t size_d = s1.size(d);
  const Tensor idx = at_least_1d(fresh ? int64_index(index, op) : checked_index(index, size_d, op));
  const Tensor src1 = src ? at_least_1d(*src) : Tensor();
  std::atomic<bool> bad{false};
  Shape iter = idx.sizes();
  const int64_t K = iter[size_t(d)];
  iter[size_t(d)] = 1;
  const int64_t self_ds = s1.stride(d), idx_ds = idx.stride(d), src_ds = src ? src1.stride(d) : 0;
  core::dispatch(self.dtype(), [&]<typename T>() {
    if (src) {
      StridedLoop loop({loop_view(s1, iter), loop_view(idx, iter), loop_view(src1, iter)});
      loop.for_each(
          [&](char** p, const int64_t* st, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              T* out = reinterpret_cast<T*>(p[0] + i * st[0]);
              const int64_t* ip = reinterpret_cast<const int64_t*>(p[1] + i * st[1]);
              const T* sp = reinterpret_cast<const T*>(p[2] + i * st[2]);
              if (fresh && !slice_in_range(ip, K, idx_ds, size_d, bad)) continue;
              if (self_ds == 1 && idx_ds == 1 && src_ds == 1 && r != Reduce::Multiply) {
                // Along a contiguous last dim, the reduction chosen once per run, not per element
                // (scatter_add of (4096, 1024) float32 along dim 1 was 2.6x slower than LibTorch).
                if (i + 1 < n) prefetch_row<true>(p[0] + (i + 1) * st[0], size_d * int64_t(sizeof(T)));
                if (r == Reduce::Add)
                  for (int64_t k = 0; k < K; ++k) out[ip[k]] = combine(out[ip[k]], sp[k], Reduce::Add);
                else
                  for (int64_t k = 0; k < K; ++k) out[ip[k]] = sp[k];
                continue;
              }
              for (int64_t k = 0; k < K; ++k) {
                T& o = out[ip[k * idx_ds] * self_ds];
                o = combine(o, sp[k * src_ds], r);
              }
            }
          },
          grain_for(K));
    } else {
      const T v = std::is_same_v<T, bool> ? T(value != 0) : T(static_cast<core::opmath_t<T>>(value));
      StridedLoop loop({loop_view(s1, iter), loop_view(idx, iter)});
      loop.for_each(
          [&](char** p, const int64_t* st, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              T* out = reinterpret_cast<T*>(p[0] + i * st[0]);
              const int64_t* ip = reinterpret_cast<const int64_t*>(p[1] + i * st[1]);
              if (fresh && !slice_in_range(ip, K, idx_ds, size_d, bad)) continue;
              for (int64_t k = 0; k < K; ++k) {
                T& o = out[ip[k * idx_ds] * self_ds];
                o = combine(o, v, r);
              }
            }
          },
          grain_for(K));
    }
  });
  if (bad.load()) check_index_range(idx, size_d, op);  // raises
}

}  // namespace

// ---- index_select ----

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  const BareKernel bare("index_select", {&self});
  const char* op = "index_select";
  TB_CHECK(index.dim() <= 1, op, "Index is supposed to be a vector");
  const int64_t d = core::wrap_dim(dim, std::max<int64_t>(self.dim(), 1), op);
  if (self.dim() == 0)
    TB_CHECK(index.numel() == 1, op, "Index to scalar can have only 1 value, got ", index.numel(), " value(s)");
  const Tensor s = at_least_1d(self).contiguous();
  const Tensor idx = checked_index(index, s.size(d), op);
  const int64_t n = idx.numel();
  Shape out_shape = self.sizes();
  if (self.dim() > 0) out_shape[size_t(d)] = n;
  Tensor out = empty(out_shape, self.dtype());
  if (out.numel() == 0) return out;
  // s: (outer, S, inner) contiguous -> out: (outer, n, inner)
  const int64_t S = s.size(d);
  int64_t in_sz = 1;
  for (int64_t k = d + 1; k < s.dim(); ++k) in_sz *= s.size(k);
  const int64_t outer = s.numel() / std::max<int64_t>(S * in_sz, 1);
  const int64_t* ip = idx.data_ptr<int64_t>();
  dispatch_bytes(s.itemsize(), [&]<typename E>() {
    const E* sp = static_cast<const E*>(s.data());
    E* op_ = static_cast<E*>(out.data());
    const int64_t rows = outer * n;
#pragma omp parallel for schedule(static) if (rows * in_sz > kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t o = row / n, i = row % n;
      const E* src = sp + (o * S + ip[i]) * in_sz;
      E* dst = op_ + row * in_sz;
      for (int64_t j = 0; j < in_sz; ++j) dst[j] = src[j];
    }
  });
  return out;
}

Tensor& index_select_out(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  const BareKernel bare("index_select_out", {&out, &self});
  TB_CHECK(!out.defined() || out.dtype() == self.dtype(), "index_select",
           "self and result must have the same scalar type");
  Tensor r = index_select(self, dim, index);
  out = prepare_out(&out, r.sizes(), r.dtype(), "index_select");
  out.copy_(r);
  return out;
}

// ---- gather ----

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool /*sparse_grad*/) {
  const BareKernel bare("gather", {&self});
  const char* op = "gather";
  const Tensor s1 = at_least_1d(self);
  const int64_t d = core::wrap_dim(dim, s1.dim(), op);
  TB_CHECK(std::max<int64_t>(index.dim(), 1) == s1.dim(), op,
           "Index tensor must have the same number of dimensions as input tensor");
  Tensor out = empty(index.sizes(), self.dtype());
  if (index.numel() == 0) return out;
  // The output is fresh: each slice's indices are checked as it is reached (slice_in_range).
  const Tensor idx = at_least_1d(int64_index(index, op));
  for (int64_t k = 0; k < s1.dim(); ++k)
    TB_CHECK(k == d || idx.size(k) <= s1.size(k), op, "Size does not match at dimension ", k, " expected index ",
             core::to_string(index.sizes()), " to be no larger than self ", core::to_string(self.sizes()),
             " apart from dimension ", d);
  Tensor o1 = at_least_1d(out);
  Shape iter = idx.sizes();
  const int64_t K = iter[size_t(d)];
  iter[size_t(d)] = 1;
  const int64_t out_ds = o1.stride(d), idx_ds = idx.stride(d), self_ds = s1.stride(d), size_d = s1.size(d);
  std::atomic<bool> bad{false};
  const bool stream = cpu::kHaveStreamingStore &&
                      out.numel() * int64_t(out.itemsize()) / num_threads() >= cpu::kStreamBytes;
  dispatch_bytes(self.itemsize(), [&]<typename E>() {
    StridedLoop loop({loop_view(o1, iter), loop_view(idx, iter), loop_view(s1, iter)});
    loop.for_each(
        [&](char** p, const int64_t* st, int64_t n) {
          for (int64_t i = 0; i < n; ++i) {
            E* o = reinterpret_cast<E*>(p[0] + i * st[0]);
            const int64_t* ip = reinterpret_cast<const int64_t*>(p[1] + i * st[1]);
            const E* sp = reinterpret_cast<const E*>(p[2] + i * st[2]);
            if (!slice_in_range(ip, K, idx_ds, size_d, bad)) continue;
            if (out_ds == 1 && idx_ds == 1 && self_ds == 1) {  // along a contiguous last dim
              if (i + 1 < n) prefetch_row<false>(p[2] + (i + 1) * st[2], size_d * int64_t(sizeof(E)));
              gather_slice(o, ip, sp, K, stream);
            } else {
              for (int64_t k = 0; k < K; ++k) o[k * out_ds] = sp[ip[k * idx_ds] * self_ds];
            }
          }
          if (stream) cpu::stream_fence();
        },
        grain_for(K));
  });
  if (bad.load()) check_index_range(idx, size_d, op);  // raises
  return out;
}

// ---- scatter, scatter_add ----

Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const BareKernel bare("scatter_", {&self, &src});
  scatter_kernel(self, dim, index, &src, 0, Reduce::None, "scatter", false);
  return self;
}
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value) {
  const BareKernel bare("scatter_", {&self});
  scatter_kernel(self, dim, index, nullptr, value, Reduce::None, "scatter", false);
  return self;
}
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  const BareKernel bare("scatter_", {&self, &src});
  scatter_kernel(self, dim, index, &src, 0, parse_reduce(reduce), "scatter", false);
  return self;
}
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce) {
  const BareKernel bare("scatter_", {&self});
  scatter_kernel(self, dim, index, nullptr, value, parse_reduce(reduce), "scatter", false);
  return self;
}
// The out-of-place scatter and index_add write into a fresh row-major copy, as PyTorch's structured
// kernels allocate their output (clone() would keep a permuted layout).
static Tensor contiguous_clone(const Tensor& self) {
  Tensor r = empty(self.sizes(), self.dtype());
  r.copy_(self);
  return r;
}

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const BareKernel bare("scatter", {&self, &src});
  Tensor r = contiguous_clone(self);
  scatter_kernel(r, dim, index, &src, 0, Reduce::None, "scatter", true);
  return r;
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value) {
  const BareKernel bare("scatter", {&self});
  Tensor r = contiguous_clone(self);
  scatter_kernel(r, dim, index, nullptr, value, Reduce::None, "scatter", true);
  return r;
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  const BareKernel bare("scatter", {&self, &src});
  Tensor r = contiguous_clone(self);
  scatter_kernel(r, dim, index, &src, 0, parse_reduce(reduce), "scatter", true);
  return r;
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, double value, const std::string& reduce) {
  const BareKernel bare("scatter", {&self});
  Tensor r = contiguous_clone(self);
  scatter_kernel(r, dim, index, nullptr, value, parse_reduce(reduce), "scatter", true);
  return r;
}
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const BareKernel bare("scatter_add_", {&self, &src});
  scatter_kernel(self, dim, index, &src, 0, Reduce::Add, "scatter_add", false);
  return self;
}
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const BareKernel bare("scatter_add", {&self, &src});
  Tensor r = contiguous_clone(self);
  scatter_kernel(r, dim, index, &src, 0, Reduce::Add, "scatter_add", true);
  return r;
}

// ---- index_add ----

namespace {

// index_add's checks (PyTorch's messages), for both forms. Returns false where PyTorch's CPU kernel
// returns before reading the index: self of 2+ dims and an empty self or index.
bool check_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const char* op) {
  TB_CHECK(index.dim() <= 1, op, "Index is supposed to be a vector");
  TB_CHECK(source.dtype() == self.dtype(), op, "self (", core::name(self.dtype()), ") and source (",
           core::name(source.dtype()), ") must have the same scalar type");
  TB_CHECK(source.dim() == self.dim(), op,
           "source tensor shape must match self tensor shape, excluding the specified "
           "dimension. Got self.shape = ",
           core::to_string(self.sizes()), " source.shape = ", core::to_string(source.sizes()));
  const Tensor s1 = at_least_1d(self), src = at_least_1d(source);
  const int64_t d = core::wrap_dim(dim, s1.dim(), op);
  TB_CHECK(index.numel() == src.size(d), op, "Number of indices (", index.numel(),
           ") should be equal to source.size(dim): (", src.size(d), "), for dim: ", d);
  for (int64_t k = 0; k < s1.dim(); ++k)
    TB_CHECK(k == d || src.size(k) == s1.size(k), op,
             "source tensor shape must match self tensor shape, excluding the "
             "specified dimension. Got self.shape = ",
             core::to_string(self.sizes()), " source.shape = ", core::to_string(source.sizes()));
  return !(self.dim() > 1 && (index.numel() == 0 || self.numel() == 0));
}

// a, the scaling of each source element, in T's compute type (bool: alpha != 0).
template <typename T>
core::opmath_t<T> index_add_alpha(DType dt, double alpha) {
  using M = core::opmath_t<T>;
  if constexpr (std::is_same_v<T, bool>) return M(alpha != 0);
  else return core::is_integral(dt) ? M(int64_t(alpha)) : M(alpha);
}

// dst[j] += a src[j] over [j0, j1), rounded to T after each addition (PyTorch's serial order).
template <typename T>
inline void index_add_row(T* dst, const T* src, core::opmath_t<T> a, int64_t j0, int64_t j1) {
  using M = core::opmath_t<T>;
  for (int64_t j = j0; j < j1; ++j) {
    if constexpr (std::is_same_v<T, bool>) dst[j] = dst[j] || (a && src[j]);
    else dst[j] = T(M(dst[j]) + a * M(src[j]));
  }
}

// Note [Out-of-place index_add in one pass]
// index_add(self, ...) was a copy of self followed by index_add_ on the copy: the add pass reads
// and writes rows of the copy in index order, at random, 3 passes over the result in all. Here the
// positions are counting-sorted by index (stable: each row's sources in increasing position, the
// order index_add_ adds them in, so every sum rounds the same), and each result row is written
// once, in order: self's row plus its sources, or self's row alone. r and self are contiguous.
template <typename T>
void index_add_fused(Tensor& r, const Tensor& self, int64_t d, const Tensor& idx, const Tensor& src, double alpha) {
  const int64_t S = r.size(d), n = idx.numel();
  int64_t inner = 1;
  for (int64_t k = d + 1; k < r.dim(); ++k) inner *= r.size(k);
  const int64_t outer = r.numel() / std::max<int64_t>(S * inner, 1);
  const int64_t* ip = idx.data_ptr<int64_t>();
  std::vector<int64_t> start(size_t(S) + 1, 0);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[size_t(ip[i]) + 1];
  for (int64_t v = 0; v < S; ++v) start[size_t(v) + 1] += start[size_t(v)];
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(ip[i])]++)] = i;
  }
  T* rp = r.data_ptr<T>();
  const T* xp = self.data_ptr<T>();
  const T* sp = src.data_ptr<T>();
  const auto a = index_add_alpha<T>(r.dtype(), alpha);
  const int64_t rows = outer * S;
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (r.numel() + src.numel() > kParallelGrain)
  for (int64_t t = 0; t < rows; ++t) {
    const int64_t o = t / S, v = t % S;
    T* dst = rp + t * inner;
    std::memcpy(dst, xp + t * inner, size_t(inner) * sizeof(T));
    for (int64_t k = start[size_t(v)]; k < start[size_t(v) + 1]; ++k)
      index_add_row<T>(dst, sp + (o * n + order[size_t(k)]) * inner, a, 0, inner);
  }
}

}  // namespace

Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  const BareKernel bare("index_add_", {&self, &source});
  const char* op = "index_add_";
  if (!check_index_add(self, dim, index, source, op)) {
    self.bump_version();
    return self;
  }
  const Tensor s1 = at_least_1d(self), src = at_least_1d(source).contiguous();
  const int64_t d = core::wrap_dim(dim, s1.dim(), op);
  const Tensor idx = checked_index(index, s1.size(d), op);
  check_no_internal_overlap(self, op);
  if (core::is_reduced_float(self.dtype()) && alpha == 1 && self.dim() > 1) {
    // PyTorch's CPU index_add takes a scatter_add path here that accumulates bf16/f16 in float
    // and rounds once; otherwise (alpha != 1, or 1-D) it rounds after every addition, as below.
    Tensor acc = self.to(DType::Float32);
    index_add_(acc, dim, index, source.to(DType::Float32), alpha);
    self.copy_(acc);
    return self;
  }
  self.bump_version();
  if (src.numel() == 0) return self;
  Tensor r = s1.is_contiguous() ? s1 : s1.contiguous();
  // r: (outer, S, inner), src: (outer, n, inner); tasks are (outer, block of inner) pairs so that
  // each writes its own part of r, whichever dim is large.
  const int64_t S = r.size(d), n = idx.numel();
  int64_t inner = 1;
  for (int64_t k = d + 1; k < r.dim(); ++k) inner *= r.size(k);
  const int64_t outer = r.numel() / std::max<int64_t>(S * inner, 1);
  // Blocks of up to 4096 elements; narrower (in whole cache lines) when outer alone leaves a
  // thread idle: index_add along dim 0 of a (4096, 1024) tensor was one task, serial.
  const int64_t threads = num_threads();
  int64_t block = std::min<int64_t>(inner, 4096);
  if (outer < threads && inner > 64) {
    const int64_t per_outer = (threads + outer - 1) / outer;
    block = std::min(block, std::max<int64_t>(64, ((inner + per_outer - 1) / per_outer + 15) / 16 * 16));
  }
  const int64_t nb = (inner + block - 1) / block, tasks = outer * nb;
  const int64_t* ip = idx.data_ptr<int64_t>();
  core::dispatch(self.dtype(), [&]<typename T>() {
    T* rp = r.data_ptr<T>();
    const T* sp = src.data_ptr<T>();
    const auto a = index_add_alpha<T>(self.dtype(), alpha);
#pragma omp parallel for num_threads(threads) schedule(static) if (src.numel() > kParallelGrain && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / nb, j0 = (t % nb) * block, j1 = std::min(inner, j0 + block);
      for (int64_t i = 0; i < n; ++i)
        index_add_row<T>(rp + (o * S + ip[i]) * inner, sp + (o * n + i) * inner, a, j0, j1);
    }
  });
  if (!r.is_same(s1)) {  // self was not contiguous: the sums were made in a copy
    Tensor s1v = s1;
    s1v.copy_(r);
  }
  return self;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  const BareKernel bare("index_add", {&self, &source});
  const char* op = "index_add";
  // One pass (Note [Out-of-place index_add in one pass]) where its result rounds as index_add_'s
  // (not bf16/f16 with alpha 1, which index_add_ sums in float) and rows are a cache line or more:
  // its sort keeps 8 bytes per row, twice a 1-D float32 result.
  if (check_index_add(self, dim, index, source, op) && self.numel() > 0 && source.numel() > 0 &&
      !(core::is_reduced_float(self.dtype()) && alpha == 1 && self.dim() > 1)) {
    const Tensor s1 = at_least_1d(self).contiguous();
    const int64_t d = core::wrap_dim(dim, s1.dim(), op);
    int64_t row_bytes = int64_t(s1.itemsize());
    for (int64_t k = d + 1; k < s1.dim(); ++k) row_bytes *= s1.size(k);
    if (row_bytes >= 64) {
      const Tensor src = at_least_1d(source).contiguous(), idx = checked_index(index, s1.size(d), op);
      Tensor r = empty(self.sizes(), self.dtype());
      Tensor r1 = at_least_1d(r);
      core::dispatch(self.dtype(), [&]<typename T>() { index_add_fused<T>(r1, s1, d, idx, src, alpha); });
      return r;
    }
  }
  Tensor r = contiguous_clone(self);
  return index_add_(r, dim, index, source, alpha);
}

}  // namespace tb::ops
