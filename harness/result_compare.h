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
// Times per call outside [kMinTime, kMaxTime] (1 ps to 11.6 days: 5e-324 or 1e30 s are no timing)
// are dropped and counted beside the non-finite ones.
// Bounded work (docs/compare.md). Resampling value by value costs resamples x series length
// draws per case: 2000 x 20,000 for two 10,000-value series, seconds per case. So a series longer
// than CompareOptions::direct_resample (100; every run's series is shorter, and those give the
// figures they always did) draws each resample's median directly: sorted once, the median of n
// draws with replacement is sorted[floor(n U)] for U the middle order statistic of n uniforms,
// Beta(k, n + 1 - k) for the k-th (for an even n, the next one up follows from U). That is the
// same bootstrap distribution, drawn in a constant number of steps whatever n is; only the random
// numbers differ. And the whole comparison's steps (resamples x the steps of one resample of every
// case) are held under CompareOptions::work_budget (2^28, about 8 s) by fewer resamples, which the
// header then states, but not fewer than 200 (a 95% interval needs some): past that compare
// refuses the input.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tb::harness {

// Times per call that compare uses (series values, --bounds' medians); others are unusable.
inline constexpr double kMinTime = 1e-12, kMaxTime = 1e6;
// The most bytes compare reads of one input file: a result of every suite (`trainbench all`,
// 20,000 records) is 9 MiB; parsed, 32 MiB of JSON take up to about 0.6 GiB.
inline constexpr uint64_t kMaxInputBytes = uint64_t(32) << 20;

// Reads and checks a result file: JSON nested at most 128 levels, schema "trainbench.result/1",
// a run object and a records array whose entries have the fields compare reads with the right
// types, and no case twice (suite, case, rank and kind). Throws core::Error naming `source` and
// the first problem (a missing file, bad JSON, another schema version,
// records[i].series.engine_time_s not an array of numbers, a repeated case, ...).
nlohmann::json parse_result_text(std::string_view text, const std::string& source);
nlohmann::json read_result_file(const std::filesystem::path& path);
// The bytes of a regular file of at most kMaxInputBytes; core::Error for anything else (no such
// file, a directory: "is a directory, not a <what>", a FIFO or a device, refused before reading).
std::string read_input_file(const std::filesystem::path& path, const std::string& what);

struct CompareOptions {
  double threshold = 0.05;  // 5%: a slowdown must exceed it to count
  int resamples = 2000;
  uint64_t seed = 20261203;
  // Verdicts from the engine/LibTorch ratio's change where both runs timed LibTorch (engine time
  // elsewhere): for runs on shared machines, whose load shifts a whole run's times.
  bool relative = false;
  // Note [Compare statistics], "Bounded work": series longer than this are resampled through
  // their median's order statistic; a comparison's resampling steps stay under work_budget.
  std::size_t direct_resample = 100;
  double work_budget = double(uint64_t(1) << 28);
};

enum class Verdict { Slower, Faster, TooNoisy, Same, NoSamples };
const char* to_string(Verdict v);

// A ratio with its 95% bootstrap interval; `valid` false when either side had no samples.
struct RatioCI {
  bool valid = false;
  double ratio = 0, lo = 0, hi = 0;
};

struct CaseComparison {
  std::string suite, case_name, kind;
  int rank = 0;
  bool show_kind = false;  // another kind of record in the files has the same name: key() says which
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
  std::size_t in_both = 0;  // cases in both files; 0: nothing was compared
  double threshold = 0.05;
  int resamples = 0, resamples_asked = 0;  // fewer than asked past CompareOptions::work_budget
  bool relative = false;
  bool worse_status() const;  // a record went from pass/skip to fail/error
  std::size_t count(Verdict v) const;
  bool regression() const { return worse_status() || count(Verdict::Slower) > 0; }
};

// Throws core::Error when the work would exceed opt.work_budget even at 200 resamples.
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
  std::string problem;  // times outside [kMinTime, kMaxTime]: no usable ratio, which counts as over
  bool over() const { return !problem.empty() || !(ratio <= bound); }
};
struct BoundsCheck {
  std::vector<BoundsRow> rows;         // every checked row, unusable ones and worst ratio over bound first
  std::size_t not_passed = 0;          // records of the suite not passed (no figure to check)
  std::vector<std::string> unchecked;  // passed rows without an engine and a LibTorch time
  std::size_t over() const;
};
BoundsCheck check_bounds(const nlohmann::json& result, const PerfBounds& bounds);
// For a check without rows: "<source>: no passed benchmark row of suite ops with engine and LibTorch
// times (...): nothing to check", one line saying what the run had instead.
std::string nothing_to_check(const BoundsCheck& c, const PerfBounds& b, const std::string& source);
std::string bounds_text(const BoundsCheck& c, const PerfBounds& b, bool markdown);

}  // namespace tb::harness
