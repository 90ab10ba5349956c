#include "suites/autograd/grad_case.h"

namespace tb::suites {
std::vector<GradCase> grad_index_cases() { return {}; }
}  // namespace tb::suites
