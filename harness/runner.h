// The harness's engine room, callable without the CLI (harness/tests use it directly): pick
// suites and cases, run correctness cases and benchmarks into Records, build and write the
// versioned result JSON described in docs/results.md.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/suite.h"

namespace tb::harness {

inline constexpr const char* kSchemaId = "trainbench.result/1";

// A bad command line or selection (unknown suite, invalid regex): the CLI prints it, exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Selection {
  std::vector<std::string> suites;   // empty: every suite with run_by_default (all, for `list`)
  std::string filter;                // ECMAScript regex searched in the case name; empty: all
  bool include_non_default = false;  // with no suite named, also take run_by_default=false suites
};

// Suites named by `sel`, in registration order. Throws UsageError for an unknown name, listing
// the known suites.
std::vector<const Suite*> select_suites(const Selection& sel);

struct PlannedTest {
  std::string suite;
  TestCase test;
};
struct PlannedBench {
  std::string suite;
  BenchCase bench;
};

// Cases of the selected suites whose name matches the filter. Throws UsageError on a bad regex.
std::vector<PlannedTest> collect_tests(const Selection& sel);
std::vector<PlannedBench> collect_benches(const Selection& sel);
// Benchmarks that run in this process and time themselves, returning records of kind "benchmark"
// (work Google Benchmark cannot repeat: the scenario soak launches ranks for every run), added
// to the registered suite `suite`; `bench` and `all` run them as cases, `list` lists them as
// benchmarks. Throws std::invalid_argument for an unknown suite or a second call for one.
void register_timed_benches(const std::string& suite, std::function<std::vector<TestCase>()> cases);
// The timed benchmarks of the selected suites whose name matches the filter.
std::vector<PlannedTest> collect_timed(const Selection& sel);

// The `[12/340] ops matmul/float32/1024 ... pass` line on a stream (stderr in the CLI); one
// Progress can span tests and benchmarks so `all` counts them together. Null stream: silent.
class Progress {
 public:
  // `done`: cases already counted (a rank process continues its parent's numbering).
  Progress(std::ostream* out, std::size_t total, std::size_t done = 0) : out_(out), total_(total), done_(done) {}
  void start(const std::string& suite, const std::string& name);
  void finish(const Record& r);
  // Cases whose lines another process printed (the ranks of a distributed suite).
  void advance(std::size_t n) { done_ += n; }
  std::size_t done() const { return done_; }
  std::size_t total() const { return total_; }

 private:
  std::ostream* out_;
  std::size_t total_;
  std::size_t done_;
};

// Sets the engine's threads and calls every registered thread setter. n < 1: all cores.
// Returns the count applied.
int apply_threads(int n);

// Runs every case; a case that throws becomes an "error" record instead of ending the run.
// suite/case_name are filled in when the case left them empty; duration_s when it left it 0.
std::vector<Record> run_tests(const std::vector<PlannedTest>& tests, Progress* progress = nullptr);

struct BenchOptions {
  int repetitions = 5;      // Google Benchmark repetitions per side
  double min_time_s = 0.1;  // minimum time per repetition
  int threads = 1;          // recorded in each record's metrics (apply_threads sets them)
};

// Times engine and reference of every case side by side with Google Benchmark, in-process, and
// returns one "benchmark" record per case (metrics listed in docs/results.md). An exception from
// either side becomes an "error" record.
std::vector<Record> run_benches(const std::vector<PlannedBench>& benches, const BenchOptions& opt,
                                Progress* progress = nullptr);

struct Counts {
  std::size_t passed = 0, failed = 0, skipped = 0, errors = 0;
  bool ok() const { return failed == 0 && errors == 0; }
};
Counts count(const std::vector<Record>& records);

// A record as JSON. Metrics and tolerances are made schema-safe: numbers and strings are kept,
// a non-finite number becomes "nan"/"inf"/"-inf" (JSON has no such numbers), anything else its
// JSON text.
nlohmann::json record_to_json(const Record& r);
// The inverse, for records other processes wrote (ranks, PyTorch peers); a missing field takes
// Record's default, a missing or unknown status Status::Error (the message says which), a missing kind `default_kind`.
Record record_from_json(const nlohmann::json& j, const std::string& default_kind = "correctness");

struct RunInfo {
  std::string command;  // argv joined with spaces
  int threads = 1;
};

// {"schema": kSchemaId, "run": {...}, "records": [...]}; the run header carries the build's
// facts (time, git revision, host, build type, compiler, ...) and everything add_run_info added.
nlohmann::json make_result(const RunInfo& info, const std::vector<Record>& records);

// Writes the JSON by the rules of Note [Output files] (harness/output_file.h): a regular file
// atomically (temporary in the same folder, then rename), a device or FIFO in place.
void write_result(const std::filesystem::path& path, const nlohmann::json& result);

}  // namespace tb::harness
