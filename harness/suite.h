// The contract between suites/ and the harness: a suite is a named list of cases; running a
// correctness case yields a Record; a benchmark case is a pair of callables (engine, LibTorch)
// that the harness times side by side with Google Benchmark. Suites register themselves from
// suites/register_all.cpp; the harness owns the CLI, the progress line and the JSON.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::harness {

// How a case ended. In JSON (docs/result.schema.json, read by reports/) the strings "pass",
// "skip", "fail", "error". Ordered by severity: where ranks or rounds disagree, the greatest wins.
enum class Status { Pass, Skip, Fail, Error };

constexpr std::string_view to_string(Status s) {
  switch (s) {
    case Status::Pass: return "pass";
    case Status::Skip: return "skip";
    case Status::Fail: return "fail";
    case Status::Error: return "error";
  }
  return "error";
}
// The status a JSON string names; nullopt for any other string.
constexpr std::optional<Status> status_from_string(std::string_view s) {
  for (Status x : {Status::Pass, Status::Skip, Status::Fail, Status::Error})
    if (to_string(x) == s) return x;
  return std::nullopt;
}
inline std::ostream& operator<<(std::ostream& os, Status s) { return os << to_string(s); }
inline void to_json(nlohmann::json& j, Status s) { j = std::string(to_string(s)); }

// One result, one JSON record (see docs/results.md).
struct Record {
  std::string suite;
  std::string case_name;
  std::string kind = "correctness";  // correctness | benchmark | scenario
  Status status = Status::Pass;
  int rank = 0;
  nlohmann::json metrics = nlohmann::json::object();     // numbers with units in their names
  nlohmann::json tolerances = nlohmann::json::object();  // e.g. {"rtol":1.3e-6,"atol":1e-5}
  double duration_s = 0;
  std::string message;  // why it failed / was skipped
  // Optional curves: name -> array of numbers, e.g. per-epoch "engine_epoch_val_accuracy" beside
  // "reference_epoch_val_accuracy" (the report plots engine_X against reference_X; names with
  // "epoch" are per epoch, others per step).
  nlohmann::json series = nlohmann::json::object();
};

struct TestCase {
  std::string name;             // "<op>/<dtype>/<variant>"
  std::function<Record()> run;  // never throws: failures are records
};

// A benchmark: both sides do the same work per call; the harness times calls.
struct BenchCase {
  std::string name;  // "matmul/float32/1024"
  std::function<void()> engine;
  std::function<void()> reference;
  double flops_per_call = 0;                        // 0 if not meaningful
  double bytes_per_call = 0;                        // bytes read + written, 0 if not meaningful
  nlohmann::json extra = nlohmann::json::object();  // copied into metrics
  // Optional: run once after the warm-up calls and before timing; its object is merged into
  // metrics (figures too slow or too stateful for the timed loop, e.g. one step's peak memory).
  std::function<nlohmann::json()> measure;
};

// Whether the run's --filter selects a case name.
using CaseFilter = std::function<bool(const std::string& case_name)>;

struct Suite {
  std::string name;  // "ops"
  std::string description;
  std::function<std::vector<TestCase>()> tests;     // may be empty
  std::function<std::vector<BenchCase>()> benches;  // may be empty
  bool run_by_default = true;                       // false: `trainbench all` runs it only when named by --suite

  // Distributed suites (Note [Distributed suites]). For each world size W here the harness
  // launches W ranks through mpirun (harness/launcher.h) and runs `rank_tests` and `rank_benches`
  // in every rank, where dist::world_from_env() gives the rank; it merges the ranks' records
  // into one per case (the worst status wins; a message names the failing ranks). Every rank
  // must produce the same case names in the same order: cases run collectives in lockstep.
  // `tests`/`benches` above still run in the parent process (e.g. a case that launches ranks
  // of its own and expects them to fail). `peer` runs in the parent after the ranks of each
  // world size, for figures of other programs (PyTorch's Gloo backend under torchrun).
  std::vector<int> world_sizes;
  std::function<std::vector<TestCase>(int world)> rank_tests;
  // Benchmarks that time collectives must agree on iteration counts across ranks, so they time
  // themselves and return records of kind "benchmark" (Google Benchmark would not).
  std::function<std::vector<TestCase>(int world)> rank_benches;
  // `wanted` tells the peer which of its case names the run's --filter selects: it measures only
  // those, and the harness does not start it when a world has none (the names are the peer's own,
  // e.g. ddp/mlp/w2/torch-gloo, so a filter on the engine's cases alone runs no peer).
  std::function<std::vector<Record>(int world, const CaseFilter& wanted)> peer;
  // Benchmarks with a peer: rounds of (the ranks' benchmarks, the peer) per world size, the order
  // alternating (ranks then peer, peer then ranks, ...) so that a change in the machine's load
  // falls on both sides; each case's numeric metrics are the mean over its passing rounds
  // (metric `rounds` says how many). Note [Benchmark rounds] in harness/distributed.cpp.
  int bench_rounds = 1;
};

// Note [Distributed suites]
// A rank process is `trainbench rank ...` (a hidden subcommand) started by mpirun with
// TRAINBENCH_DIST_DIR (a fresh folder per launch: rank logs, the watchdog's dumps, progress
// boards), TRAINBENCH_DIST_TIMEOUT and the thread count in its environment. Cases create their
// process groups with dist::new_group(backend) (groups are cheap to make per case, and a case
// that hangs is ended by the watchdog, which the harness reports as a failure of that case's
// world size with the ranks' last lines), and must leave no collective in flight on return.

// Throws std::invalid_argument on an empty or duplicate name (two suites must not share a name:
// --suite selects by it and records are keyed by it).
void register_suite(Suite s);
const std::vector<Suite>& suites();

// Called with the thread count chosen by --threads, after the engine's own setter; the LibTorch
// side registers torch::set_num_threads here so both sides of a benchmark get the same threads.
void register_thread_setter(std::function<void(int)> setter);

// Extra fields for the JSON "run" header (libtorch_version, reference_blas, engine_blas, ...).
// A later call with the same key replaces the value; the harness's own keys cannot be overridden.
void add_run_info(const std::string& key, nlohmann::json value);

}  // namespace tb::harness
