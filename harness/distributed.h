// Running distributed suites (Note [Distributed suites] in suite.h): the parent launches the
// ranks once per world size through the launcher, each rank (`trainbench rank`, hidden) runs
// the suite's rank cases and appends one JSON line per finished case to a file of its own, and
// the parent merges the ranks' lines into one record per case. A world that hangs or crashes
// leaves the cases it finished intact and turns the case in flight into an error record that
// carries the launcher's diagnosis (every rank's last lines, the watchdog's verdict).
#pragma once
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness/runner.h"

namespace tb::harness {

struct DistRunOptions {
  std::string filter;
  bool tests = true, benches = false;  // rank_tests / rank_benches (+ peer)
  int threads = 1;                     // the run's --threads; each rank gets max(1, threads / W)
  std::chrono::seconds launch_timeout{1800};
  std::string hostfile;                    // empty: every rank on this host
  std::map<std::string, std::string> env;  // exported to mpirun and every rank (e.g. HostsFixture::launch_env)
  std::filesystem::path work_dir;          // a fresh folder per launch is made below it
};

// Sets TRAINBENCH_RANK_CPUS in this process's environment to cores of its own for each of `world`
// ranks of `rank_threads` threads when they run on this machine (`on_this_machine`), fit its
// cores and TRAINBENCH_BIND is not "none"; clears it otherwise. Returns the value, or "".
// Note [A core of its own] in engine/dist/placement.cpp.
std::string place_ranks(int world, int rank_threads, bool on_this_machine);

// A rank case's name with the world size in it: "<name>/w<W>" unless it already has "/w<W>".
std::string rank_case_name(const std::string& name, int world);

// The rank cases of `s` for `world` (tests or benches) whose name matches `filter`.
std::vector<TestCase> rank_cases(const Suite& s, int world, bool benches, const std::string& filter);

// How many records run_distributed will produce for progress counting (peer records excluded;
// benchmarks counted once per round, Suite::bench_rounds).
std::size_t count_rank_cases(const Suite& s, const DistRunOptions& o);

// One record per case from several rounds of the same cases (Note [Benchmark rounds]): numeric
// metrics are the means over the rounds where the case passed, status and message come from the
// worst round, other fields from the first; with more than one round, metric `rounds` says how
// many were averaged.
std::vector<Record> average_rounds(const std::vector<std::vector<Record>>& rounds);

// Launches every world size of `s` and returns the merged records, then the peer's.
std::vector<Record> run_distributed(const Suite& s, const DistRunOptions& o, Progress* progress);

// The hidden `trainbench rank` subcommand.
struct RankOptions {
  std::string suite, filter;
  int world = 1;
  bool benches = false;
  int threads = 1;
  std::filesystem::path out_dir;
  std::size_t progress_start = 0, progress_total = 0;
};
int rank_main(const RankOptions& o);

}  // namespace tb::harness
