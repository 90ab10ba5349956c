#include "suites/checkpoint/checkpoint_suite.h"

namespace tb::suites {
std::vector<harness::TestCase> checkpoint_tests() { return {}; }
std::vector<harness::BenchCase> checkpoint_benches() { return {}; }
}  // namespace tb::suites
