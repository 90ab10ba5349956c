// Shape and mask ops of the index family: cat, stack, split, chunk, repeat, tril/triu,
// masked_fill, masked_select, nonzero. Most are views or copy_ calls (copy_ is the engine's one
// parallel, casting strided copy); the mask ops have small kernels of their own here.
// Indexing kernels live in cpu/index_gather.cpp, sorting in cpu/sort.cpp.
#include "engine/ops/index.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/tensor/iterator.h"

namespace tb::ops {

namespace {

// 1-D tensors of size 0 are skipped by cat, whatever the other inputs' shapes (legacy rule).
bool cat_skipped(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

struct CatPlan {
  Shape shape;
  DType dtype;
  int64_t dim;
};

CatPlan plan_cat(const std::vector<Tensor>& tensors, int64_t dim, const char* op) {
  TB_CHECK(!tensors.empty(), op, "expected a non-empty list of Tensors");
  DType dt = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    TB_CHECK(tensors[i].defined(), op, "undefined tensor at position ", i);
    TB_CHECK(tensors[i].dim() > 0, op, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    dt = core::promote_types(dt, tensors[i].dtype());
  }
  const Tensor* ref = &tensors[0];
  for (const Tensor& t : tensors)
    if (!cat_skipped(t)) {
      ref = &t;
      break;
    }
  const int64_t d = core::wrap_dim(dim, ref->dim(), op);
  Shape shape = ref->sizes();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (cat_skipped(t)) continue;
    TB_CHECK(t.dim() == ref->dim(), op, "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
             t.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      TB_CHECK(k == d || t.size(k) == shape[k], op, "Sizes of tensors must match except in dimension ", d,
               ". Expected size ", shape[k], " but got size ", t.size(k), " for tensor number ", i, " in the list.");
    total += t.size(d);
  }
  if (!cat_skipped(*ref)) shape[d] = total;
  return {shape, dt, d};
}

void cat_into(Tensor& out, const std::vector<Tensor>& tensors, int64_t d) {
  int64_t off = 0;
  for (const Tensor& t : tensors) {
    if (cat_skipped(t)) continue;
    Tensor dst = out.narrow(d, off, t.size(d));
    dst.copy_(t);
    off += t.size(d);
  }
  out.bump_version();
}

template <typename T>
T cast_value(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return static_cast<T>(static_cast<core::opmath_t<T>>(v));
}

// o = m ? v : x over a contiguous run, the mask read as bytes (a bool is 0 or 1). Written in the
// lambda with restrict locals and a `const bool*` mask, GCC 12 left a branch per element: 21 ms
// for (4096, 1024) float32 under a random mask (Note [where on contiguous runs],
// cpu/elementwise_compare.cpp).
template <typename T>
[[gnu::noinline]] void masked_fill_run(T* o, const T* x, const uint8_t* m, T v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? v : x[i];
}

// self: any strides; mask: bool, already expanded to self's shape.
void masked_fill_kernel(Tensor& self, const Tensor& mask, double value) {
  StridedLoop loop({self, mask});
  core::dispatch(self.dtype(), [&]<typename T>() {
    const T v = cast_value<T>(value);
    loop.for_each([v](char** p, const int64_t* st, int64_t n) {
      if (st[0] == int64_t(sizeof(T)) && st[1] == 1) {  // self = m ? v : self, without a branch
        masked_fill_run(reinterpret_cast<T*>(p[0]), reinterpret_cast<const T*>(p[0]),
                        reinterpret_cast<const uint8_t*>(p[1]), v, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        if (*reinterpret_cast<const bool*>(p[1] + i * st[1])) *reinterpret_cast<T*>(p[0] + i * st[0]) = v;
    });
  });
}

double value_of(const Tensor& value, const char* op) {
  TB_CHECK(value.defined() && value.dim() == 0, op, "only supports a 0-dimensional value tensor, but got tensor with ",
           value.defined() ? value.dim() : 0, " dimension(s).");
  return value.item_double();
}

// self: (..., R, C) contiguous; zeroes what tril (lower) or triu keeps out.
void zero_triangle(Tensor& r, int64_t k, bool lower) {
  if (r.numel() == 0) return;  // before dividing by C, which may then be 0
  const int64_t R = r.size(-2), C = r.size(-1);
  const int64_t rows = r.numel() / C;
  core::dispatch(r.dtype(), [&]<typename T>() {
    T* p = r.data_ptr<T>();
#pragma omp parallel for schedule(static) if (r.numel() > kParallelGrain)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row % R;
      T* q = p + row * C;
      if (lower) {
        const int64_t from = std::clamp<int64_t>(i + k + 1, 0, C);
        std::fill(q + from, q + C, T{});
      } else {
        const int64_t to = std::clamp<int64_t>(i + k, 0, C);
        std::fill(q, q + to, T{});
      }
    }
  });
}

Tensor triangle(const Tensor& self, int64_t k, bool lower, Tensor* out) {
  const char* op = lower ? "tril" : "triu";
  TB_CHECK(self.dim() >= 2, op, "input tensor must have at least 2 dimensions");
  Tensor r = empty(self.sizes(), self.dtype());  // contiguous, whatever self's layout (clone keeps it)
  if (self.is_contiguous() && r.numel() > 0) {
    // One pass: each row's kept part copied and the rest zeroed (copy_ then zero_triangle wrote
    // the zeroed part twice: tril of (4096, 1024) float32 at 2 threads was 1.9x LibTorch's time).
    const int64_t R = r.size(-2), C = r.size(-1), rows = r.numel() / C;
    core::dispatch(r.dtype(), [&]<typename T>() {
      const T* src = self.data_ptr<T>();
      T* dst = r.data_ptr<T>();
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (r.numel() > kParallelGrain)
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t i = row % R;
        const T* s = src + row * C;
        T* d = dst + row * C;
        if (lower) {
          const int64_t from = std::clamp<int64_t>(i + k + 1, 0, C);
          std::copy(s, s + from, d);
          std::fill(d + from, d + C, T{});
        } else {
          const int64_t to = std::clamp<int64_t>(i + k, 0, C);
          std::fill(d, d + to, T{});
          std::copy(s + to, s + C, d + to);
        }
      }
    });
  } else {
    r.copy_(self);
    zero_triangle(r, k, lower);
  }
  if (out) {
    Tensor o = prepare_out(out, self.sizes(), self.dtype(), op);
    o.copy_(r);
    return o;
  }
  return r;
}

}  // namespace

namespace {
// The inputs and out= of cat_out / stack_out, for their guard (Note [Bare kernels]).
std::vector<Tensor> with_out(std::vector<Tensor> tensors, const Tensor& out) {
  tensors.push_back(out);
  return tensors;
}
}  // namespace

// Note [cat's result layout]
// LibTorch allocates cat's result in the inputs' common suggested memory format: channels-last
// (-3d) when every input that takes part (skipped 1-D empty ones aside) suggests it, else
// contiguous. So a channels-last feature map concatenated along its channels stays channels-last
// (a later .view sees it). Its stack below the inputs' last dim is that cat with the dim split
// into (inputs, size): stack(ts, d) = cat(ts, d).view(...), which keeps the layout as well; at the
// last dim it is the cat of the unsqueezed inputs.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  const BareKernel bare("cat", tensors);
  CatPlan p = plan_cat(tensors, dim, "cat");
  bool channels_last = false;
  for (const Tensor& t : tensors) {
    if (cat_skipped(t)) continue;
    channels_last = suggests_channels_last(t);
    if (!channels_last) break;
  }
  Tensor out = channels_last ? empty_channels_last(p.shape, p.dtype) : empty(p.shape, p.dtype);
  cat_into(out, tensors, p.dim);
  return out;
}

Tensor& cat_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  const BareKernel bare("cat_out", with_out(tensors, out));
  CatPlan p = plan_cat(tensors, dim, "cat");
  for (const Tensor& t : tensors)
    TB_CHECK(t.numel() == 0 || out.numel() == 0 || !t.shares_storage(out), "cat",
             "the input tensors cannot refer to any of the output memory locations");
  out = prepare_out(&out, p.shape, p.dtype, "cat");
  cat_into(out, tensors, p.dim);
  return out;
}

namespace {
std::vector<Tensor> stack_inputs(const std::vector<Tensor>& tensors, int64_t& dim) {
  TB_CHECK(!tensors.empty(), "stack", "stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i)
    TB_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack", "stack expects each tensor to be equal size, but got ",
             core::to_string(tensors[0].sizes()), " at entry 0 and ", core::to_string(tensors[i].sizes()), " at entry ",
             i);
  dim = core::wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  u.reserve(tensors.size());
  for (const Tensor& t : tensors) u.push_back(t.unsqueeze(dim));
  return u;
}
}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  const BareKernel bare("stack", tensors);
  auto u = stack_inputs(tensors, dim);
  if (dim == tensors[0].dim()) return cat(u, dim);
  // Note [cat's result layout]: the cat along dim, its dim split (a fresh tensor, not a view).
  const Tensor c = cat(tensors, dim);
  Shape sizes = tensors[0].sizes();
  sizes.insert(sizes.begin() + dim, int64_t(tensors.size()));
  const std::optional<Shape> strides = compute_view_strides(c.sizes(), c.strides(), sizes);
  TB_CHECK(strides.has_value(), "stack", "internal: splitting dim ", dim, " of the cat failed");
  return make_tensor(c.storage(), sizes, *strides, c.storage_offset(), c.dtype(), "stack");
}

Tensor& stack_out(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  const BareKernel bare("stack_out", with_out(tensors, out));
  auto u = stack_inputs(tensors, dim);
  return cat_out(out, u, dim);
}

std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  TB_CHECK(self.dim() != 0, "split", "split expects at least a 1-dimensional tensor");
  TB_CHECK(split_size >= 0, "split", "split expects split_size be non-negative, but got split_size=", split_size);
  const int64_t d = core::wrap_dim(dim, self.dim(), "split");
  const int64_t n = self.size(d);
  TB_CHECK(split_size != 0 || n == 0, "split",
           "split_size can only be 0 if dimension size is 0, but got dimension size of ", n);
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(size_t(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    out.push_back(self.narrow(d, start, std::min(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& self, const std::vector<int64_t>& sizes, int64_t dim) {
  TB_CHECK(self.dim() != 0, "split_with_sizes", "split expects at least a 1-dimensional tensor");
  const int64_t d = core::wrap_dim(dim, self.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TB_CHECK(s >= 0, "split_with_sizes",
             "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
             core::to_string(sizes));
    total += s;
  }
  TB_CHECK(total == self.size(d), "split_with_sizes", "split_with_sizes expects split_sizes to sum exactly to ",
           self.size(d), " (input tensor's size at dimension ", d, "), but got split_sizes=", core::to_string(sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(self.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& self, const std::vector<int64_t>& split_sizes, int64_t dim) {
  return split_with_sizes(self, split_sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  TB_CHECK(self.dim() > 0, "chunk", "chunk expects at least a 1-dimensional tensor");
  TB_CHECK(chunks > 0, "chunk", "chunk expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t d = core::wrap_dim(dim, self.dim(), "chunk");
  const int64_t n = self.size(d);
  const int64_t split_size = (n + chunks - 1) / chunks;
  // A size-0 dim still gives `chunks` (empty) pieces, as PyTorch's split_with_sizes path does.
  if (split_size == 0 && n == 0) return split_with_sizes(self, std::vector<int64_t>(size_t(chunks), 0), d);
  return split(self, split_size, d);
}

Tensor repeat(const Tensor& self, const Shape& repeats) {
  const BareKernel bare("repeat", {&self});
  TB_CHECK(int64_t(repeats.size()) >= self.dim(), "repeat",
           "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  const size_t nd = repeats.size();
  const size_t lead = nd - size_t(self.dim());
  Shape src_sizes(nd, 1), out_sizes(nd);
  for (size_t i = lead; i < nd; ++i) src_sizes[i] = self.size(int64_t(i - lead));
  for (size_t i = 0; i < nd; ++i) {
    TB_CHECK(repeats[i] >= 0, "repeat", "Trying to create tensor with negative dimension ", repeats[i], ": ",
             core::to_string(repeats));
    out_sizes[i] = src_sizes[i] * repeats[i];
  }
  Tensor out = empty(out_sizes, self.dtype());
  if (out.numel() == 0) return out;
  // View the output as (r0, s0, r1, s1, ...) and copy the source broadcast over every r_i.
  Shape big_sizes, big_strides, src_big_sizes;
  const Shape& os = out.strides();
  for (size_t i = 0; i < nd; ++i) {
    big_sizes.push_back(repeats[i]);
    big_sizes.push_back(src_sizes[i]);
    big_strides.push_back(src_sizes[i] * os[i]);
    big_strides.push_back(os[i]);
    src_big_sizes.push_back(1);
    src_big_sizes.push_back(src_sizes[i]);
  }
  Tensor dst = make_view(out, big_sizes, big_strides, 0);
  dst.copy_(self.reshape(src_big_sizes).expand(big_sizes));
  return out;
}

Tensor tril(const Tensor& self, int64_t diagonal) {
  const BareKernel bare("tril", {&self});
  return triangle(self, diagonal, true, nullptr);
}
Tensor triu(const Tensor& self, int64_t diagonal) {
  const BareKernel bare("triu", {&self});
  return triangle(self, diagonal, false, nullptr);
}
Tensor& tril_out(Tensor& out, const Tensor& self, int64_t diagonal) {
  const BareKernel bare("tril_out", {&out, &self});
  out = triangle(self, diagonal, true, &out);
  return out;
}
Tensor& triu_out(Tensor& out, const Tensor& self, int64_t diagonal) {
  const BareKernel bare("triu_out", {&out, &self});
  out = triangle(self, diagonal, false, &out);
  return out;
}
Tensor& tril_(Tensor& self, int64_t diagonal) {
  const BareKernel bare("tril_", {&self});
  self.copy_(triangle(self, diagonal, true, nullptr));
  return self;
}
Tensor& triu_(Tensor& self, int64_t diagonal) {
  const BareKernel bare("triu_", {&self});
  self.copy_(triangle(self, diagonal, false, nullptr));
  return self;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value) {
  const BareKernel bare("masked_fill_", {&self});
  TB_CHECK(mask.dtype() == DType::Bool, "masked_fill_",
           "masked_fill_ only supports boolean masks, but got mask with dtype ", core::name(mask.dtype()));
  const Shape b = core::broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill_");
  TB_CHECK(b == self.sizes(), "masked_fill_", "output with shape ", core::to_string(self.sizes()),
           " doesn't match the broadcast shape ", core::to_string(b));
  self.bump_version();
  masked_fill_kernel(self, mask.expand(self.sizes()), value);
  return self;
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value) {
  const BareKernel bare("masked_fill_", {&self, &value});
  return masked_fill_(self, mask, value_of(value, "masked_fill_"));
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, double value) {
  const BareKernel bare("masked_fill", {&self});
  TB_CHECK(mask.dtype() == DType::Bool, "masked_fill",
           "masked_fill_ only supports boolean masks, but got mask with dtype ", core::name(mask.dtype()));
  const Shape b = core::broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill");
  Tensor r = empty(b, self.dtype());
  // One pass, r = mask ? value : self, instead of a copy and then the fill: attention's causal
  // mask (and its backward) runs this over every score. The select is branch-free so the dense
  // inner run vectorises (masked_fill_run).
  StridedLoop loop({r, self.expand(b), mask.expand(b)});
  core::dispatch(self.dtype(), [&]<typename T>() {
    const T v = cast_value<T>(value);
    loop.for_each([v](char** p, const int64_t* st, int64_t n) {
      if (st[0] == int64_t(sizeof(T)) && st[1] == int64_t(sizeof(T)) && st[2] == 1) {
        masked_fill_run(reinterpret_cast<T*>(p[0]), reinterpret_cast<const T*>(p[1]),
                        reinterpret_cast<const uint8_t*>(p[2]), v, n);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        const bool m = *reinterpret_cast<const bool*>(p[2] + i * st[2]);
        *reinterpret_cast<T*>(p[0] + i * st[0]) = m ? v : *reinterpret_cast<const T*>(p[1] + i * st[1]);
      }
    });
  });
  return r;
}

Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value) {
  const BareKernel bare("masked_fill", {&self, &value});
  return masked_fill(self, mask, value_of(value, "masked_fill"));
}

Tensor masked_select(const Tensor& self, const Tensor& mask) {
  const BareKernel bare("masked_select", {&self});
  TB_CHECK(mask.dtype() == DType::Bool, "masked_select", "masked_select: expected BoolTensor for mask, got ",
           core::name(mask.dtype()));
  const Shape b = core::broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  const Tensor m = mask.expand(b).contiguous();
  const Tensor s = self.expand(b).contiguous();
  const bool* mp = m.data_ptr<bool>();
  const int64_t n = m.numel();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += mp[i];
  Tensor out = empty({count}, self.dtype());
  core::dispatch(self.dtype(), [&]<typename T>() {
    const T* sp = s.data_ptr<T>();
    T* op = out.data_ptr<T>();
    for (int64_t i = 0, j = 0; i < n; ++i)
      if (mp[i]) op[j++] = sp[i];
  });
  return out;
}

Tensor nonzero(const Tensor& self) {
  const Tensor s = self.contiguous();
  const int64_t n = s.numel(), nd = s.dim();
  std::vector<uint8_t> nz(static_cast<size_t>(n));
  core::dispatch(s.dtype(), [&]<typename T>() {
    const T* p = s.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) nz[size_t(i)] = static_cast<core::opmath_t<T>>(p[i]) != 0;
  });
  // Chunks counted, then each writes its rows at its own offset, in parallel. Within a chunk a row
  // is written for every element and kept (the next row begins after it) only where the element
  // is nonzero: no branch on the mask, which a random mask mispredicts half the time (1.7x
  // LibTorch's time before). A chunk stops at its last nonzero, so it never writes its
  // neighbour's first row.
  const int64_t chunks = n >= kParallelGrain ? std::min<int64_t>(num_threads(), n / (kParallelGrain / 2)) : 1;
  std::vector<int64_t> first(size_t(chunks) + 1), count(size_t(chunks) + 1, 0);
  for (int64_t c = 0; c <= chunks; ++c) first[size_t(c)] = n * c / chunks;
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t k = 0;
    for (int64_t i = first[size_t(c)]; i < first[size_t(c) + 1]; ++i) k += nz[size_t(i)];
    count[size_t(c) + 1] = k;
  }
  for (int64_t c = 0; c < chunks; ++c) count[size_t(c) + 1] += count[size_t(c)];  // offsets
  Tensor out = empty({count.back(), nd}, DType::Int64);
  int64_t* o = out.data_ptr<int64_t>();
#pragma omp parallel for num_threads(int(chunks)) schedule(static, 1) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t rows = count[size_t(c) + 1] - count[size_t(c)];
    if (rows == 0 || nd == 0) continue;
    std::vector<int64_t> idx(static_cast<size_t>(nd));
    for (int64_t d = nd - 1, rem = first[size_t(c)]; d >= 0; --d) idx[size_t(d)] = rem % s.size(d), rem /= s.size(d);
    int64_t* row = o + count[size_t(c)] * nd;
    int64_t k = 0;
    if (nd <= 2) {  // the common ranks with the multi-index in registers
      const int64_t C = nd == 2 ? s.size(1) : n;
      int64_t r = nd == 2 ? idx[0] : 0, col = idx[size_t(nd - 1)];
      for (int64_t i = first[size_t(c)];; ++i) {
        if (nd == 2) row[2 * k] = r, row[2 * k + 1] = col;
        else row[k] = col;
        k += nz[size_t(i)];
        if (k == rows) break;
        if (++col == C) col = 0, ++r;
      }
      continue;
    }
    for (int64_t i = first[size_t(c)];; ++i) {
      std::copy(idx.begin(), idx.end(), row + k * nd);
      k += nz[size_t(i)];
      if (k == rows) break;
      for (int64_t d = nd - 1; d >= 0; --d) {  // row-major increment of the multi-index
        if (++idx[size_t(d)] < s.size(d)) break;
        idx[size_t(d)] = 0;
      }
    }
  }
  return out;
}

}  // namespace tb::ops
