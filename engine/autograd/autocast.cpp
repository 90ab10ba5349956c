#include "engine/autograd/autocast.h"

namespace tb::autograd {

namespace {
thread_local bool enabled = false;
thread_local DType dtype = DType::BFloat16;

// LibTorch casts only eligible tensors: floating and not float64 (double math stays double).
Tensor cast_floating(const Tensor& t, DType to) {
  if (!enabled || !t.defined() || !core::is_floating(t.dtype()) || t.dtype() == DType::Float64 || t.dtype() == to)
    return t;
  return t.to(to);
}
}  // namespace

bool autocast_enabled() { return enabled; }
DType autocast_dtype() { return dtype; }

AutocastGuard::AutocastGuard(bool on, DType d) : prev_enabled_(enabled), prev_dtype_(dtype) {
  TB_CHECK(d == DType::BFloat16 || d == DType::Float16, "autocast", "CPU autocast supports bfloat16 and float16, not ",
           core::name(d));
  enabled = on;
  dtype = d;
}

AutocastGuard::~AutocastGuard() {
  enabled = prev_enabled_;
  dtype = prev_dtype_;
}

Tensor autocast_lower(const Tensor& t) { return cast_floating(t, dtype); }
Tensor autocast_fp32(const Tensor& t) { return cast_floating(t, DType::Float32); }

}  // namespace tb::autograd
