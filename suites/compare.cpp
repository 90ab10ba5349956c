#include "suites/compare.h"

#include <algorithm>
#include <cmath>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"
#include "engine/tensor/factories.h"

namespace tb::suites {

Diff compare_values(const tb::Tensor& actual, const tb::Tensor& expected, Tolerance tol) {
  Diff d;
  tb::Tensor a = actual.to(DType::Float64).contiguous(), e = expected.to(DType::Float64).contiguous();
  const double* pa = a.data_ptr<double>();
  const double* pe = e.data_ptr<double>();
  double err2 = 0, ref2 = 0;
  auto mismatch = [&](int64_t i, std::string what) {
    if (d.mismatches++ == 0) d.first = std::move(what), d.first_index = i;
  };
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = pa[i], y = pe[i];
    if (const double ratio = std::fabs(x - y) / (tol.atol + tol.rtol * std::fabs(y)); ratio > d.worst_ratio) {
      d.worst_ratio = ratio;
      d.worst_index = i;
      d.worst_actual = x, d.worst_expected = y;
    }
    if (std::isnan(x) && std::isnan(y)) continue;
    d.nan = d.nan || std::isnan(x) || std::isnan(y);
    if (std::isinf(y) || std::isinf(x)) {
      if (x != y)
        mismatch(i, "at flat index " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y));
      continue;
    }
    const double diff = std::fabs(x - y);
    d.max_abs = std::max(d.max_abs, diff);
    if (y != 0) d.max_rel = std::max(d.max_rel, diff / std::fabs(y));
    err2 += diff * diff;
    ref2 += y * y;
    if (!(diff <= tol.atol + tol.rtol * std::fabs(y)))
      mismatch(i, "at flat index " + std::to_string(i) + ": engine " + std::to_string(x) + " vs LibTorch " +
                      std::to_string(y));
  }
  d.nmse = ref2 > 0 ? err2 / ref2 : err2;
  return d;
}

void record_diff(harness::Record& rec, const Diff& d) {
  rec.metrics["max_abs"] = std::max(rec.metrics.value("max_abs", 0.0), d.max_abs);
  rec.metrics["max_rel"] = std::max(rec.metrics.value("max_rel", 0.0), d.max_rel);
  rec.metrics["nmse"] = std::max(rec.metrics.value("nmse", 0.0), d.nmse);
}

bool compare_into(const std::string& what, tb::Tensor actual, tb::Tensor expected, Tolerance tol,
                  harness::Record& rec) {
  if (!actual.defined() && !expected.defined()) return true;
  if (!actual.defined()) actual = tb::zeros(expected.sizes(), expected.dtype());
  if (!expected.defined()) expected = tb::zeros(actual.sizes(), actual.dtype());
  if (actual.sizes() != expected.sizes() || actual.dtype() != expected.dtype()) {
    rec.status = harness::Status::Fail;
    rec.message = what + ": engine " + core::name(actual.dtype()) + core::to_string(actual.sizes()) + " vs LibTorch " +
                  core::name(expected.dtype()) + core::to_string(expected.sizes());
    return false;
  }
  const Diff d = compare_values(actual, expected, tol);
  record_diff(rec, d);
  if (d.mismatches == 0) return true;
  rec.status = harness::Status::Fail;
  rec.message = mismatch_message(what, d, actual.numel(), tol);
  return false;
}

std::string mismatch_message(const std::string& what, const Diff& d, int64_t numel, Tolerance tol) {
  return what + ": " + std::to_string(d.mismatches) + " of " + std::to_string(numel) +
         " elements outside rtol=" + std::to_string(tol.rtol) + " atol=" + std::to_string(tol.atol) + "; first " +
         d.first;
}

}  // namespace tb::suites
