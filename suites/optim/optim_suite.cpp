#include "suites/optim/optim_suite.h"

namespace tb::suites {
std::vector<harness::TestCase> optim_tests() { return {}; }
}  // namespace tb::suites
