// copy_: the one strided copy with dtype cast (round to nearest even into bf16/f16), used by
// contiguous(), clone(), to() and the ops' out= paths.
#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "engine/core/profiler.h"
#include "engine/tensor/iterator.h"

namespace tb {

namespace {
// One element converted; within a dtype the bits are moved as they are (a bfloat16 NaN keeps its
// payload, as a memcpy would keep it, instead of going through float).
template <typename D, typename S>
inline D cast(S s) {
  if constexpr (std::is_same_v<D, S>) return s;
  else if constexpr (std::is_same_v<D, bool>) return static_cast<core::opmath_t<S>>(s) != 0;
  else return static_cast<D>(static_cast<core::opmath_t<S>>(s));
}

// Note [Copies that reorder memory]
// The strided loop walks the destination in logical order, which is slow for two common layouts:
// - Both operands dense with the same strides (clone() or to() of a transposed or permuted
//   tensor keeps its layout): the copy is one run in memory order, whatever the logical order, so
//   it is done as one (copy_flat; the clone of a permuted (16, 128, 8, 32) float32 tensor walked
//   it in 794 us at 2 threads, 5 GB/s).
// - The destination's unit-stride dim is not the source's (contiguous() of a transpose or a
//   permute, such as attention's keys): walking the destination reads the source along a large
//   stride, a new cache line per element (0.72 ms for that tensor at one thread, LibTorch's
//   time). Such copies go tile by tile over the plane of the two unit-stride dims, kTile x kTile
//   elements whose source and destination lines stay in L1 (copy_tiled), as ATen does for 2-D
//   transposes (ours takes any number of dims and any pair of dtypes).
constexpr int64_t kTile = 32;

template <typename D, typename S>
void copy_flat(D* d, const S* s, int64_t n) {
  const int64_t chunk = 1 << 16;
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (n > 2 * chunk)
  for (int64_t c = 0; c < n; c += chunk) {
    const int64_t e = std::min(n, c + chunk);
    if constexpr (std::is_same_v<D, S>) std::memcpy(d + c, s + c, size_t(e - c) * sizeof(D));
    else
      for (int64_t i = c; i < e; ++i) d[i] = cast<D>(s[i]);
  }
}

bool same_dense_layout(const Tensor& a, const Tensor& b) {
  return a.strides() == b.strides() && is_non_overlapping_and_dense(a) && is_non_overlapping_and_dense(b);
}

// dst and src of one shape, dst's unit-stride dim `a` and src's `b` (a != b): every (a, b) plane,
// tile by tile, in parallel over planes and tiles.
template <typename D, typename S>
void copy_tiled(const Tensor& dst, const Tensor& src, int a, int b) {
  std::vector<int64_t> osize, ostride_d, ostride_s;  // the other dims, outermost first
  for (int d = 0; d < dst.dim(); ++d)
    if (d != a && d != b && dst.size(d) > 1)
      osize.push_back(dst.size(d)), ostride_d.push_back(dst.stride(d)), ostride_s.push_back(src.stride(d));
  int64_t planes = 1;
  for (int64_t n : osize) planes *= n;
  const int64_t A = dst.size(a), B = dst.size(b), ta = (A + kTile - 1) / kTile, tb = (B + kTile - 1) / kTile;
  const int64_t dst_b = dst.stride(b), src_a = src.stride(a);
  D* dp = dst.data_ptr<D>();
  const S* sp = src.data_ptr<S>();
  const int64_t items = planes * ta * tb;
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (dst.numel() > kParallelGrain)
  for (int64_t w = 0; w < items; ++w) {
    int64_t plane = w / (ta * tb), off_d = 0, off_s = 0;
    for (size_t k = osize.size(); k-- > 0;) {
      const int64_t i = plane % osize[k];
      plane /= osize[k];
      off_d += i * ostride_d[k], off_s += i * ostride_s[k];
    }
    const int64_t a0 = (w % ta) * kTile, b0 = (w / ta % tb) * kTile;
    const int64_t a1 = std::min(A, a0 + kTile), b1 = std::min(B, b0 + kTile);
    for (int64_t ib = b0; ib < b1; ++ib) {
      D* drow = dp + off_d + ib * dst_b;
      const S* scol = sp + off_s + ib;
      for (int64_t ia = a0; ia < a1; ++ia) drow[ia] = cast<D>(scol[ia * src_a]);
    }
  }
}

// The unit-stride dim of t (one of size > 1), or -1.
int unit_dim(const Tensor& t) {
  for (int d = t.dim() - 1; d >= 0; --d)
    if (t.size(d) > 1 && t.stride(d) == 1) return d;
  return -1;
}
}  // namespace

Tensor& Tensor::copy_(const Tensor& src_in) {
  TB_CHECK(src_in.defined() && defined(), "copy_", "undefined tensor");
  profiler::OpScope prof("copy_", {{&sizes(), dtype()}, {&src_in.sizes(), src_in.dtype()}});  // (self, src)
  Tensor src = src_in;
  if (src.numel() > 0 && src.shares_storage(*this) && !src.is_same(*this)) src = src.clone();  // overlap
  if (impl()->autograd_meta && autograd_hooks().check_inplace) autograd_hooks().check_inplace(*this);
  // After the write, autograd (if linked) records it. See Note [Autograd hooks].
  struct Notify {
    Tensor& dst;
    const Tensor& src;
    ~Notify() {
      if ((dst.impl()->autograd_meta || src.impl()->autograd_meta) && autograd_hooks().on_copy &&
          !std::uncaught_exceptions())
        autograd_hooks().on_copy(dst, src);
    }
  } notify{*this, src_in};
  if (src.sizes() != sizes()) {
    TB_CHECK(core::broadcast_shapes(src.sizes(), sizes(), "copy_") == sizes(), "copy_", "source of shape ",
             core::to_string(src.sizes()), " cannot be broadcast to destination of shape ", core::to_string(sizes()));
    src = src.expand(sizes());
  }
  bump_version();
  // Note [Copies that reorder memory]
  if (numel() >= kTile * kTile) {
    if (same_dense_layout(*this, src)) {
      core::dispatch(dtype(), [&]<typename D>() {
        core::dispatch(src.dtype(), [&]<typename S>() { copy_flat(data_ptr<D>(), src.data_ptr<S>(), numel()); });
      });
      return *this;
    }
    const int a = unit_dim(*this), b = unit_dim(src);
    if (a >= 0 && b >= 0 && a != b && size(a) >= kTile / 2 && size(b) >= kTile / 2) {
      core::dispatch(dtype(), [&]<typename D>() {
        core::dispatch(src.dtype(), [&]<typename S>() { copy_tiled<D, S>(*this, src, a, b); });
      });
      return *this;
    }
  }
  StridedLoop loop({*this, src});
  if (dtype() == src.dtype() && loop.is_contiguous()) {
    // Parallel memcpy: one core does not saturate memory bandwidth.
    loop.for_each([&](char** p, const int64_t*, int64_t n) { std::memcpy(p[0], p[1], size_t(n) * itemsize()); });
    return *this;
  }
  core::dispatch(dtype(), [&]<typename D>() {
    core::dispatch(src.dtype(), [&]<typename S>() {
      loop.for_each([](char** p, const int64_t* st, int64_t n) {
        char* d = p[0];
        const char* s = p[1];
        if (st[0] == int64_t(sizeof(D)) && st[1] == int64_t(sizeof(S))) {
          // Rows contiguous on both sides (a narrowed or padded matrix, a permute that keeps the
          // last dim): a plain loop the compiler vectorises, or memcpy for the same dtype. The
          // strided loop below runs several times slower on such rows.
          if constexpr (std::is_same_v<D, S>) {
            std::memcpy(d, s, size_t(n) * sizeof(D));
          } else {
            D* dd = reinterpret_cast<D*>(d);
            const S* ss = reinterpret_cast<const S*>(s);
            for (int64_t i = 0; i < n; ++i) dd[i] = cast<D>(ss[i]);
          }
          return;
        }
        for (int64_t i = 0; i < n; ++i, d += st[0], s += st[1])
          *reinterpret_cast<D*>(d) = cast<D>(*reinterpret_cast<const S*>(s));
      });
    });
  });
  return *this;
}

}  // namespace tb
