// The watchdog check of the `collectives` suite: it runs in the parent process and launches
// ranks of its own, one of which skips a collective, and expects them to fail fast and say why.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

std::vector<harness::TestCase> watchdog_tests();

// A rank of such a launch: called from register_all when TRAINBENCH_WATCHDOG_DEMO is set
// ("<backend>:<skip_rank>:<seq>"); returns the process's exit status.
int watchdog_demo_from_env(const char* spec);

}  // namespace tb::suites
