// What every op family shares: PyTorch's result_type (dimensioned tensors outrank 0-dim tensors,
// which outrank Python scalars, unless the lower one is of a higher category: bool < int < float)
// and the handling of out= arguments.
#pragma once
#include "engine/tensor/factories.h"
#include "engine/tensor/tensor.h"

namespace tb::ops {

// Result dtype of a binary op between tensors a and b.
DType result_type(const Tensor& a, const Tensor& b);
// Result dtype of a tensor with a Python-style scalar (is_float: 2.0 vs 2).
DType result_type(const Tensor& a, bool scalar_is_float);
// Float ops on integer inputs compute in float32 (PyTorch's default dtype), like torch.sqrt(int).
inline DType to_float_dtype(DType t) { return core::is_floating(t) ? t : DType::Float32; }

// Validates or allocates an out= tensor: a defined `out` of another shape is resized in place (as
// PyTorch does) and its dtype must be one the result can be cast to; returns the tensor to write.
Tensor prepare_out(Tensor* out, const Shape& shape, DType dtype, const char* op);

}  // namespace tb::ops
