#include "engine/core/shape.h"

#include "engine/core/error.h"

namespace tb::core {

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t checked_numel(const Shape& s, const char* op) {
  for (int64_t d : s) TB_CHECK(d >= 0, op, "negative dimension in size ", to_string(s));
  // As c10::safe_compute_numel: a running product in uint64 that must never overflow, then fit
  // int64. So [2^62, 2^62, 0] is an error although its numel is 0, while [2^61, 5, 0] is not.
  uint64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) overflow |= __builtin_mul_overflow(n, uint64_t(d), &n);
  TB_CHECK(!overflow && n <= uint64_t(INT64_MAX), op, "number of elements overflows int64 for size ", to_string(s));
  return int64_t(n);
}

Shape contiguous_strides(const Shape& sizes, const char* op) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    // As PyTorch: every stride must be representable even when numel is 0 (a zero dim counts
    // as 1 here), so [0, 2^62, 2^62] is refused while [0, 2^61, 3] is a valid empty tensor.
    if (i > 0)
      TB_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(sizes[i], 1), &acc), op,
               "stride calculation overflowed for size ", to_string(sizes));
  }
  return st;
}

int64_t checked_storage_nbytes(const Shape& sizes, const Shape& strides, int64_t offset, int64_t itemsize,
                               const char* op) {
  TB_CHECK(sizes.size() == strides.size(), op, "sizes ", to_string(sizes), " and strides ", to_string(strides),
           " differ in length");
  int64_t elems = 0;
  for (int64_t d : sizes)
    if (d == 0) return 0;
  int64_t hi = offset;
  bool overflow = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    int64_t span = 0;
    overflow |= __builtin_mul_overflow(sizes[d] - 1, strides[d], &span);
    overflow |= __builtin_add_overflow(hi, span, &hi);
  }
  overflow |= __builtin_add_overflow(hi, int64_t(1), &elems);
  int64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(elems, itemsize, &nbytes);
  TB_CHECK(!overflow, op, "storage size calculation overflowed with sizes=", to_string(sizes),
           " and strides=", to_string(strides), (offset ? " and offset " + std::to_string(offset) : std::string()));
  return nbytes;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TB_CHECK(da == db || da == 1 || db == 1, op, "shapes ", to_string(a), " and ", to_string(b),
             " cannot be broadcast (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  TB_CHECK(dim >= -n && dim < n, op, "dimension ", dim, " out of range for a tensor of ", ndim, " dims (expected in [",
           -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TB_CHECK(infer < 0, op, "only one dimension can be inferred in shape ", to_string(shape));
      infer = int64_t(i);
    } else {
      TB_CHECK(shape[i] >= 0, op, "invalid shape dimension ", shape[i], " in ", to_string(shape));
      TB_CHECK(!__builtin_mul_overflow(known, shape[i], &known), op, "shape ", to_string(shape), " overflows");
    }
  }
  if (infer >= 0) {
    TB_CHECK(known != 0 && numel % known == 0, op, "shape ", to_string(shape), " is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    TB_CHECK(known == numel, op, "shape ", to_string(shape), " is invalid for input of size ", numel);
  }
  return out;
}

}  // namespace tb::core
