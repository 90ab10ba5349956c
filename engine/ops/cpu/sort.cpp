// Ordering kernels: sort (always stable) and topk. The sorted dim is moved last and made
// contiguous, so each row is one run; rows are sorted in parallel. Keys are compared in opmath_t
// (float for bf16/f16), with NaN above every number as in PyTorch. Rows of kRadixMin elements or
// more are sorted by a least-significant-digit radix sort (Note [Radix sort keys]), shorter rows
// by std::stable_sort; a single long row is radix-sorted by all threads at once.
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/ops/index.h"
#include "engine/tensor/iterator.h"

namespace tb::ops {

namespace {

template <typename M>
inline bool is_nan(M v) {
  if constexpr (std::is_floating_point_v<M>) return std::isnan(v);
  else return false;
}

// Strict "comes before" for keys: ascending puts NaN last, descending puts NaN first.
template <typename M>
struct KeyLess {
  bool descending;
  bool operator()(M a, M b) const {
    if (descending) return a > b || (is_nan(a) && !is_nan(b));
    return a < b || (is_nan(b) && !is_nan(a));
  }
};

template <typename M>
using Item = std::pair<M, int64_t>;

// Note [Radix sort keys]
// A radix sort orders unsigned integers, so each key is mapped to one whose unsigned order is
// KeyLess's: a float with its sign bit set has every bit flipped, any other its sign bit set;
// -0 is taken as +0 (they compare equal, so a stable sort must keep them in input order); every
// NaN becomes the largest key, above +inf; an integer has its sign bit flipped; descending
// complements the key. Each pass is a stable counting sort, so equal keys keep their input order.
// The values written out are read back from the row by index (by every path, as PyTorch moves the
// elements themselves): -0, +0 and NaN payloads come out as they went in.
template <typename M>
using RadixKey = std::conditional_t<sizeof(M) == 8, uint64_t, uint32_t>;

template <typename M>
RadixKey<M> radix_key(M v, bool descending) {
  using K = RadixKey<M>;
  constexpr K top = K(1) << (8 * sizeof(K) - 1);
  // Selects, not branches, so a loop over a row vectorises (topk's Note [Small k]).
  K key;
  if constexpr (std::is_floating_point_v<M>) {
    const K u = std::bit_cast<K>(v);
    const K ordered = (u & top) ? ~u : (u | top);
    const K zero_as_plus = K(u << 1) == 0 ? top : ordered;  // -0 and +0: +0's key
    key = v != v ? ~K(0) : zero_as_plus;
  } else if constexpr (std::is_same_v<M, bool>) {
    key = K(v);
  } else {
    key = K(v) ^ top;  // two's complement: flipping the sign bit makes the order unsigned
  }
  return key ^ (descending ? ~K(0) : K(0));
}

// Rows at least this long are radix-sorted: below it std::stable_sort's comparisons cost less
// than clearing and walking 256 counters per pass (measured: engine/ops/README.md, "sort").
constexpr int64_t kRadixMin = 256;

// Stable least-significant-digit radix sort of a row of n keys, 8 bits per pass. `threads` share
// each pass: every thread counts its slice of the current buffer, then writes its keys after the
// lower threads' keys of the same digit, which keeps the pass stable. A pass whose digit is the
// same for every key is skipped (bf16's low 16 bits, small integers' high bytes). Returns the
// sorted positions in the row.
template <typename T, typename M = core::opmath_t<T>>
const uint32_t* radix_sort_row(const T* row, int64_t n, bool descending, std::vector<RadixKey<M>> (&keys)[2],
                               std::vector<uint32_t> (&pos)[2], std::vector<std::array<int64_t, 256>>& count,
                               int threads) {
  using K = RadixKey<M>;
  constexpr int kPasses = int(sizeof(K));
  for (int b = 0; b < 2; ++b) keys[b].resize(size_t(n)), pos[b].resize(size_t(n));
  count.resize(size_t(std::max(threads, 1)));  // the caller's, kept across rows: no allocation per row
  int cur = 0;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    for (int64_t i = lo; i < hi; ++i) {
      keys[0][size_t(i)] = radix_key(static_cast<M>(row[i]), descending);
      pos[0][size_t(i)] = uint32_t(i);
    }
    int mine = 0;  // which buffer holds the keys; every thread takes the same turns
    for (int p = 0; p < kPasses; ++p) {
      const int shift = 8 * p;
      const K* src = keys[mine].data();
      std::array<int64_t, 256>& c = count[size_t(t)];
      c.fill(0);
      for (int64_t i = lo; i < hi; ++i) ++c[(src[i] >> shift) & 0xff];
#pragma omp barrier
      std::array<int64_t, 256> next;  // where this thread writes its next key of each digit
      int64_t start = 0;
      bool one_digit = false;
      for (int d = 0; d < 256; ++d) {
        int64_t below = 0, all = 0;
        for (int u = 0; u < nt; ++u) (u < t ? below : all) += count[size_t(u)][size_t(d)];
        all += below;
        one_digit |= all == n;
        next[size_t(d)] = start + below;
        start += all;
      }
      if (!one_digit) {
        const uint32_t* src_pos = pos[mine].data();
        K* dst = keys[mine ^ 1].data();
        uint32_t* dst_pos = pos[mine ^ 1].data();
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t at = next[(src[i] >> shift) & 0xff]++;
          dst[at] = src[i];
          dst_pos[at] = src_pos[i];
        }
        mine ^= 1;
      }
#pragma omp barrier
    }
    if (t == 0) cur = mine;
  }
  return pos[cur].data();
}

// Note [Small k]
// topk with k much smaller than the row keeps the best k so far in a sorted array and tests each
// new element against the k-th: on rows in no particular order almost every element fails that
// test, so the work is about one comparison per element (float: 16 at a time, and only a group
// holding a candidate is walked again). std::partial_sort over (value, index) pairs, the general
// path, pushes every element through a heap of k. Keys are the radix keys (Note [Radix sort
// keys]), so the order (-0 as +0, NaN first when largest) is the sort's exactly, and a key equal
// to the k-th loses, being later in the row: ties go to the lower index, as in the general path.
constexpr int64_t kSmallTopkMax = 32;  // an insertion moves at most 32 entries

template <typename T, typename M = core::opmath_t<T>>
void small_topk_row(const T* row, int64_t L, int64_t k, bool descending, std::vector<RadixKey<M>>& best,
                    std::vector<int64_t>& at) {
  using K = RadixKey<M>;
  best.resize(size_t(k));
  at.resize(size_t(k));
  int64_t n = 0;  // entries held, sorted by (key, index)
  auto insert = [&](K key, int64_t i) {
    // After every entry with a key <= this one (all of them earlier in the row).
    const int64_t p = std::upper_bound(best.begin(), best.begin() + n, key) - best.begin();
    const int64_t last = std::min(n, k - 1);
    for (int64_t q = last; q > p; --q) best[size_t(q)] = best[size_t(q - 1)], at[size_t(q)] = at[size_t(q - 1)];
    best[size_t(p)] = key;
    at[size_t(p)] = i;
    n = std::min(n + 1, k);
  };
  auto consider = [&](int64_t j) {
    const K key = radix_key(static_cast<M>(row[j]), descending);
    if (key < best[size_t(k - 1)]) insert(key, j);
  };
  int64_t i = 0;
  for (; i < k; ++i) insert(radix_key(static_cast<M>(row[i]), descending), i);
  if constexpr (std::is_same_v<T, float>) {
    // 16 at a time, skipped when every one is worse than the k-th by value (a NaN never is, nor
    // a tie: those go to the exact test by key).
    using vf = float __attribute__((vector_size(64)));
    using vi = int32_t __attribute__((vector_size(64)));
    for (; i + 16 <= L; i += 16) {
      vf x;
      __builtin_memcpy(&x, row + i, sizeof(vf));
      const vf kth = vf{} + row[at[size_t(k - 1)]];
      const vi worse = descending ? vi(x < kth) : vi(x > kth);
      int32_t all = -1;
      for (int l = 0; l < 16; ++l) all &= worse[l];
      if (all) continue;
      for (int64_t j = i; j < i + 16; ++j) consider(j);
    }
  }
  for (; i < L; ++i) consider(i);
}

// x: (rows, L) contiguous -> values: (rows, k), indices: (rows, k), contiguous. k == L sorts
// the whole row; k < L keeps the first k in order (ties by lower index).
void order_rows(const Tensor& x, Tensor& values, Tensor& indices, int64_t k, bool descending, bool full_sort) {
  const int64_t L = x.size(-1);
  if (x.numel() == 0 || k == 0) return;
  const int64_t rows = x.numel() / L;
  core::dispatch(x.dtype(), [&]<typename T>() {
    using M = core::opmath_t<T>;
    const T* xp = x.data_ptr<T>();
    T* vp = values.data_ptr<T>();
    int64_t* ip = indices.data_ptr<int64_t>();
    const KeyLess<M> less{descending};
    const bool par_rows = rows > 1 && x.numel() > kParallelGrain;
    const bool radix = full_sort && L >= kRadixMin && uint64_t(L) <= std::numeric_limits<uint32_t>::max();
    const bool small = !full_sort && k <= kSmallTopkMax && L >= 4 * k;  // Note [Small k]
    // One long row: its radix passes are shared by the threads instead.
    const int row_threads = !par_rows && L > kParallelGrain ? num_threads() : 1;
#pragma omp parallel num_threads(num_threads()) if (par_rows)
    {
      std::vector<Item<M>> buf;
      std::vector<RadixKey<M>> keys[2];
      std::vector<uint32_t> pos[2];
      std::vector<std::array<int64_t, 256>> count;
      std::vector<RadixKey<M>> best;  // small_topk_row's, kept across rows
      std::vector<int64_t> at;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = xp + r * L;
        T* vr = vp + r * k;
        int64_t* ir = ip + r * k;
        if (radix) {
          const uint32_t* order = radix_sort_row<T>(row, L, descending, keys, pos, count, row_threads);
          for (int64_t i = 0; i < k; ++i) vr[i] = row[order[i]], ir[i] = order[i];
          continue;
        }
        if (small) {
          small_topk_row<T>(row, L, k, descending, best, at);
          for (int64_t i = 0; i < k; ++i) ir[i] = at[size_t(i)], vr[i] = row[ir[i]];
          continue;
        }
        buf.resize(size_t(L));
        for (int64_t i = 0; i < L; ++i) buf[size_t(i)] = {static_cast<M>(row[i]), i};
        if (full_sort) {
          std::stable_sort(buf.begin(), buf.end(),
                           [less](const Item<M>& a, const Item<M>& b) { return less(a.first, b.first); });
        } else {
          auto cmp = [less](const Item<M>& a, const Item<M>& b) {
            return less(a.first, b.first) || (!less(b.first, a.first) && a.second < b.second);
          };
          std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), cmp);
        }
        for (int64_t i = 0; i < k; ++i) ir[i] = buf[size_t(i)].second, vr[i] = row[ir[i]];
      }
    }
  });
}

// Moves `d` last (transpose), orders, and moves it back; results are contiguous.
std::tuple<Tensor, Tensor> order(const Tensor& self, int64_t d, int64_t k, bool descending, bool full_sort) {
  const Tensor x = self.transpose(d, -1).contiguous();
  Shape shape = x.sizes();
  shape.back() = k;
  Tensor values = empty(shape, self.dtype()), indices = empty(shape, DType::Int64);
  order_rows(x, values, indices, k, descending, full_sort);
  if (d == self.dim() - 1) return {values, indices};
  return {values.transpose(d, -1).contiguous(), indices.transpose(d, -1).contiguous()};
}

// sort without the bare-kernel check: argsort's indices have no gradient, so it takes any input.
std::tuple<Tensor, Tensor> sort_unchecked(const Tensor& self, int64_t dim, bool descending) {
  const int64_t d = core::wrap_dim(dim, self.dim(), "sort");
  if (self.dim() == 0) return {self.clone(), zeros({}, DType::Int64)};
  return order(self, d, self.size(d), descending, true);
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> /*stable*/, int64_t dim, bool descending) {
  const BareKernel bare("sort", {&self});
  return sort_unchecked(self, dim, descending);
}

std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending) {
  return sort(self, std::nullopt, dim, descending);
}

Tensor argsort(const Tensor& self, int64_t dim, bool descending) {
  return std::get<1>(sort_unchecked(self, dim, descending));
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  const BareKernel bare("topk", {&self});
  TB_CHECK(self.dtype() != DType::Bool, "topk", "topk does not support bool dtypes on CPU");
  const int64_t d = core::wrap_dim(dim, self.dim(), "topk");
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  TB_CHECK(k >= 0 && k <= size, "topk", "selected index k out of range: k = ", k, ", size of dim ", d, " = ", size);
  if (self.dim() == 0) return {self.clone(), zeros({}, DType::Int64)};
  return order(self, d, k, largest, k == size);
}

}  // namespace tb::ops
