// Reads a tensor's elements in logical (row-major) order by walking its sizes and strides over
// the raw storage: the engine tests compare these with numbers written by hand, or two tensors bit
// for bit, without going through the engine's own copy or iterator code.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::testing {

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  if (t.numel() == 0) return out;
  core::dispatch(t.dtype(), [&]<typename T>() {
    const T* base = static_cast<const T*>(t.storage()->data());
    std::vector<int64_t> index(size_t(t.dim()), 0);
    for (int64_t n = 0; n < t.numel(); ++n) {
      int64_t off = t.storage_offset();
      for (int64_t d = 0; d < t.dim(); ++d) off += index[size_t(d)] * t.stride(d);
      out.push_back(double(static_cast<core::opmath_t<T>>(base[off])));
      for (int64_t d = t.dim() - 1; d >= 0 && ++index[size_t(d)] == t.size(d); --d) index[size_t(d)] = 0;
    }
  });
  return out;
}

// Same dtype, same sizes and the same bytes element by element, in logical order (walked over the
// raw storages, as values() does, so views of any layout compare by what they show).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const auto* pa = static_cast<const unsigned char*>(a.storage()->data());
  const auto* pb = static_cast<const unsigned char*>(b.storage()->data());
  const size_t item = size_t(a.itemsize());
  std::vector<int64_t> index(size_t(a.dim()), 0);
  for (int64_t n = 0; n < a.numel(); ++n) {
    int64_t oa = a.storage_offset(), ob = b.storage_offset();
    for (int64_t d = 0; d < a.dim(); ++d) {
      oa += index[size_t(d)] * a.stride(d);
      ob += index[size_t(d)] * b.stride(d);
    }
    if (std::memcmp(pa + size_t(oa) * item, pb + size_t(ob) * item, item) != 0) return false;
    for (int64_t d = a.dim() - 1; d >= 0 && ++index[size_t(d)] == a.size(d); --d) index[size_t(d)] = 0;
  }
  return true;
}

// 0, 1, ..., n-1 as doubles.
inline std::vector<double> iota(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double(i));
  return v;
}

}  // namespace tb::testing
