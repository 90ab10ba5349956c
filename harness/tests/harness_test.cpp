// harness_test: a fake suite (passing, failing, throwing, skipped cases; a tiny and a broken
// benchmark) run through the runners, the result JSON and the CLI's exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "engine/tensor/iterator.h"
#include "harness/cli.h"
#include "harness/distributed.h"
#include "harness/runner.h"

namespace th = tb::harness;
namespace fs = std::filesystem;

namespace {

int g_setter_threads = 0;

// Keeps the optimiser from deleting the benchmark bodies.
volatile float g_sink = 0;
void benchmark_sink(float v) { g_sink = v; }

std::vector<float>& data() {
  static std::vector<float> v(4096, 1.0f);
  return v;
}

th::Record make(const char* status, const char* msg = "") {
  th::Record r;
  r.status = status;
  r.message = msg;
  r.metrics = {{"max_abs_err", 0.0}, {"nan_metric", std::nan("")}, {"flag", true}};
  r.tolerances = {{"rtol", 1e-6}, {"atol", 1e-5}};
  return r;
}

const bool registered = [] {
  th::register_suite({
      "fake",
      "a suite for harness_test",
      [] {
        return std::vector<th::TestCase>{
            {"add/float32/pass", [] { return make("pass"); }},
            {"add/float32/fail", [] { return make("fail", "max_abs_err 1 > atol 1e-5"); }},
            {"add/float32/throws", []() -> th::Record { throw std::runtime_error("kaboom"); }},
            {"mul/float64/skip", [] { return make("skip", "not built with float64"); }},
        };
      },
      [] {
        th::BenchCase ok;
        ok.name = "sum/float32/4096";
        ok.engine = [] { benchmark_sink(std::accumulate(data().begin(), data().end(), 0.0f)); };
        ok.reference = [] { benchmark_sink(std::accumulate(data().begin(), data().end(), 0.0f)); };
        ok.flops_per_call = 4096;
        ok.bytes_per_call = 4096 * 4;
        ok.extra = {{"numel", 4096}};
        th::BenchCase broken;
        broken.name = "broken/float32/1";
        broken.engine = [] { throw std::runtime_error("engine exploded"); };
        broken.reference = [] {};
        // Survives the warm-up call, then throws inside Google Benchmark's timing loop.
        th::BenchCase flaky;
        flaky.name = "flaky/float32/1";
        flaky.engine = [n = 0]() mutable {
          if (++n > 3) throw std::runtime_error("flaky engine");
        };
        flaky.reference = [] {};
        return std::vector<th::BenchCase>{ok, broken, flaky};
      },
  });
  th::register_suite({"hidden", "not in the default run", {}, {}, false});
  th::register_suite({"broken", "its case list throws",
                      []() -> std::vector<th::TestCase> { throw std::runtime_error("no torch"); },
                      {}, false});
  th::register_thread_setter([](int n) { g_setter_threads = n; });
  th::add_run_info("libtorch_version", "0.0-test");
  th::add_run_info("host", "must-not-override");
  return true;
}();

th::Selection named(std::string suite, std::string filter = "") {
  th::Selection s;
  s.suites = {std::move(suite)};
  s.filter = std::move(filter);
  return s;
}
th::Selection fake(std::string filter = "") { return named("fake", std::move(filter)); }

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("tb_harness_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(Registry, SelectsByNameAndDefault) {
  ASSERT_TRUE(registered);
  auto all = th::select_suites({});
  ASSERT_EQ(all.size(), 1u);  // "hidden" is not a default suite
  EXPECT_EQ(all[0]->name, "fake");
  th::Selection with_hidden{};
  with_hidden.include_non_default = true;
  EXPECT_EQ(th::select_suites(with_hidden).size(), 3u);
  EXPECT_EQ(th::select_suites(named("hidden")).size(), 1u);
}

TEST(Registry, UnknownSuiteListsKnownOnes) {
  try {
    th::select_suites(named("nope"));
    FAIL() << "expected UsageError";
  } catch (const th::UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nope"), std::string::npos);
    EXPECT_NE(msg.find("fake"), std::string::npos);
    EXPECT_NE(msg.find("hidden"), std::string::npos);
  }
}

TEST(Registry, DuplicateNameRejected) {
  EXPECT_THROW(th::register_suite({"fake", "", {}, {}}), std::invalid_argument);
}

TEST(Registry, FilterIsRegexSearch) {
  EXPECT_EQ(th::collect_tests(fake()).size(), 4u);
  EXPECT_EQ(th::collect_tests(fake("float32")).size(), 3u);
  EXPECT_EQ(th::collect_tests(fake("^mul/")).size(), 1u);
  EXPECT_EQ(th::collect_benches(fake("sum")).size(), 1u);
  EXPECT_THROW(th::collect_tests(fake("(")), th::UsageError);
}

TEST(Registry, ApplyThreadsCallsSetters) {
  EXPECT_EQ(th::apply_threads(1), 1);
  EXPECT_EQ(g_setter_threads, 1);
  EXPECT_EQ(tb::num_threads(), 1);
  EXPECT_GE(th::apply_threads(0), 1);  // 0: all cores
  EXPECT_EQ(g_setter_threads, tb::num_threads());
}

TEST(Runner, TestStatusesAndProgress) {
  std::ostringstream log;
  auto tests = th::collect_tests(fake());
  th::Progress progress(&log, tests.size());
  auto recs = th::run_tests(tests, &progress);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].status, "pass");
  EXPECT_EQ(recs[1].status, "fail");
  EXPECT_EQ(recs[2].status, "error");
  EXPECT_NE(recs[2].message.find("kaboom"), std::string::npos);
  EXPECT_EQ(recs[3].status, "skip");
  for (const auto& r : recs) {
    EXPECT_EQ(r.suite, "fake");
    EXPECT_EQ(r.kind, "correctness");
    EXPECT_GT(r.duration_s, 0.0);
  }
  EXPECT_EQ(recs[1].case_name, "add/float32/fail");
  EXPECT_NE(log.str().find("[1/4] fake add/float32/pass ... pass"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("[3/4] fake add/float32/throws ... error"), std::string::npos);
  const th::Counts c = th::count(recs);
  EXPECT_EQ(c.passed, 1u);
  EXPECT_EQ(c.failed, 1u);
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.skipped, 1u);
  EXPECT_FALSE(c.ok());
}

TEST(Runner, BenchmarksRecordBothSides) {
  auto recs = th::run_benches(th::collect_benches(fake()), {2, 0.01, 1});
  ASSERT_EQ(recs.size(), 3u);
  const th::Record& ok = recs[0];
  EXPECT_EQ(ok.kind, "benchmark");
  EXPECT_EQ(ok.status, "pass") << ok.message;
  const auto& m = ok.metrics;
  for (const char* k : {"engine_median_s", "engine_min_s", "engine_max_s", "reference_median_s",
                        "reference_min_s", "reference_max_s", "speedup", "gflops",
                        "reference_gflops", "gbps", "reference_gbps"}) {
    ASSERT_TRUE(m.contains(k)) << k;
    EXPECT_GT(m[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(m["repetitions"], 2);
  EXPECT_EQ(m["threads"], 1);
  EXPECT_EQ(m["numel"], 4096);
  EXPECT_LE(m["engine_min_s"].get<double>(), m["engine_median_s"].get<double>());
  EXPECT_LE(m["engine_median_s"].get<double>(), m["engine_max_s"].get<double>());
  EXPECT_NEAR(m["speedup"].get<double>(),
              m["reference_median_s"].get<double>() / m["engine_median_s"].get<double>(), 1e-12);
  EXPECT_GT(ok.duration_s, 0.0);

  EXPECT_EQ(recs[1].status, "error");
  EXPECT_NE(recs[1].message.find("engine exploded"), std::string::npos);
  EXPECT_EQ(recs[2].status, "error");
  EXPECT_NE(recs[2].message.find("flaky engine"), std::string::npos) << recs[2].message;
}

TEST(Runner, SuiteWhoseCaseListThrowsIsAnErrorRecord) {
  auto recs = th::run_tests(th::collect_tests(named("broken")));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].status, "error");
  EXPECT_EQ(recs[0].suite, "broken");
  EXPECT_NE(recs[0].message.find("no torch"), std::string::npos);
}

TEST(Results, JsonShapeAndSanitising) {
  auto recs = th::run_tests(th::collect_tests(fake()));
  nlohmann::json j = th::make_result({"trainbench test --suite fake", 2}, recs);
  EXPECT_EQ(j["schema"], th::kSchemaId);
  const auto& run = j["run"];
  for (const char* k : {"time", "git_revision", "host", "build_type", "compiler", "backends",
                        "world_size", "command", "threads"})
    EXPECT_TRUE(run.contains(k)) << k;
  EXPECT_EQ(run["libtorch_version"], "0.0-test");
  EXPECT_NE(run["host"], "must-not-override");
  EXPECT_EQ(run["threads"], 2);
  EXPECT_EQ(run["world_size"], 1);
  ASSERT_EQ(j["records"].size(), 4u);
  const auto& r0 = j["records"][0];
  EXPECT_EQ(r0["case"], "add/float32/pass");
  EXPECT_EQ(r0["metrics"]["nan_metric"], "nan");
  EXPECT_EQ(r0["metrics"]["flag"], "true");
  EXPECT_EQ(r0["tolerances"]["rtol"], 1e-6);
}

TEST(Results, AtomicWriteAndSchemaValid) {
  const fs::path dir = temp_dir();
  const fs::path out = dir / "sub" / "result.json";
  auto recs = th::run_tests(th::collect_tests(fake()));
  auto brecs = th::run_benches(th::collect_benches(fake()), {2, 0.01, 1});
  // Google Benchmark keeps working after a case that errored inside its timing loop.
  EXPECT_EQ(brecs[0].status, "pass") << brecs[0].message;
  recs.insert(recs.end(), brecs.begin(), brecs.end());
  th::write_result(out, th::make_result({"harness_test", 1}, recs));
  ASSERT_TRUE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    EXPECT_EQ(e.path().filename(), "result.json");  // no temporary left behind
  std::ifstream in(out);
  const nlohmann::json back = nlohmann::json::parse(in);
  EXPECT_EQ(back["records"].size(), 7u);

  const std::string python = TB_TEST_PYTHON;
  if (python.empty() || !fs::exists(python)) {
    GTEST_SKIP() << "no venv python; schema validation not checked";
  }
  const std::string cmd = "'" + python + "' '" + TB_SOURCE_DIR + "/reports/tests/validate.py' '" +
                          out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(dir);
}

TEST(Cli, ExitCodes) {
  const fs::path dir = temp_dir();
  const std::string json = (dir / "cli.json").string();
  auto run = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return th::main(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_EQ(run({"trainbench", "--help"}), 0);
  EXPECT_EQ(run({"trainbench", "list"}), 0);
  EXPECT_EQ(run({"trainbench", "test", "--suite", "nope"}), 2);
  EXPECT_EQ(run({"trainbench", "test", "--bogus"}), 2);
  EXPECT_EQ(run({"trainbench", "test", "--filter", "pass$", "--json", json, "--threads", "1"}), 0);
  EXPECT_TRUE(fs::exists(json));
  EXPECT_EQ(run({"trainbench", "test", "--suite", "fake", "--json", json}), 1);  // fail + error
  fs::remove_all(dir);
}

// Note [Benchmark rounds]: numeric metrics are averaged over the passing rounds, the worst status
// and its message win, strings and other fields come from the first round.
TEST(Distributed, AverageRoundsMeansPassingRounds) {
  auto rec = [](const std::string& name, const std::string& status, double sps) {
    tb::harness::Record r;
    r.suite = "ddp";
    r.case_name = name;
    r.kind = "benchmark";
    r.status = status;
    r.message = status == "pass" ? "" : "rank 1 died";
    r.metrics = {{"samples_per_s", sps}, {"world", 2}, {"backend", "mpi"}};
    return r;
  };
  const std::vector<std::vector<tb::harness::Record>> rounds = {
      {rec("a", "pass", 100), rec("b", "pass", 10)},
      {rec("a", "pass", 300), rec("b", "error", 0)}};
  const auto out = tb::harness::average_rounds(rounds);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].case_name, "a");
  EXPECT_EQ(out[0].status, "pass");
  EXPECT_DOUBLE_EQ(out[0].metrics["samples_per_s"].get<double>(), 200);
  EXPECT_EQ(out[0].metrics["rounds"].get<int>(), 2);
  EXPECT_EQ(out[0].metrics["backend"], "mpi");
  EXPECT_EQ(out[1].status, "error");
  EXPECT_EQ(out[1].message, "rank 1 died");
  EXPECT_DOUBLE_EQ(out[1].metrics["samples_per_s"].get<double>(), 10);  // the failed round is left out
  EXPECT_EQ(out[1].metrics["rounds"].get<int>(), 1);
  // One round: records pass through, no `rounds` metric.
  const auto single = tb::harness::average_rounds({rounds[0]});
  EXPECT_FALSE(single[0].metrics.contains("rounds"));
}
