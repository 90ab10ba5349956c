// One line of LibTorch per factory with dtype inference (see factories.h).
#include "reference/factories.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
c10::Scalar S(const core::Scalar& s) {
  if (s.is_bool()) return c10::Scalar(s.i != 0);
  if (s.is_float()) return c10::Scalar(s.d);
  return c10::Scalar(s.i);
}
torch::TensorOptions opts(std::optional<DType> dt) {
  torch::TensorOptions o;
  return dt ? o.dtype(to_torch(*dt)) : o;
}
}  // namespace

Tensor arange(core::Scalar start, core::Scalar end, core::Scalar step, std::optional<DType> dt) {
  return guarded("arange", [&] { return wrap(torch::arange(S(start), S(end), S(step), opts(dt))); });
}
Tensor full(const Shape& sizes, core::Scalar value, std::optional<DType> dt) {
  return guarded("full", [&] { return wrap(torch::full(sizes, S(value), opts(dt))); });
}
Tensor scalar_tensor(core::Scalar value, std::optional<DType> dt) {
  return guarded("scalar_tensor", [&] { return wrap(torch::scalar_tensor(S(value), opts(dt))); });
}
Tensor linspace(core::Scalar start, core::Scalar end, int64_t steps, std::optional<DType> dt) {
  return guarded("linspace", [&] { return wrap(torch::linspace(S(start), S(end), steps, opts(dt))); });
}
Tensor empty_checked(const Shape& sizes, DType dt) {
  return guarded("empty", [&] { return wrap(torch::empty(sizes, opts(dt))); });
}
Tensor as_strided_of(int64_t n, const Shape& sizes, const Shape& strides, int64_t offset) {
  return guarded("as_strided", [&] { return wrap(torch::empty({n}).as_strided(sizes, strides, offset)); });
}

}  // namespace tb::ref
