// Benchmarks of whole training steps (suite "training"): engine and LibTorch on the same
// weights and data, with each side's peak memory for one step.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::BenchCase> training_benches();
}  // namespace tb::suites
