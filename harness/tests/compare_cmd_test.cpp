// `trainbench compare` on synthetic results with known outcomes (a clear slowdown, identical runs,
// huge noise, a status change, cases in one file only), hostile input (truncated JSON, wrong types,
// NaN, empty series, another schema), the --bounds gate with ci/perf_bounds.json against a 10x
// slower row, and the per-repetition series the benchmark runner now records. Then what an
// adversarial tester found: FIFOs, devices and oversized files; 10,000-value series (bounded work,
// the same interval); bounds rows without a usable ratio; comparisons of nothing and repeated
// cases; absurd times; loose --threshold values, an empty --bounds, and names that break tables;
// a --bounds run with nothing to check, and --relative with --bounds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "harness/compare_cmd.h"
#include "harness/result_compare.h"
#include "harness/runner.h"
#include "harness/tests/cli_run.h"

namespace {

namespace fs = std::filesystem;
namespace th = tb::harness;
using nlohmann::json;
using th::testing::CliRun;
using th::testing::run;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

json bench(const std::string& c, std::vector<double> eng, std::vector<double> ref = {},
           const std::string& suite = "ops") {
  json r = {{"suite", suite},
            {"case", c},
            {"kind", "benchmark"},
            {"status", "pass"},
            {"rank", 0},
            {"metrics", json::object()},
            {"tolerances", json::object()},
            {"duration_s", 1.0},
            {"message", ""}};
  if (!eng.empty()) r["series"]["engine_time_s"] = eng;
  if (!ref.empty()) r["series"]["reference_time_s"] = ref;
  return r;
}

json correctness(const std::string& c, const std::string& status, const std::string& message = "") {
  return {{"suite", "ops"},
          {"case", c},
          {"kind", "correctness"},
          {"status", status},
          {"rank", 0},
          {"metrics", json::object()},
          {"tolerances", json::object()},
          {"duration_s", 0.1},
          {"message", message}};
}

json result(std::vector<json> records, const std::string& time = "2026-12-03T10:00:00Z") {
  return {{"schema", "trainbench.result/1"},
          {"run", {{"time", time}, {"git_revision", "abc1234"}, {"host", "ci"}}},
          {"records", records}};
}

std::vector<double> scaled(std::vector<double> v, double k) {
  for (double& x : v) x *= k;
  return v;
}

const std::vector<double> kSteady = {1.00e-3, 1.01e-3, 0.99e-3, 1.02e-3, 1.00e-3, 0.98e-3, 1.01e-3};

class CompareCli : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() / ("tb_compare_test_" + std::to_string(getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string write(const std::string& name, const json& j) { return write(name, j.dump(1)); }
  CliRun compare(const json& base, const json& neu, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"compare", write("base.json", base), write("new.json", neu)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
};

TEST_F(CompareCli, ClearSlowdownIsSlowerAndExits1) {
  const CliRun r = compare(result({bench("max/float32/16M", kSteady)}),
                           result({bench("max/float32/16M", scaled(kSteady, 2.0))}));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "1 slower")) << r.out;
  EXPECT_TRUE(has(r.out, "2.00x [")) << r.out;
  EXPECT_TRUE(has(r.out, "REGRESSION")) << r.out;
}

TEST_F(CompareCli, IdenticalIsSame) {
  const json j = result({bench("add/float32/16M", kSteady, kSteady)});
  const CliRun r = compare(j, j);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // The interval is that of two independent resamplings of the same 7 values: narrow, around 1.
  EXPECT_TRUE(has(r.out, "1.00x [0.98x, 1.02x]")) << r.out;
  EXPECT_TRUE(has(r.out, " same")) << r.out;
  EXPECT_TRUE(has(r.out, "0 slower, 0 faster, 1 same")) << r.out;
}

TEST_F(CompareCli, FasterIsFasterAndExits0) {
  const CliRun r = compare(result({bench("sum/float32/16M", kSteady)}),
                           result({bench("sum/float32/16M", scaled(kSteady, 0.5))}));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "1 faster")) << r.out;
}

TEST_F(CompareCli, HugeNoiseIsTooNoisy) {
  const std::vector<double> base = {1e-3, 4e-3, 1e-3, 6e-3, 1.2e-3};
  const std::vector<double> neu = {1.3e-3, 5e-3, 1e-3, 7e-3, 4e-3};
  const CliRun r = compare(result({bench("gelu/float32/16M", base)}), result({bench("gelu/float32/16M", neu)}));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "1 too noisy to tell")) << r.out;
}

// One or two repetitions on a side carry no noise estimate: the bootstrap interval of one value
// is the value (1.20x [1.20x, 1.20x] read as a regression, and swapped as a speed-up). No verdict
// then, and no gate failure; three per side get one.
TEST_F(CompareCli, TooFewRepetitionsGiveNoVerdict) {
  for (const std::vector<double>& one : {std::vector<double>{1.0e-3}, std::vector<double>{1.0e-3, 1.01e-3}}) {
    const CliRun r = compare(result({bench("max/float32/16M", one)}),
                             result({bench("max/float32/16M", scaled(one, 1.2))}));
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "1 too noisy to tell")) << r.out;
    EXPECT_TRUE(has(r.out, std::to_string(one.size()) + " repetition(s) on a side: a verdict needs 3")) << r.out;
  }
  const CliRun three = compare(result({bench("max/float32/16M", {1.0e-3, 1.01e-3, 0.99e-3})}),
                               result({bench("max/float32/16M", {2.0e-3, 2.02e-3, 1.98e-3})}));
  EXPECT_EQ(three.code, 1) << three.out;
  EXPECT_TRUE(has(three.out, "1 slower")) << three.out;
}

// A small, noisy slowdown (under the threshold's reach) must not fail the gate; a threshold of 50%
// lets a clear 1.3x slowdown pass too.
TEST_F(CompareCli, ThresholdDecides) {
  const json base = result({bench("mul/float32/16M", kSteady)});
  const json neu = result({bench("mul/float32/16M", scaled(kSteady, 1.3))});
  EXPECT_EQ(compare(base, neu).code, 1);
  const CliRun r = compare(base, neu, {"--threshold", "50%"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "threshold 50%")) << r.out;
  EXPECT_EQ(compare(base, neu, {"--threshold", "50"}).code, 0);
  for (const char* bad : {"abc", "-5%", "nan", "5%%", ""}) {
    const CliRun b = compare(base, neu, {"--threshold", bad});
    EXPECT_EQ(b.code, 2) << bad;
    EXPECT_TRUE(has(b.err, "--threshold")) << b.err;
  }
}

TEST_F(CompareCli, StatusChangesFirstAndNewFailureExits1) {
  const json base = result({bench("add/float32/16M", kSteady), correctness("add/float32/contiguous", "pass"),
                            correctness("mul/float32/contiguous", "fail", "was wrong")});
  const json neu = result({bench("add/float32/16M", kSteady),
                           correctness("add/float32/contiguous", "fail", "max_abs 0.5 over atol"),
                           correctness("mul/float32/contiguous", "pass")});
  const CliRun r = compare(base, neu);
  EXPECT_EQ(r.code, 1) << r.out;
  const auto status = r.out.find("Status changes (2)"), benches = r.out.find("Benchmarks in both");
  ASSERT_NE(status, std::string::npos) << r.out;
  ASSERT_NE(benches, std::string::npos) << r.out;
  EXPECT_LT(status, benches);
  // The newly failing one leads.
  EXPECT_LT(r.out.find("ops/add/float32/contiguous"), r.out.find("ops/mul/float32/contiguous")) << r.out;
  EXPECT_TRUE(has(r.out, "max_abs 0.5 over atol")) << r.out;
  // A fix alone is listed but passes.
  const CliRun fixed = compare(result({correctness("x/float32/a", "fail")}),
                               result({correctness("x/float32/a", "pass")}));
  EXPECT_EQ(fixed.code, 0) << fixed.out;
  EXPECT_TRUE(has(fixed.out, "Status changes (1)")) << fixed.out;
}

TEST_F(CompareCli, CasesInOneFileAreListed) {
  const CliRun r = compare(result({bench("a/float32/1", kSteady), bench("gone/float32/1", kSteady)}),
                           result({bench("a/float32/1", kSteady), bench("new/float32/1", kSteady)}));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "Only in BASE (1)\n\n  ops/gone/float32/1")) << r.out;
  EXPECT_TRUE(has(r.out, "Only in NEW (1)\n\n  ops/new/float32/1")) << r.out;
}

TEST_F(CompareCli, MarkdownTable) {
  const CliRun r = compare(result({bench("max/float32/16M", kSteady, kSteady)}),
                           result({bench("max/float32/16M", scaled(kSteady, 3), kSteady)}), {"--markdown"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(has(r.out, "| case | BASE | NEW | NEW/BASE [95% CI] |")) << r.out;
  EXPECT_TRUE(has(r.out, "|---|---:|")) << r.out;
  EXPECT_TRUE(has(r.out, "| **slower** |")) << r.out;
  EXPECT_TRUE(has(r.out, "1.00x -> 3.00x")) << r.out;  // engine/LibTorch before and after
}

// A machine twice as slow slows both sides: engine time "slower", the engine/LibTorch ratio unchanged.
TEST_F(CompareCli, EngineOverLibTorchShowsMachineNoise) {
  const th::Comparison c = th::compare_results(result({bench("c/float32/1", kSteady, scaled(kSteady, 0.8))}),
                                               result(
                                                   {bench("c/float32/1", scaled(kSteady, 2), scaled(kSteady, 1.6))}));
  ASSERT_EQ(c.benchmarks.size(), 1u);
  const th::CaseComparison& x = c.benchmarks[0];
  EXPECT_EQ(x.verdict, th::Verdict::Slower);
  ASSERT_TRUE(x.vs_reference.valid);
  EXPECT_NEAR(x.vs_reference.ratio, 1.0, 1e-9);
  EXPECT_NEAR(x.base_engine_over_ref, 1.25, 1e-9);
  // Reproducible: a fixed seed.
  EXPECT_EQ(th::comparison_text(c),
            th::comparison_text(
                th::compare_results(result({bench("c/float32/1", kSteady, scaled(kSteady, 0.8))}),
                                    result({bench("c/float32/1", scaled(kSteady, 2), scaled(kSteady, 1.6))}))));
}

// --relative: the same machine-wide slowdown is "same" by the engine/LibTorch ratio; an engine-only
// slowdown is still "slower".
TEST_F(CompareCli, RelativeGatesOnTheRatioToLibTorch) {
  const json base = result({bench("c/float32/1", kSteady, kSteady), bench("d/float32/1", kSteady, kSteady)});
  const json neu = result({bench("c/float32/1", scaled(kSteady, 2), scaled(kSteady, 2)),
                           bench("d/float32/1", scaled(kSteady, 2), kSteady)});
  EXPECT_EQ(compare(base, neu).out.find("2 slower") != std::string::npos, true);
  const CliRun r = compare(base, neu, {"--relative"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "1 slower, 0 faster, 1 same")) << r.out;
  EXPECT_TRUE(has(r.out, "verdicts from the engine/LibTorch ratio's change")) << r.out;
}

TEST_F(CompareCli, NanAndEmptySeries) {
  json nan_series = bench("a/float32/1", {});
  nan_series["series"]["engine_time_s"] = json::array({"nan", 1e-3, "inf", 1.01e-3, -1.0, 0.99e-3});
  const CliRun r = compare(result({nan_series, bench("e/float32/1", {})}),
                           result({bench("a/float32/1", kSteady), bench("e/float32/1", {})}));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "3 non-finite or non-positive times ignored")) << r.out;
  EXPECT_TRUE(has(r.out, "1 without repetition times")) << r.out;
  EXPECT_TRUE(has(r.out, "no series.engine_time_s to compare")) << r.out;
  // Only NaN in one file: nothing left to compare, not a crash nor a verdict.
  json all_nan = bench("a/float32/1", {});
  all_nan["series"]["engine_time_s"] = json::array({"nan", "nan"});
  const CliRun n = compare(result({all_nan}), result({bench("a/float32/1", kSteady)}));
  EXPECT_EQ(n.code, 0) << n.out;
  EXPECT_TRUE(has(n.out, "no repetition times")) << n.out;
}

TEST_F(CompareCli, BadInputExits2WithOneClearLine) {
  const std::string good = write("good.json", result({bench("a/float32/1", kSteady)}));
  const json g = result({bench("a/float32/1", kSteady)});
  json wrong_schema = g;
  wrong_schema["schema"] = "trainbench.result/2";
  json series_string = g;
  series_string["records"][0]["series"]["engine_time_s"] = "fast";
  json series_object = g;
  series_object["records"][0]["series"]["engine_time_s"] = json::array({json::object()});
  json status_number = g;
  status_number["records"][0]["status"] = 3;
  json no_case = g;
  no_case["records"][0].erase("case");
  const std::string text = g.dump();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "missing.json").string(), "no such file"},
      {dir.string(), "is a directory"},
      {write("empty.json", std::string("  \n")), "empty file"},
      {write("truncated.json", text.substr(0, text.size() / 2)), "JSON"},
      {write("nan.json", std::string(R"({"schema":"trainbench.result/1","run":{},"records":[NaN]})")), "JSON"},
      {write("array.json", std::string("[1,2]")), "top level is an array"},
      {write("deep.json", std::string(100000, '[') + std::string(100000, ']')), "nest"},
      {write("schema.json", wrong_schema), "compare reads \"trainbench.result/1\""},
      {write("series_string.json", series_string), "records[0].series.engine_time_s: is a string, not an array"},
      {write("series_object.json", series_object), "holds an object"},
      {write("status.json", status_number), "records[0].status: is a number, not a string"},
      {write("no_case.json", no_case), "records[0]: no \"case\""},
  };
  for (const auto& [file, why] : cases) {
    for (const bool as_new : {false, true}) {
      const CliRun r = run({"compare", as_new ? good : file, as_new ? file : good});
      EXPECT_EQ(r.code, 2) << file << "\n" << r.out << r.err;
      EXPECT_TRUE(has(r.err, why)) << file << ": " << r.err;
      EXPECT_TRUE(has(r.err, file)) << r.err;
      EXPECT_EQ(r.out, "") << file;
    }
  }
  EXPECT_EQ(run({"compare", good}).code, 2);
  EXPECT_EQ(run({"compare", good, good, good}).code, 2);
}

// The CI gate: ci/perf_bounds.json passes today's ratios and fails a 10x slower `max` row.
TEST_F(CompareCli, BoundsGateFailsA10xSlowerRow) {
  auto row = [](const std::string& c, double ratio) {
    json r = bench(c, {});
    r["metrics"] = {{"engine_median_s", 1e-3 * ratio},
                    {"reference_median_s", 1e-3},
                    {"engine_min_s", 0.9e-3 * ratio},
                    {"reference_min_s", 0.9e-3},
                    {"speedup", 1 / ratio}};
    return r;
  };
  const std::string bounds = std::string(TB_SOURCE_DIR) + "/ci/perf_bounds.json";
  const json today = result({row("add/float32/16M", 1.0), row("max/bfloat16/16M", 1.8), row("gelu/bfloat16/16M", 1.6),
                             row("matmul/float32/1024", 0.9)});
  const CliRun ok = run({"compare", "--bounds", bounds, write("today.json", today)});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_TRUE(has(ok.out, "4 benchmark rows, 0 over")) << ok.out;

  json slow = today;
  slow["records"].push_back(row("max/float32/16M", 10.0));
  const CliRun bad = run({"compare", "--bounds", bounds, write("slow.json", slow)});
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_TRUE(has(bad.out, "1 over")) << bad.out;
  EXPECT_TRUE(has(bad.out, "max/float32/16M")) << bad.out;
  EXPECT_TRUE(has(bad.out, "OVER")) << bad.out;

  // A noisy median alone does not fail: the fastest repetitions' ratio is within.
  json burst = today;
  json b = row("sum/float32/16M", 10.0);
  b["metrics"]["engine_min_s"] = 1e-3;
  b["metrics"]["reference_min_s"] = 1e-3;
  burst["records"].push_back(b);
  EXPECT_EQ(run({"compare", "--bounds", bounds, write("burst.json", burst)}).code, 0);

  // Nothing to check fails the gate, as bad input (BoundsWithNothingToCheckOrRelativeAreBadInput).
  EXPECT_EQ(run({"compare", "--bounds", bounds, write("none.json", result({correctness("a/float32/x", "pass")}))}).code,
            2);
  // A bad bounds file, or two results, are usage errors.
  EXPECT_EQ(run({"compare", "--bounds", write("b.json", std::string("{\"schema\":\"trainbench.perf_bounds/1\"}")),
                 write("t.json", today)})
                .code,
            2);
  EXPECT_EQ(run({"compare", "--bounds", bounds, write("t.json", today), write("t.json", today)}).code, 2);
}

// The benchmark runner keeps every repetition's time in series.engine_time_s / reference_time_s,
// and two runs of the same case compare to a verdict (not "no repetition times").
TEST(CompareSeries, BenchRecordsCarryRepetitionTimes) {
  th::Suite s;
  s.name = "compare_series_fake";
  s.run_by_default = false;
  s.benches = [] {
    th::BenchCase b;
    b.name = "spin/float32/1";
    b.engine = [] {
      volatile double x = 0;
      for (int i = 0; i < 2000; ++i) x = x + i;
    };
    b.reference = b.engine;
    return std::vector<th::BenchCase>{b};
  };
  th::register_suite(s);
  th::Selection sel;
  sel.suites = {"compare_series_fake"};
  const auto recs = th::run_benches(th::collect_benches(sel), {4, 0.002, 1});
  ASSERT_EQ(recs.size(), 1u);
  const json j = th::record_to_json(recs[0]);
  ASSERT_TRUE(j.contains("series")) << j.dump();
  ASSERT_EQ(j["series"]["engine_time_s"].size(), 4u);
  ASSERT_EQ(j["series"]["reference_time_s"].size(), 4u);
  for (const json& v : j["series"]["engine_time_s"]) EXPECT_GT(v.get<double>(), 0);
  const json doc = th::make_result({"trainbench bench", 1}, recs);
  const th::Comparison c = th::compare_results(th::parse_result_text(doc.dump(), "a"),
                                               th::parse_result_text(doc.dump(), "b"));
  ASSERT_EQ(c.benchmarks.size(), 1u);
  // Timings of a busy machine: the file against itself is "same" or "too noisy", never a change.
  EXPECT_TRUE(c.benchmarks[0].verdict == th::Verdict::Same || c.benchmarks[0].verdict == th::Verdict::TooNoisy)
      << th::comparison_text(c);
  EXPECT_DOUBLE_EQ(c.benchmarks[0].time.ratio, 1.0);
  EXPECT_EQ(c.benchmarks[0].base_n, 4u);
}

// ---- found by an adversarial tester ----

json bounds_row(const std::string& c, double e_med, double r_med, double e_min, double r_min) {
  json r = bench(c, {});
  r["metrics"] = {{"engine_median_s", e_med},
                  {"reference_median_s", r_med},
                  {"engine_min_s", e_min},
                  {"reference_min_s", r_min}};
  return r;
}

const char* kBounds =
    R"({"schema":"trainbench.perf_bounds/1","suite":"ops","default_max_ratio":3,"family_max_ratio":{"gelu":5}})";

// A FIFO, a device or a directory is refused before anything is read (a FIFO blocked compare for
// ever, /dev/zero filled memory); a file over the limit is refused too.
TEST_F(CompareCli, NonRegularAndOversizedFilesAreRefusedBeforeReading) {
  const std::string good = write("good.json", result({bounds_row("a/float32/1", 1e-3, 1e-3, 1e-3, 1e-3)}));
  const std::string bounds = write("bounds.json", std::string(kBounds));
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Should a reader block on the FIFO, a writer comes and goes to release it (the test then fails
  // on the message instead of hanging).
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    for (int i = 0; i < 200 && !done; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  });
  const CliRun a = run({"compare", fifo, good});
  const CliRun b = run({"compare", "--bounds", fifo, good});
  done = true;
  releaser.join();
  EXPECT_EQ(a.code, 2) << a.err;
  EXPECT_TRUE(has(a.err, fifo + ": is a FIFO, not a result file")) << a.err;
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_TRUE(has(b.err, "is a FIFO, not a bounds file")) << b.err;
  const CliRun dev = run({"compare", good, "/dev/null"});
  EXPECT_EQ(dev.code, 2);
  EXPECT_TRUE(has(dev.err, "/dev/null: is a character device")) << dev.err;
  const CliRun d = run({"compare", "--bounds", dir.string(), good});
  EXPECT_EQ(d.code, 2);
  EXPECT_TRUE(has(d.err, "is a directory, not a bounds file")) << d.err;
  // A valid result padded past 32 MiB: refused by its size, not parsed.
  json big = result({bench("a/float32/1", kSteady)});
  big["run"]["padding"] = std::string((32u << 20) + 1, 'x');
  const CliRun l = run({"compare", good, write("big.json", big)});
  EXPECT_EQ(l.code, 2) << l.out;
  EXPECT_TRUE(has(l.err, "is larger than 32 MiB")) << l.err;
  EXPECT_EQ(run({"compare", "--bounds", bounds, good}).code, 0);
}

// 10,000-value series: seconds per case when resampled value by value (2000 x 20,000 draws),
// now a constant number of draws per resample from the same bootstrap distribution.
TEST_F(CompareCli, LongSeriesTakeBoundedTimeAndKeepTheirMeaning) {
  auto series = [](double scale, std::size_t n) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * (1e-3 + 1e-4 * double((i * 7919) % 1000) / 1000);
    return v;
  };
  std::vector<json> base, same, slow;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "long" + std::to_string(i) + "/float32/1";
    base.push_back(bench(name, series(1, 10000), series(1, 10000)));
    same.push_back(bench(name, series(1.001, 10000), series(1, 10000)));
    slow.push_back(bench(name, series(1.2, 10000), series(1, 10000)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const CliRun s = compare(result(base), result(same));
  const CliRun w = compare(result(base), result(slow));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 10) << "two comparisons of 5 cases of 10,000-value series";
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_TRUE(has(s.out, "0 slower, 0 faster, 5 same")) << s.out;
  EXPECT_EQ(w.code, 1) << w.out;
  EXPECT_TRUE(has(w.out, "5 slower")) << w.out;
  EXPECT_TRUE(has(w.out, "(2000 resamples)")) << w.out;

  // The order statistics give the interval that resampling value by value gives (up to the
  // bootstrap's own Monte Carlo noise), for an odd and an even length.
  for (const std::size_t n : {501u, 500u}) {
    std::vector<double> noisy(n);
    for (std::size_t i = 0; i < n; ++i) noisy[i] = 1e-3 * (1 + 0.5 * double((i * 104729) % n) / double(n));
    const json b = result({bench("n/float32/1", noisy)}), nn = result({bench("n/float32/1", scaled(noisy, 1.1))});
    th::CompareOptions direct, order;
    direct.direct_resample = 100000;
    direct.resamples = order.resamples = 10000;
    direct.work_budget = order.work_budget = 1e12;
    const th::RatioCI d = th::compare_results(b, nn, direct).benchmarks.at(0).time;
    const th::RatioCI o = th::compare_results(b, nn, order).benchmarks.at(0).time;
    EXPECT_DOUBLE_EQ(d.ratio, o.ratio);
    const double width = d.hi - d.lo;
    EXPECT_GT(width, 0.03) << "an interval wide enough to compare";
    EXPECT_NEAR(o.lo, d.lo, 0.05 * width) << n;
    EXPECT_NEAR(o.hi, d.hi, 0.05 * width) << n;
  }

  // Past the work budget the resamples are cut, and the header says so; past 200 resamples'
  // worth, compare refuses.
  th::CompareOptions small;
  small.work_budget = 14 * 1000;  // 14 draws a resample (kSteady twice) x 1000
  const th::Comparison cut = th::compare_results(result({bench("a/float32/1", kSteady)}),
                                                 result({bench("a/float32/1", kSteady)}), small);
  EXPECT_EQ(cut.resamples, 1000);
  EXPECT_TRUE(has(th::comparison_text(cut), "1000 resamples, cut from 2000")) << th::comparison_text(cut);
  small.work_budget = 14 * 199;
  EXPECT_THROW(th::compare_results(result({bench("a/float32/1", kSteady)}), result({bench("a/float32/1", kSteady)}),
                                   small),
               tb::core::Error);
}

// A ratio of 1e300 / 1e-300 (infinite) or over a LibTorch time of 0 is no reason to pass: the row
// counts as over its bound, named.
TEST_F(CompareCli, BoundsRowWithoutUsableRatioIsOver) {
  const std::string bounds = write("bounds.json", std::string(kBounds));
  const json ok = bounds_row("add/float32/1", 1e-3, 1e-3, 1e-3, 1e-3);
  for (const json& bad :
       {bounds_row("gelu/float32/1", 1e300, 1e-300, 1e300, 1e-300), bounds_row("gelu/float32/1", 5e-3, 0.0, 5e-3, 0.0),
        bounds_row("gelu/float32/1", 1e-3, 1e-3, 0.0, 1e-3)}) {
    const CliRun r = run({"compare", "--bounds", bounds, write("run.json", result({ok, bad}))});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "2 benchmark rows, 1 over")) << r.out;
    EXPECT_TRUE(has(r.out, "gelu/float32/1")) << r.out;
    EXPECT_TRUE(has(r.out, "OVER (no usable ratio")) << r.out;
  }
  // Rows without the times are named as not checked (and alone they fail the gate, as before).
  json strings = bench("sum/float32/1", {});
  strings["metrics"] = {{"engine_median_s", "5"}, {"reference_median_s", "1"}};
  const CliRun s = run({"compare", "--bounds", bounds, write("s.json", result({ok, strings}))});
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_TRUE(has(s.out, "1 passed benchmark rows without engine and LibTorch times (not checked): sum/float32/1"))
      << s.out;
  EXPECT_EQ(run({"compare", "--bounds", bounds, write("t.json", result({strings}))}).code, 2);
}

// A run with no row the bounds can check fails the gate with exit 2, as two runs with no case in
// common do: nothing was compared, which is wrong input, not a regression (exit 1). --relative
// has no meaning with --bounds (one run, whose ratios are what the bounds check): refused, not
// ignored.
TEST_F(CompareCli, BoundsWithNothingToCheckOrRelativeAreBadInput) {
  const std::string bounds = write("bounds.json", std::string(kBounds));
  json failed = bounds_row("add/float32/1", 1e-3, 1e-3, 1e-3, 1e-3);
  failed["status"] = "fail";
  const json no_times = bench("add/float32/2", {});
  json comm = bounds_row("all_reduce/float32/8/w2/engine", 1e-3, 1e-3, 1e-3, 1e-3);
  comm["suite"] = "comm";
  const std::vector<std::pair<json, std::string>> nothing = {
      {result({}), "(no benchmark record of that suite)"},
      {result({correctness("add/float32/1", "pass")}), "(no benchmark record of that suite)"},
      {result({comm}), "(no benchmark record of that suite)"},
      {result({failed}), "(1 did not pass, 0 passed without the times)"},
      {result({failed, no_times}), "(1 did not pass, 1 passed without the times)"},
  };
  for (const auto& [run_json, why] : nothing) {
    const std::string file = write("run.json", run_json);
    const CliRun r = run({"compare", "--bounds", bounds, file});
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "trainbench: compare --bounds: " + file + ": no passed benchmark row of suite ops with engine " +
                         "and LibTorch times " + why + ": nothing to check\n");
  }
  const std::string one = write("one.json", result({bounds_row("add/float32/1", 1e-3, 1e-3, 1e-3, 1e-3)}));
  EXPECT_EQ(run({"compare", "--bounds", bounds, one}).code, 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"compare", "--bounds", bounds, one, "--relative"},
        std::vector<std::string>{"compare", "--relative", "--bounds", bounds, one, "--markdown"}}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(has(r.err, "--relative")) << r.err;
    EXPECT_TRUE(has(r.err, "--bounds")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// A comparison that compared nothing does not pass; a case twice in one file is refused, not
// resolved to its first copy; a correctness and a benchmark record of one name are two cases.
TEST_F(CompareCli, NothingComparedAndRepeatedCasesAreBadInput) {
  const json ops = result({bench("a/float32/1", kSteady)});
  const json comm = result({bench("all_reduce/float32/8/w2/engine", kSteady, {}, "comm")});
  const CliRun none = compare(ops, comm);
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_TRUE(has(none.err, "have no case in common (1 and 1 records): nothing to compare")) << none.err;
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(compare(result({}), result({})).code, 2);

  json dup = ops;
  dup["records"].push_back(bench("a/float32/1", scaled(kSteady, 100000)));
  const CliRun d = compare(ops, dup);
  EXPECT_EQ(d.code, 2) << d.out;
  EXPECT_TRUE(has(d.err, "records[1]: ops/a/float32/1 (benchmark) is already records[0]")) << d.err;

  // ops' correctness and benchmark records share names: each pairs with its own kind (the
  // benchmark was once lost behind the correctness record).
  const json base = result({correctness("add/float32/16M", "pass"), bench("add/float32/16M", kSteady)});
  const json neu = result({correctness("add/float32/16M", "pass"), bench("add/float32/16M", scaled(kSteady, 2))});
  const CliRun k = compare(base, neu);
  EXPECT_EQ(k.code, 1) << k.out;
  EXPECT_TRUE(has(k.out, "Benchmarks in both (1): 1 slower")) << k.out;
  EXPECT_TRUE(has(k.out, "ops/add/float32/16M (benchmark)")) << k.out;
}

// Times of 5e-324 s or 1e30 s are no timing: dropped and counted, never a figure like
// "4.94e-315 ns" or a 36-digit ratio.
TEST_F(CompareCli, AbsurdTimesAreDroppedAndCounted) {
  const CliRun tiny = compare(result({bench("a/float32/1", kSteady)}),
                              result({bench("a/float32/1", std::vector<double>(5, 5e-324))}));
  EXPECT_EQ(tiny.code, 0) << tiny.out;
  EXPECT_TRUE(has(tiny.out, "no repetition times (5 times outside 1e-12 s to 1e6 s ignored)")) << tiny.out;
  EXPECT_FALSE(has(tiny.out, "e-315")) << tiny.out;
  json mixed = bench("a/float32/1", {});
  mixed["series"]["engine_time_s"] = json::array({1e30, 1e30, 1e-3, 1.01e-3, 0.99e-3, "nan"});
  const CliRun big = compare(result({bench("a/float32/1", kSteady)}), result({mixed}));
  EXPECT_EQ(big.code, 0) << big.out;
  EXPECT_TRUE(has(big.out, "1 non-finite or non-positive times ignored, 2 times outside 1e-12 s to 1e6 s ignored"))
      << big.out;
  EXPECT_TRUE(has(big.out, "1.00x [")) << big.out;
  // Extreme but usable times give a ratio in three digits, not 19.
  const CliRun wide = compare(result({bench("a/float32/1", std::vector<double>(5, 1e-12))}),
                              result({bench("a/float32/1", std::vector<double>(5, 1e6))}));
  EXPECT_TRUE(has(wide.out, "1e+18x [1e+18x, 1e+18x]")) << wide.out;
}

// --threshold is strict decimal and checked with --bounds too; an empty --bounds is an error,
// not a silent plain comparison; names from files cannot break a line or a Markdown table; a
// bound of 1e308 prints in three digits.
TEST_F(CompareCli, StrictOptionsEscapedNamesAndBoundedFigures) {
  const json j = result({bench("a/float32/1", kSteady)});
  for (const char* bad : {"0x10", "-0", "1e1", " 5", "5 ", "1.2.3", ".", "+5"}) {
    const CliRun b = compare(j, j, {"--threshold", bad});
    EXPECT_EQ(b.code, 2) << bad << ": " << b.out;
    EXPECT_TRUE(has(b.err, "--threshold")) << b.err;
  }
  for (const char* good : {"0", "5.", ".5", "2.5%", "1000"})
    EXPECT_EQ(compare(j, j, {"--threshold", good}).code, 0) << good;
  const std::string bounds = write("bounds.json", std::string(kBounds));
  const std::string one = write("one.json", result({bounds_row("add/float32/1", 1e-3, 1e-3, 1e-3, 1e-3)}));
  EXPECT_EQ(run({"compare", "--bounds", bounds, one}).code, 0);
  const CliRun t = run({"compare", "--bounds", bounds, one, "--threshold", "garbage"});
  EXPECT_EQ(t.code, 2) << t.out;
  EXPECT_TRUE(has(t.err, "--threshold 'garbage'")) << t.err;
  const CliRun e = run({"compare", "--bounds", "", one, one});
  EXPECT_EQ(e.code, 2) << e.out;
  EXPECT_EQ(e.out, "");

  const std::string evil = "x|y`z\n## injected";
  const json m = result({bench(evil, kSteady), bench("b/float32/1", kSteady)});
  const json only = result({bench("b/float32/1", kSteady), bench("c`\n# also", kSteady)});
  for (const bool md : {false, true}) {
    const CliRun r = compare(m, only, md ? std::vector<std::string>{"--markdown"} : std::vector<std::string>{});
    EXPECT_EQ(r.code, 0) << r.out;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_NE(line.rfind("## injected", 0), 0u) << r.out;
      EXPECT_NE(line.rfind("# also", 0), 0u) << r.out;
    }
    if (md) {
      EXPECT_TRUE(has(r.out, "- ``ops/x|y`z\\n## injected``")) << r.out;
      EXPECT_TRUE(has(r.out, "- ``ops/c`\\n# also``")) << r.out;
    } else {
      EXPECT_TRUE(has(r.out, "  ops/x|y`z\\n## injected")) << r.out;
    }
  }
  const CliRun cell = compare(m, m, {"--markdown"});
  EXPECT_TRUE(has(cell.out, "| ops/x\\|y\\`z\\n## injected |")) << cell.out;

  const std::string huge =
      write("huge.json",
            std::string(R"({"schema":"trainbench.perf_bounds/1","suite":"ops","default_max_ratio":1e308})"));
  const CliRun h = run({"compare", "--bounds", huge, one});
  EXPECT_EQ(h.code, 0) << h.out;
  EXPECT_TRUE(has(h.out, "1e+308x")) << h.out;
  std::istringstream lines(h.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LT(line.size(), 160u) << line;
}

}  // namespace
