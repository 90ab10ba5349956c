// What every op family shares: PyTorch's result_type (dimensioned tensors outrank 0-dim tensors,
// which outrank Python scalars, unless the lower one is of a higher category: bool < int < float)
// and the handling of out= arguments.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "engine/core/scalar.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tensor.h"

namespace tb::ops {

// A Python-style number argument (bool, int or float): see engine/core/scalar.h.
using core::Scalar;

// Result dtype of an op over tensors a and b (dimensioned tensors outrank 0-dim ones).
DType result_type(const Tensor& a, const Tensor& b);
// The same over up to any number of tensors (null entries are skipped): clamp, where.
DType result_type(std::initializer_list<const Tensor*> ts);
// Result dtype of a tensor with a scalar (a scalar of a higher category wins).
DType result_type(const Tensor& a, const Scalar& s);
// A dtype combined with a scalar's category (clamp with scalar bounds).
DType combine_scalar(DType t, const Scalar& s);
// Float ops on integer inputs compute in float32 (PyTorch's default dtype), like torch.sqrt(int).
inline DType to_float_dtype(DType t) { return core::is_floating(t) ? t : DType::Float32; }

// Validates or allocates an out= tensor: a defined `out` of another shape is resized in place (as
// PyTorch does) and its dtype must be one the result can be cast to; returns the tensor to write.
Tensor prepare_out(Tensor* out, const Shape& shape, DType dtype, const char* op);

}  // namespace tb::ops
