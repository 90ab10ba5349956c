// Tensor::str(): values (first and last few per dim for big tensors), then shape and dtype.
#include <sstream>

#include "engine/tensor/tensor.h"

namespace tb {

namespace {
void print_rec(std::ostringstream& os, const Tensor& t, int64_t d, int64_t off) {
  const int64_t n = t.sizes()[d];
  const int64_t edge = 3;
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * edge && i == edge) {
      os << "..., ";
      i = n - edge;
    }
    const int64_t o = off + i * t.strides()[d];
    if (d + 1 == t.dim()) {
      core::dispatch(t.dtype(), [&]<typename T>() {
        const T* base = static_cast<const T*>(t.storage()->data());
        if constexpr (std::is_same_v<T, bool>) os << (base[o] ? "True" : "False");
        else os << static_cast<core::opmath_t<T>>(base[o]);
      });
    } else {
      print_rec(os, t, d + 1, o);
    }
    if (i + 1 < n) os << ", ";
  }
  os << "]";
}
}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os.precision(6);
  os << "tensor(";
  if (dim() == 0) {
    os << item_double();
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_rec(os, *this, 0, storage_offset());
  }
  os << ", size=" << core::to_string(sizes()) << ", dtype=" << core::name(dtype()) << ")";
  return os.str();
}

}  // namespace tb
