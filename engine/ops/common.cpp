#include "engine/ops/common.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "engine/ops/cpu/bf16_convert.h"

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

DType result_type(std::initializer_list<const Tensor*> ts) {
  std::optional<DType> dim, zero;
  for (const Tensor* t : ts) {
    if (!t) continue;
    std::optional<DType>& slot = t->dim() == 0 ? zero : dim;
    slot = slot ? core::promote_types(*slot, t->dtype()) : t->dtype();
  }
  TB_CHECK(dim || zero, "result_type", "no tensors");
  if (!dim) return *zero;
  if (!zero) return *dim;
  return combine(*dim, *zero);
}

DType result_type(const Tensor& a, const Tensor& b) { return result_type({&a, &b}); }

DType combine_scalar(DType t, const Scalar& s) { return combine(t, s.dtype()); }

DType result_type(const Tensor& a, const Scalar& s) { return combine_scalar(a.dtype(), s); }

void KernelEvent::record_inputs(std::initializer_list<const Tensor*> args) {
  std::vector<profiler::OpScope::Input> in;
  for (const Tensor* t : args)
    if (t) in.push_back({t->defined() ? &t->sizes() : nullptr, t->defined() ? t->dtype() : DType::Float32});
  prof_.set_inputs(in);
}

void KernelEvent::record_inputs(const std::vector<Tensor>& args) {
  std::vector<profiler::OpScope::Input> in;
  for (const Tensor& t : args)
    in.push_back({t.defined() ? &t.sizes() : nullptr, t.defined() ? t.dtype() : DType::Float32});
  prof_.set_inputs(in);
}

void bare_kernel_error(const char* op) {
  // The differentiable form of exp_, exp_out (and exp) is tb::exp: in-place and out= kernels
  // suggest the out-of-place op (out= forms are not differentiable in LibTorch either).
  std::string name = op, base = name;
  if (base.size() > 4 && base.ends_with("_out")) base.resize(base.size() - 4);
  else if (base.size() > 1 && base.back() == '_') base.pop_back();
  throw core::Error(name, core::detail::concat("tb::ops::", name,
                                               " is a bare kernel and would drop the autograd graph: a tensor argument",
                                               " requires grad and grad mode is on; call tb::", base,
                                               " (which records the graph), or run the kernel under NoGradGuard"));
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

namespace tb::ops::cpu {

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t best = 0;
    for (int i = 0; i < 8; ++i) {  // index0..: L1d, L1i, L2, L3 on the machines here
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::string text;
      if (!(f >> text) || text.empty()) continue;
      char* end = nullptr;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      const int64_t unit = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : *end == '\0' ? 1 : 0;
      if (v > 0 && unit > 0 && v < (int64_t(1) << 40) / unit) best = std::max<int64_t>(best, v * unit);
    }
    return best > 0 ? best : int64_t(32) << 20;
  }();
  return bytes;
}

}  // namespace tb::ops::cpu
