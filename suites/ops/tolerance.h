// Comparison tolerances, per dtype, in one place. The defaults are torch.testing.assert_close's:
// |actual - expected| <= atol + rtol * |expected|, NaN equal to NaN, integers and bool exact.
#pragma once
#include "engine/core/dtype.h"

namespace tb::suites {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

inline Tolerance default_tolerance(core::DType t) {
  switch (t) {
    case core::DType::Float32: return {1.3e-6, 1e-5};
    case core::DType::Float64: return {1e-7, 1e-7};
    case core::DType::BFloat16: return {1.6e-2, 1e-5};
    case core::DType::Float16: return {1e-3, 1e-5};
    default: return {0, 0};
  }
}

// Gradients pass through more arithmetic than one op's forward: a little looser than
// default_tolerance for float32.
inline Tolerance grad_tolerance(core::DType t) {
  switch (t) {
    case core::DType::Float32: return {1e-5, 1e-5};
    case core::DType::Float64: return {1e-7, 1e-7};
    case core::DType::BFloat16: return {1.6e-2, 1e-2};
    case core::DType::Float16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

}  // namespace tb::suites
