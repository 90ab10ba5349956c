// The `collectives` suite: every op of dist::ProcessGroup on every backend, dtype, reduction and
// a spread of sizes, run inside each rank of a world of 1..4 ranks (Note [Distributed suites] in
// harness/suite.h). Each rank's input is a deterministic function of (case, rank), so every rank
// computes the expected result alone: integers exactly, floats against the float64 reduction.
#pragma once
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// The cases every rank runs, the same names in the same order on every rank:
// <backend>/<op>/<variant>/<dtype>/n<numel>, e.g. mpi/all_reduce/sum/float32/n1000003.
// backend: mpi, gloo, nccl (gloo's and nccl's cases skip with new_group's message where they are
// not built or cannot start: nccl without a GPU says "nccl: no GPU ...").
std::vector<harness::TestCase> collective_rank_tests(int world);

// For the watchdog test: run in every rank of an mpirun job, on `backend` ("mpi", "gloo"). Every rank runs all_reduces #1, #2,
// ...; rank `skip_rank` leaves out #`seq` and sleeps, so every other rank's watchdog must end it
// within the timeout (TRAINBENCH_DIST_TIMEOUT, 3 s if unset) with exit code 3 and a line naming
// rank `skip_rank` and #`seq`. The skipping rank, unless mpirun ends it first, leaves after
// timeout + 5 s through _exit(4) (MPI_Finalize would wait for the dead ranks). Returns 0 only
// when no rank skips (skip_rank < 0), after seq + 2 all_reduces.
int watchdog_demo_main(const std::string& backend, int skip_rank, int seq);

}  // namespace tb::suites
