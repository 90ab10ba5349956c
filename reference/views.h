// LibTorch's views, copies and creation ops, mirroring engine/tensor (tensor.h, factories.h).
#pragma once
#include <optional>

#include "reference/tensor.h"

namespace tb::ref {

Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor t(const Tensor& x);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, std::optional<int64_t> offset);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);
Tensor copy_(Tensor& dst, const Tensor& src);

Tensor empty(const Shape& sizes, DType dtype);
Tensor zeros(const Shape& sizes, DType dtype);
Tensor ones(const Shape& sizes, DType dtype);
Tensor full(const Shape& sizes, double value, DType dtype);
Tensor eye(int64_t n, int64_t m, DType dtype);
Tensor arange(double start, double end, double step, DType dtype);
Tensor linspace(double start, double end, int64_t steps, DType dtype);
Tensor rand(const Shape& sizes, DType dtype);
Tensor randn(const Shape& sizes, DType dtype);
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);

}  // namespace tb::ref
