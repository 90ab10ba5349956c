// `trainbench compare` on synthetic results with known outcomes (a clear slowdown, identical runs,
// huge noise, a status change, cases in one file only), hostile input (truncated JSON, wrong types,
// NaN, empty series, another schema), the --bounds gate with ci/perf_bounds.json against a 10x
// slower row, and the per-repetition series the benchmark runner now records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

  // Nothing to check is a failure of the gate, not a pass.
  EXPECT_EQ(run({"compare", "--bounds", bounds, write("none.json", result({correctness("a/float32/x", "pass")}))}).code,
            1);
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

}  // namespace
