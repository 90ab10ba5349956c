// Comparing two result files (`trainbench compare`, docs/compare.md) and checking one run's
// engine/LibTorch ratios against bounds (ci/perf_bounds.json). No CLI here, so the fuzz target
// (suites/fuzz/fuzz_result_compare.cpp) builds it without CLI11 or LibTorch.
//
// Note [Compare statistics]
// The figure compared is the median time per call of a case's repetitions (series.engine_time_s,
// else series.reference_time_s for records that time only a reference, e.g. a torch peer), as
// NEW / BASE. Its 95% confidence interval is a percentile bootstrap: both files' repetitions are
// resampled with replacement (2000 times, a fixed seed mixed with the case name, so the output
// is reproducible and independent of the order of cases) and the ratio of the resampled medians
// taken. Bootstrap rather than Mann-Whitney because the question is "how much slower, give or
// take", a ratio with an interval, which is what the gate compares with the threshold; a rank test
// answers only "is there a shift" with a p-value, says nothing of its size, and with 5 repetitions
// per side cannot resolve anything finer than its 252 orderings. The bootstrap assumes nothing
// about the shape of the noise (timings are skewed: load only ever adds time). With few
// repetitions its interval is coarse (with 5, it spans roughly the middle three values of each
// side): more repetitions (--repetitions) give sharper verdicts.
// Verdict, with t the threshold: slower when the whole interval is above 1 + t, faster when it is
// below 1 / (1 + t), same when it lies within [1 / (1 + t), 1 + t], else too noisy to tell.
// Beside it, when both runs timed LibTorch too, the change of the engine/LibTorch ratio (the
// same bootstrap over four series): a slower machine slows both sides, so this ratio moves only
// when the engine itself changed. It is shown, not gated on: the primary figure is what users wait for.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::harness {

// Reads and checks a result file: JSON nested at most 128 levels, schema "trainbench.result/1",
// a run object and a records array whose entries have the fields compare reads with the right
// types. Throws core::Error naming `source` and the first problem (a missing file, bad JSON, another
// schema version, records[i].series.engine_time_s not an array of numbers, ...).
nlohmann::json parse_result_text(std::string_view text, const std::string& source);
nlohmann::json read_result_file(const std::filesystem::path& path);

struct CompareOptions {
  double threshold = 0.05;  // 5%: a slowdown must exceed it to count
  int resamples = 2000;
  uint64_t seed = 20261203;
  // Verdicts from the engine/LibTorch ratio's change where both runs timed LibTorch (engine time
  // elsewhere): for runs on shared machines, whose load shifts a whole run's times.
  bool relative = false;
};

enum class Verdict { Slower, Faster, TooNoisy, Same, NoSamples };
const char* to_string(Verdict v);

// A ratio with its 95% bootstrap interval; `valid` false when either side had no samples.
struct RatioCI {
  bool valid = false;
  double ratio = 0, lo = 0, hi = 0;
};

struct CaseComparison {
  std::string suite, case_name;
  int rank = 0;
  std::string base_status, new_status, new_message;
  std::string series;  // "engine_time_s" or "reference_time_s": what `time` compares
  std::size_t base_n = 0, new_n = 0;
  double base_median_s = 0, new_median_s = 0;
  RatioCI time;                                              // NEW / BASE median time
  RatioCI vs_reference;                                      // (engine/LibTorch in NEW) / (engine/LibTorch in BASE)
  double base_engine_over_ref = 0, new_engine_over_ref = 0;  // 0: not timed
  Verdict verdict = Verdict::NoSamples;
  std::string note;  // e.g. values dropped as not finite
  std::string key() const;
};

struct Comparison {
  std::string base_source, new_source, base_run, new_run;  // run: "time, git rev, host"
  std::vector<CaseComparison> status_changes;              // any kind of record whose status changed
  std::vector<CaseComparison> benchmarks;                  // passed in both files; slower first
  std::vector<std::string> only_base, only_new;
  double threshold = 0.05;
  int resamples = 0;
  bool relative = false;
  bool worse_status() const;  // a record went from pass/skip to fail/error
  std::size_t count(Verdict v) const;
  bool regression() const { return worse_status() || count(Verdict::Slower) > 0; }
};

Comparison compare_results(const nlohmann::json& base, const nlohmann::json& neu, const CompareOptions& opt = {},
                           const std::string& base_source = "BASE", const std::string& new_source = "NEW");
std::string comparison_text(const Comparison& c);
std::string comparison_markdown(const Comparison& c);

// ci/perf_bounds.json (docs/compare.md): per op family (the case name up to its first '/') the
// largest engine/LibTorch time ratio a passing benchmark of `suite` may show in one run.
struct PerfBounds {
  std::string suite;
  double default_bound = 0;
  std::vector<std::pair<std::string, double>> families;
  double bound_for(const std::string& family) const;
};
PerfBounds parse_perf_bounds(std::string_view text, const std::string& source);

struct BoundsRow {
  std::string case_name, family;
  double ratio = 0;  // min(median ratio, min-time ratio): engine over LibTorch
  double bound = 0;
  bool over() const { return ratio > bound; }
};
struct BoundsCheck {
  std::vector<BoundsRow> rows;  // every checked row, worst ratio over bound first
  std::size_t not_passed = 0;   // records of the suite not passed (no figure to check)
  std::size_t over() const;
};
BoundsCheck check_bounds(const nlohmann::json& result, const PerfBounds& bounds);
std::string bounds_text(const BoundsCheck& c, const PerfBounds& b, bool markdown);

}  // namespace tb::harness
