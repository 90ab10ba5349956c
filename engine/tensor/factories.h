// Creation ops: empty (tensor.h), zeros, ones, full, eye, arange, linspace, the random factories
// (counter-based Generator, so a seed reproduces a tensor at any thread count), *_like, and
// tensors over caller data.
#pragma once
#include <optional>
#include <vector>

#include "engine/core/rng.h"
#include "engine/core/scalar.h"
#include "engine/tensor/tensor.h"

namespace tb {

Tensor zeros(const Shape& sizes, DType dtype = DType::Float32);
Tensor ones(const Shape& sizes, DType dtype = DType::Float32);
// Note [Factory dtypes]: as torch, a factory without a dtype infers it from its number
// arguments where torch does: full is bool for a bool value, int64 for an integer, float32 for a
// float; arange is int64 when start, end and step are all integers (or bools), else float32.
// scalar_tensor, linspace, zeros, ones, rand* are float32 whatever the arguments. A value that
// does not fit an integer dtype (1e10 in int32, nan in int64) is an error, as in torch; a float
// dtype takes it as IEEE rounding does (70000 in float16 is inf, where torch refuses).
Tensor full(const Shape& sizes, core::Scalar value, std::optional<DType> dtype = {});
Tensor scalar_tensor(double value, DType dtype = DType::Float32);  // 0-dim
Tensor eye(int64_t n, std::optional<int64_t> m = {}, DType dtype = DType::Float32);
// [start, end) by step, like torch.arange: ceil((end - start) / step) elements. For an integer
// dtype start, end and step are truncated to integers first (torch's int64 rule), so a step
// that truncates to 0 is an error.
Tensor arange(core::Scalar start, core::Scalar end, core::Scalar step = 1, std::optional<DType> dtype = {});
Tensor arange(core::Scalar end, std::optional<DType> dtype = {});
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32);
// Uniform [0, 1), standard normal, and integers in [low, high).
Tensor rand(const Shape& sizes, DType dtype = DType::Float32, core::Generator* gen = nullptr);
Tensor randn(const Shape& sizes, DType dtype = DType::Float32, core::Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::Int64,
               core::Generator* gen = nullptr);

Tensor empty_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor full_like(const Tensor& t, double value, std::optional<DType> dtype = {});
Tensor rand_like(const Tensor& t, core::Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, core::Generator* gen = nullptr);

// Copies `values` (converted to dtype) into a fresh tensor: 1-D with values.size() elements
// (also for one value, as torch.tensor([x])), or of `sizes` (Shape{} for a 0-dim tensor).
Tensor from_vector(const std::vector<double>& values, DType dtype = DType::Float32);
Tensor from_vector(const std::vector<double>& values, const Shape& sizes, DType dtype = DType::Float32);
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
