// Creation ops: empty (tensor.h), zeros, ones, full, eye, arange, linspace, the random factories
// (counter-based Generator, so a seed reproduces a tensor at any thread count), *_like, and
// tensors over caller data.
#pragma once
#include <optional>
#include <vector>

#include "engine/core/rng.h"
#include "engine/tensor/tensor.h"

namespace tb {

Tensor zeros(const Shape& sizes, DType dtype = DType::Float32);
Tensor ones(const Shape& sizes, DType dtype = DType::Float32);
Tensor full(const Shape& sizes, double value, DType dtype = DType::Float32);
Tensor scalar_tensor(double value, DType dtype = DType::Float32);   // 0-dim
Tensor eye(int64_t n, std::optional<int64_t> m = {}, DType dtype = DType::Float32);
// [start, end) by step, like torch.arange: the result has ceil((end - start) / step) elements.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::Int64);
Tensor arange(double end, DType dtype = DType::Int64);
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
// Uniform [0, 1), standard normal, and integers in [low, high).
Tensor rand(const Shape& sizes, DType dtype = DType::Float32, core::Generator* gen = nullptr);
Tensor randn(const Shape& sizes, DType dtype = DType::Float32, core::Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::Int64, core::Generator* gen = nullptr);

Tensor empty_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor full_like(const Tensor& t, double value, std::optional<DType> dtype = {});
Tensor rand_like(const Tensor& t, core::Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, core::Generator* gen = nullptr);

// Copies `values` (converted to dtype) into a fresh tensor of `sizes` (default: 1-D).
Tensor from_vector(const std::vector<double>& values, const Shape& sizes = {}, DType dtype = DType::Float32);
template <typename T>
Tensor from_vector_of(const std::vector<T>& values, const Shape& sizes) {
  Tensor t = empty(sizes, core::dtype_of<T>);
  TB_CHECK(int64_t(values.size()) == t.numel(), "from_vector", values.size(), " values for shape ",
           core::to_string(sizes));
  std::copy(values.begin(), values.end(), t.data_ptr<T>());
  return t;
}
// A tensor over caller-owned memory (no copy); `keep` is held as long as the storage lives.
Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, DType dtype, std::shared_ptr<void> keep = {});

// fill_ and zero_ write in place (version bump).
Tensor& fill_(Tensor& t, double value);
Tensor& zero_(Tensor& t);

}  // namespace tb
