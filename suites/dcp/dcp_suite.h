// The `dcp` suite: distributed checkpoints (engine/checkpoint/distributed.h) saved under one layout
// and loaded under another, asynchronous saves, a rank killed or out of disk in the middle of a
// save, mutated files, and the consolidated file read by an independent Python reader.
// Rank cases run in one launch at world 4; the smaller worlds are subgroups split from it.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// Rank cases (dcp_reshard.cpp, dcp_faults.cpp): the resharding matrix
// mpi/reshard/<saved>/to/<loaded>, mpi/async/..., mpi/disk_full/..., mpi/mutated/...,
// mpi/interop/consolidated. Empty unless world == 4.
std::vector<harness::TestCase> dcp_rank_tests(int world);

// Cases run in the parent process (dcp_crash.cpp): kill -9 of one rank of small worlds that save in
// a loop, started by the case itself (a killed rank would end a launched job).
std::vector<harness::TestCase> dcp_tests();

}  // namespace tb::suites
