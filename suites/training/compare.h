// Comparing an engine model's parameters with a LibTorch model's, shared by the training and
// ddp suites (both end an equivalence run this way).
#pragma once
#include <string>

#include "engine/nn/module.h"
#include "reference/nn_modules.h"
#include "suites/ops/tolerance.h"

namespace tb::suites {

// The largest |engine - LibTorch| / (atol + rtol |LibTorch|) over every parameter of `m`, matched
// by name in `rp` (<= 1 passes); `where` names the worst element. Throws CheckFailed when a
// parameter has no LibTorch twin.
double worst_param_ratio(const std::vector<std::pair<std::string, Tensor>>& params, const ref::NamedTensors& rp,
                         Tolerance tol, std::string* where);
inline double worst_param_ratio(const nn::Module& m, const ref::NamedTensors& rp, Tolerance tol, std::string* where) {
  return worst_param_ratio(m.named_parameters(), rp, tol, where);
}

}  // namespace tb::suites
