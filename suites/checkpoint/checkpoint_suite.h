// The checkpoint suite: the safetensors layout (read back by an independent reader), training
// state round trips, atomic saves under kill -9, the loader against mutated and hostile files;
// and the save/load throughput benchmark beside torch::save.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::TestCase> checkpoint_tests();
std::vector<harness::BenchCase> checkpoint_benches();
}  // namespace tb::suites
