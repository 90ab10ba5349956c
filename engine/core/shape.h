// Shapes and strides (in elements), numel with overflow checks, broadcasting, dim wrapping.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tb::core {

using Shape = std::vector<int64_t>;

std::string to_string(const Shape& s);                  // "[2, 3]"
int64_t checked_numel(const Shape& s, const char* op);  // throws on negative sizes or overflow
// Row-major strides; throws when a stride overflows int64 (also when numel is 0, as PyTorch).
Shape contiguous_strides(const Shape& sizes, const char* op = "contiguous_strides");
// Bytes a storage needs to hold the elements that (sizes, strides, offset) reach: 0 when any size
// is 0, else (offset + sum (size-1)*stride + 1) * itemsize; throws when that overflows int64.
// Sizes and strides must be non-negative (the caller checks).
int64_t checked_storage_nbytes(const Shape& sizes, const Shape& strides, int64_t offset, int64_t itemsize,
                               const char* op);
// PyTorch's broadcasting: align trailing dims; each pair equal or one of them 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wrap a possibly negative dim into [0, ndim); a 0-dim tensor accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Resolve a single -1 in `shape` so that it holds `numel` elements.
Shape infer_size(const Shape& shape, int64_t numel, const char* op);

}  // namespace tb::core
