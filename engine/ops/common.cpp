#include "engine/ops/common.h"

namespace tb::ops {

namespace {
// PyTorch's combine_categories: the higher-priority dtype wins unless the lower one is of a
// higher category (a float 0-dim tensor or scalar beside an integer tensor).
DType combine(DType higher, DType lower) {
  if (core::is_floating(higher)) return higher;
  if (higher == DType::Bool || core::is_floating(lower)) return core::promote_types(higher, lower);
  return higher;
}
}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 == b0) return core::promote_types(a.dtype(), b.dtype());
  return a0 ? combine(b.dtype(), a.dtype()) : combine(a.dtype(), b.dtype());
}

DType result_type(const Tensor& a, bool scalar_is_float) {
  return combine(a.dtype(), scalar_is_float ? DType::Float32 : DType::Int64);
}

Tensor prepare_out(Tensor* out, const Shape& shape, DType dtype, const char* op) {
  if (!out || !out->defined()) return empty(shape, dtype);
  if (out->sizes() != shape) {
    // Like PyTorch, a wrong-shaped out= tensor is resized (PyTorch warns when it held elements).
    // Done on the impl, so every handle to `out` sees the new shape.
    Tensor fresh = empty(shape, out->dtype());
    TensorImpl* impl = out->impl();
    impl->storage = fresh.storage();
    impl->sizes = shape;
    impl->strides = fresh.strides();
    impl->offset = 0;
    out->bump_version();
  }
  TB_CHECK(core::category(out->dtype()) >= core::category(dtype), op, "result type ", core::name(dtype),
           " can't be cast to the desired output type ", core::name(out->dtype()));
  return *out;
}

}  // namespace tb::ops
