// LibTorch's factories with dtype inference (no dtype given, or an optional one), for the
// engine's Note [Factory dtypes] (engine/tensor/factories.h): the number arguments keep their
// kind (bool, int, float) as c10::Scalar does. Any LibTorch error surfaces as ref::RefError.
#pragma once
#include <optional>

#include "engine/core/scalar.h"
#include "reference/tensor.h"

namespace tb::ref {

Tensor arange(core::Scalar start, core::Scalar end, core::Scalar step, std::optional<DType> dtype);
Tensor full(const Shape& sizes, core::Scalar value, std::optional<DType> dtype);
Tensor scalar_tensor(core::Scalar value, std::optional<DType> dtype);
Tensor linspace(core::Scalar start, core::Scalar end, int64_t steps, std::optional<DType> dtype);
// torch::empty(sizes, dtype) (errors: negative sizes, stride or storage size overflow).
Tensor empty_checked(const Shape& sizes, DType dtype);
// torch::empty({n}).as_strided(sizes, strides, offset).
Tensor as_strided_of(int64_t storage_elements, const Shape& sizes, const Shape& strides, int64_t offset);

}  // namespace tb::ref
