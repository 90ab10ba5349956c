// The watchdog check of the `collectives` suite: it runs in the parent process and launches
// ranks of its own, one of which skips a collective, and expects them to fail fast and say why.
#pragma once
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

std::vector<harness::TestCase> watchdog_tests();  // also the mismatch and dead-rank checks

// The mismatch and dead-rank checks (mismatch_launch.cpp, Note [Mismatch and dead-rank checks]).
std::vector<harness::TestCase> mismatch_tests();
std::vector<harness::TestCase> dead_rank_tests();
std::vector<harness::TestCase> sigterm_tests();
std::vector<harness::TestCase> place_tests();  // ranks whose environment MPI contradicts
int sigterm_demo_main(const std::string& backend, const std::string& phase);
int mismatch_demo_main(const std::string& backend);
int dead_rank_demo_main(const std::string& backend, const std::string& how, int victim, int seq);

// A rank of such a launch: called from register_all when TRAINBENCH_WATCHDOG_DEMO is set
// ("<backend>:<skip_rank>:<seq>", "mismatch:<backend>", "dead:<backend>:exit|kill:<rank>:<seq>" or
// "sigterm:<backend>:alive|gone");
// returns the process's exit status.
int watchdog_demo_from_env(const char* spec);

}  // namespace tb::suites
