// Ordering kernels: sort (always stable) and topk. The sorted dim is moved last and made
// contiguous, so each row is one run; rows are sorted in parallel, and a single long row is
// sorted as two halves in parallel and merged (std::merge keeps the first half's element on a
// tie, so the result stays stable). Keys are compared in opmath_t (float for bf16/f16), with NaN
// above every number as in PyTorch.
#include <algorithm>
#include <cmath>
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

// Stable sort of one row by key; long rows split across two threads when `parallel`.
template <typename M>
void sort_row(std::vector<Item<M>>& buf, std::vector<Item<M>>& tmp, KeyLess<M> less, bool parallel) {
  auto cmp = [less](const Item<M>& a, const Item<M>& b) { return less(a.first, b.first); };
  const size_t n = buf.size();
  if (!parallel || n < (1u << 16) || num_threads() < 2) {
    std::stable_sort(buf.begin(), buf.end(), cmp);
    return;
  }
  const size_t half = n / 2;
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int part = 0; part < 2; ++part) {
    if (part == 0) std::stable_sort(buf.begin(), buf.begin() + ptrdiff_t(half), cmp);
    else std::stable_sort(buf.begin() + ptrdiff_t(half), buf.end(), cmp);
  }
  tmp.resize(n);
  std::merge(buf.begin(), buf.begin() + ptrdiff_t(half), buf.begin() + ptrdiff_t(half), buf.end(), tmp.begin(), cmp);
  buf.swap(tmp);
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
#pragma omp parallel if (par_rows)
    {
      std::vector<Item<M>> buf(static_cast<size_t>(L)), tmp;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = xp + r * L;
        buf.resize(size_t(L));
        for (int64_t i = 0; i < L; ++i) buf[size_t(i)] = {static_cast<M>(row[i]), i};
        if (full_sort) {
          sort_row(buf, tmp, less, !par_rows);
        } else {
          auto cmp = [less](const Item<M>& a, const Item<M>& b) {
            return less(a.first, b.first) || (!less(b.first, a.first) && a.second < b.second);
          };
          std::partial_sort(buf.begin(), buf.begin() + k, buf.end(), cmp);
        }
        for (int64_t i = 0; i < k; ++i) {
          vp[r * k + i] = static_cast<T>(buf[size_t(i)].first);
          ip[r * k + i] = buf[size_t(i)].second;
        }
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
