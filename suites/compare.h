// The suites' one elementwise comparison of an engine tensor with its expected value (LibTorch's,
// a golden file's, a formula's), in float64 under |actual - expected| <= atol + rtol |expected|
// (suites/ops/tolerance.h): NaN matches NaN, an infinity only the same infinity.
#pragma once
#include <cstdint>
#include <string>

#include "engine/tensor/tensor.h"
#include "harness/suite.h"
#include "suites/ops/tolerance.h"

namespace tb::suites {

struct Diff {
  double max_abs = 0, max_rel = 0, nmse = 0;
  int64_t mismatches = 0;
  std::string first;         // the first mismatch, for the message
  int64_t first_index = -1;  // its flat index
  bool nan = false;          // one side NaN where the other is not
  // The largest |actual - expected| / (atol + rtol |expected|) (<= 1 passes; NaN ratios are not
  // counted) and where it is.
  double worst_ratio = 0;
  int64_t worst_index = -1;
  double worst_actual = 0, worst_expected = 0;
};
// `actual` and `expected` have one shape (any dtypes; both are read as float64).
Diff compare_values(const tb::Tensor& actual, const tb::Tensor& expected, Tolerance tol);

// Folds `d` into rec's max_abs, max_rel and nmse metrics (the worst over the record's comparisons).
void record_diff(harness::Record& rec, const Diff& d);
// "<what>: N of M elements outside rtol=R atol=A; first <d.first>".
std::string mismatch_message(const std::string& what, const Diff& d, int64_t numel, Tolerance tol);

// The whole check of one result: compares two tensors (undefined = zeros of the other's shape)
// under tol, folds the differences into rec's metrics, and on a shape, dtype or value mismatch
// sets rec to fail with the reason and returns false.
bool compare_into(const std::string& what, tb::Tensor actual, tb::Tensor expected, Tolerance tol, harness::Record& rec);

}  // namespace tb::suites
