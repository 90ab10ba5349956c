// The differential op fuzz suite: seeded random compositions of 3-8 differentiable ops over odd
// layouts, run in the engine and in LibTorch on the same bytes, compared on values, on the input's
// gradient, on which errors are raised and on how the result can be viewed. See opfuzz.cpp.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// The fixed-budget batches (`trainbench test --suite opfuzz`; TRAINBENCH_OPFUZZ_BUDGET and
// TRAINBENCH_SEED change the budget and the seeds).
std::vector<harness::TestCase> opfuzz_tests();

}  // namespace tb::suites
