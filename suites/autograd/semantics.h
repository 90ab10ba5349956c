// The autograd semantics suite: graph behaviour (accumulation, retain_graph, leaves and
// non-leaves, no_grad, inference_mode, detach, hooks, in-place checks, anomaly mode), each case
// doing the same thing with the engine and with LibTorch and comparing what happened.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::TestCase> semantics_tests();
}  // namespace tb::suites
