#include "suites/autograd/semantics.h"

namespace tb::suites {
std::vector<harness::TestCase> semantics_tests() { return {}; }
}  // namespace tb::suites
