// The `fsdp` suite: fully_shard checked against one LibTorch process and against the engine's DDP,
// run inside every rank of a launched world (harness/suite.h, Note [Distributed suites]). Every
// rank returns the same case names in the same order; rank 0's records carry the metrics.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// Correctness cases (fsdp_suite.cpp): each strategy against LibTorch on the concatenated batch and
// against DDP, gradient accumulation with sync off, unused and tied parameters, state dict round
// trips, clip_grad_norm_, and bad input (wrapping twice, different wrapping per rank, a parameter
// replaced after wrapping).
std::vector<harness::TestCase> fsdp_rank_tests(int world);

}  // namespace tb::suites
