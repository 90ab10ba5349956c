// PyTorch's rule for the layout of a new tensor made "like" existing ones (TensorIterator's
// reorder_dimensions, infer_dense_strides): a dense layout whose dims are ordered as the
// operands' strides order them. Used by clone()/to() (one operand) and by elementwise results
// (every input), so a permuted input gives a permuted result, as in PyTorch.
#pragma once
#include <initializer_list>

#include "engine/tensor/tensor.h"

namespace tb {

// An uninitialised tensor of `shape`, dense, its dims ordered innermost-first by an insertion sort
// that starts from row-major: for each pair the first operand that orders it decides (a stride of
// 0 abstains; equal strides put the larger dim outer). Operands must have `shape`'s rank; undefined
// ones are skipped. Row-major when no operand orders anything.
Tensor empty_in_stride_order(const Shape& shape, DType dtype, std::initializer_list<Tensor> operands);

}  // namespace tb
