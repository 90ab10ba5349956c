// The `comm` benchmarks, nccl-tests style: all_reduce, all_gather, reduce_scatter and broadcast
// of float32 over a sweep of message sizes, timed inside every rank (rank_benches) for these
// implementations on the same buffers:
//   engine       dist::new_group("mpi"), each call issued and waited on
//   engine-detail  all_reduce only: the same on an MPI group with Options::Debug::Detail
//                (TRAINBENCH_DIST_DEBUG=DETAIL's fingerprint exchange before each call), so DETAIL's
//                cost reads against `engine` at every size in one run
//   engine-gloo  dist::new_group("gloo") (skip records when Gloo is not built or cannot start)
//   mpi          the raw MPI call on a duplicate of MPI_COMM_WORLD: the floor of our overhead
// and, from the parent after each world size (peer), PyTorch's Gloo backend (`torch-gloo`,
// reference/dist/torch_comm_bench.py under torchrun). Cases are named
// `<op>/float32/<bytes>/w<world>/<impl>`; docs/results.md ("comm") defines the metrics.
//
// ddp_peer runs reference/dist/torch_ddp_bench.py: PyTorch DDP on Gloo for the `ddp` suite's
// models, records `ddp/<model>/w<world>/torch-gloo`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// Note [Comm iteration policy]
// Every implementation, the Python peer included, times one (op, size) the same way: 2 warm-up
// calls (the first one's result checked: every rank sends rank+1, so each output element is
// known exactly), one timed probe call, n = clamp(ceil(target_s / probe), 3, 1000), then 5
// repetitions of ceil(n / 5) calls, each between a barrier and the clock; a call is issued and
// waited on. Each repetition's per-call mean is reduced over ranks with MAX (the slowest rank's:
// a collective ends when its last rank does), and so is the probe, so every rank runs the same
// calls and reports the same figures: time_s is the median repetition, time_min_s/time_max_s
// the extremes. The median keeps one descheduled repetition (2 shared cores, oversubscribed
// ranks) from moving the figure.

// The sweep, from the environment:
//   TRAINBENCH_COMM_SWEEP      full (default: 8 B, then powers of 4 from 16 B to 256 MiB, 0.2 s per
//                              point) or quick (8 B .. 4 MiB, 0.1 s per point; the main job's)
//   TRAINBENCH_COMM_MAX_BYTES  the largest message (overrides the sweep's)
//   TRAINBENCH_COMM_TARGET_S   seconds of timed calls per point (overrides the sweep's)
// Throws std::invalid_argument naming the variable on a value it cannot read.
struct CommSweep {
  std::vector<std::string> ops;  // all_reduce, all_gather, reduce_scatter, broadcast
  std::vector<int64_t> sizes;    // nominal message sizes in bytes (the case names')
  double target_s = 0.2;
};
CommSweep comm_sweep_from_env();

// nccl-tests' busbw / algbw: all_reduce 2(P-1)/P, all_gather and reduce_scatter (P-1)/P,
// broadcast 1.
double comm_bus_factor(const std::string& op, int world);

// Elements of one rank's chunk and the bytes measured for a nominal size: all_gather's output
// and reduce_scatter's input hold `world` chunks, so their size rounds down to a multiple of
// world * 4 bytes (nccl-tests' count / nranks), never below one element per rank.
struct CommShape {
  int64_t chunk = 0;  // all_reduce/broadcast: the buffer's elements
  int64_t bytes = 0;  // the `bytes` metric, algbw's numerator
};
CommShape comm_shape(const std::string& op, int64_t nominal_bytes, int world);

std::string comm_case_name(const std::string& op, int64_t nominal_bytes, int world, const std::string& impl);

// Run inside every rank, same names in the same order (op, then size, then impl).
std::vector<harness::TestCase> comm_rank_benches(int world);

// Run in the parent after the ranks of `world`: the Python peers, each under a timeout
// (TRAINBENCH_PEER_TIMEOUT seconds, default 1800) after which its whole process group is killed.
// Threads per rank: TRAINBENCH_RANK_THREADS (default 1), as the engine's ranks get. A peer that
// fails leaves error records for the cases it did not produce; without the project's Python
// (harness/project_python.h) the cases are skipped. Only the cases `wanted` selects are run and returned;
// none selected, the peer is not started.
std::vector<harness::Record> comm_peer(int world, const harness::CaseFilter& wanted);
std::vector<harness::Record> ddp_peer(int world, const harness::CaseFilter& wanted);

}  // namespace tb::suites
