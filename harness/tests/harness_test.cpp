// harness_test: a fake suite (passing, failing, throwing, skipped cases; a tiny and a broken
// benchmark) run through the runners, the result JSON and the CLI's exit codes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "engine/tensor/iterator.h"
#include "harness/cli.h"
#include "harness/distributed.h"
#include "harness/runner.h"
#include "harness/tests/cli_run.h"

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
  r.status = th::status_from_string(status).value();
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
  th::register_suite({"broken",
                      "its case list throws",
                      []() -> std::vector<th::TestCase> { throw std::runtime_error("no torch"); },
                      {},
                      false});
  th::register_suite({"twins",
                      "two cases share a name",
                      [] {
                        return std::vector<th::TestCase>{{"a/1", [] { return make("pass"); }},
                                                         {"b/1", [] { return make("pass"); }},
                                                         {"a/1", [] { return make("pass"); }}};
                      },
                      {},
                      false});
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
  EXPECT_EQ(th::select_suites(with_hidden).size(), 4u);
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

TEST(Registry, DuplicateNameRejected) { EXPECT_THROW(th::register_suite({"fake", "", {}, {}}), std::invalid_argument); }

TEST(Registry, FilterIsRegexSearch) {
  EXPECT_EQ(th::collect_tests(fake()).size(), 4u);
  EXPECT_EQ(th::collect_tests(fake("float32")).size(), 3u);
  EXPECT_EQ(th::collect_tests(fake("^mul/")).size(), 1u);
  EXPECT_EQ(th::collect_benches(fake("sum")).size(), 1u);
  EXPECT_THROW(th::collect_tests(fake("(")), th::UsageError);
}

TEST(Registry, DuplicateCaseNamesBecomeAnErrorRecord) {
  auto tests = th::collect_tests(named("twins"));
  ASSERT_EQ(tests.size(), 4u);  // the error record, then all three cases
  EXPECT_EQ(tests[0].test.name, "(setup)");
  const th::Record r = tests[0].test.run();
  EXPECT_EQ(r.status, th::Status::Error);
  EXPECT_NE(r.message.find("a/1"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find("b/1"), std::string::npos) << r.message;
  // A filter that leaves the duplicated name out leaves the error out too.
  EXPECT_EQ(th::collect_tests(named("twins", "^b/")).size(), 1u);
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
  EXPECT_EQ(recs[0].status, th::Status::Pass);
  EXPECT_EQ(recs[1].status, th::Status::Fail);
  EXPECT_EQ(recs[2].status, th::Status::Error);
  EXPECT_NE(recs[2].message.find("kaboom"), std::string::npos);
  EXPECT_EQ(recs[3].status, th::Status::Skip);
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
  EXPECT_EQ(ok.status, th::Status::Pass) << ok.message;
  const auto& m = ok.metrics;
  for (const char* k : {"engine_median_s", "engine_min_s", "engine_max_s", "reference_median_s", "reference_min_s",
                        "reference_max_s", "speedup", "gflops", "reference_gflops", "gbps", "reference_gbps"}) {
    ASSERT_TRUE(m.contains(k)) << k;
    EXPECT_GT(m[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(m["repetitions"], 2);
  EXPECT_EQ(m["threads"], 1);
  EXPECT_EQ(m["numel"], 4096);
  EXPECT_LE(m["engine_min_s"].get<double>(), m["engine_median_s"].get<double>());
  EXPECT_LE(m["engine_median_s"].get<double>(), m["engine_max_s"].get<double>());
  EXPECT_NEAR(m["speedup"].get<double>(), m["reference_median_s"].get<double>() / m["engine_median_s"].get<double>(),
              1e-12);
  EXPECT_GT(ok.duration_s, 0.0);

  EXPECT_EQ(recs[1].status, th::Status::Error);
  EXPECT_NE(recs[1].message.find("engine exploded"), std::string::npos);
  EXPECT_EQ(recs[2].status, th::Status::Error);
  EXPECT_NE(recs[2].message.find("flaky engine"), std::string::npos) << recs[2].message;
}

TEST(Runner, SuiteWhoseCaseListThrowsIsAnErrorRecord) {
  auto recs = th::run_tests(th::collect_tests(named("broken")));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].status, th::Status::Error);
  EXPECT_EQ(recs[0].suite, "broken");
  EXPECT_NE(recs[0].message.find("no torch"), std::string::npos);
}

TEST(Results, JsonShapeAndSanitising) {
  auto recs = th::run_tests(th::collect_tests(fake()));
  nlohmann::json j = th::make_result({"trainbench test --suite fake", 2}, recs);
  EXPECT_EQ(j["schema"], th::kSchemaId);
  const auto& run = j["run"];
  for (const char* k :
       {"time", "git_revision", "host", "build_type", "compiler", "backends", "world_size", "command", "threads"})
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
  EXPECT_EQ(brecs[0].status, th::Status::Pass) << brecs[0].message;
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
  const std::string cmd = "'" + python + "' '" + TB_SOURCE_DIR + "/reports/tests/validate.py' '" + out.string() + "'";
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

namespace {

using tb::harness::testing::capture_fd;

int run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), "trainbench");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return th::main(static_cast<int>(argv.size()), argv.data());
}

struct CliRun {
  int code;
  std::string out, err;
};
CliRun cli(std::vector<std::string> args) {
  CliRun r{};
  r.err = capture_fd(2, [&] { r.out = capture_fd(1, [&] { r.code = run_cli(args); }); });
  return r;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

fs::path write_script(const fs::path& path, const std::string& body, fs::perms perms = fs::perms::owner_all) {
  std::ofstream(path) << "#!/bin/sh\n" << body << '\n';
  fs::permissions(path, perms);
  return path;
}

}  // namespace

TEST(Cli, UnknownSubcommandNamesItAndListsTheValidOnes) {
  for (const char* word : {"frobnicate", "tset", "lists"}) {
    const CliRun r = cli({word});
    EXPECT_EQ(r.code, 2) << word;
    EXPECT_NE(r.err.find(std::string("unknown subcommand '") + word + "'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("list, test, bench, report, all, launch"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("rank"), std::string::npos) << r.err;  // the hidden one stays hidden
    EXPECT_EQ(r.err.find("A subcommand is required"), std::string::npos) << r.err;
  }
  const CliRun none = cli({});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("a subcommand is required; valid subcommands: list"), std::string::npos) << none.err;
}

// Every numeric option of every subcommand, found from --help (options shown with a type of N,
// S, X or one of CLI11's number types), refuses out-of-range and non-finite values with a short
// range message: none may fall back to CLI11's type limits (a 309-digit bound) or let nan through.
TEST(Cli, EveryNumericOptionHasARangeMessage) {
  std::size_t checked = 0;
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"list"}, {"test"}, {"bench"}, {"report"}, {"all"}, {"launch"}, {"scenario", "run"}}) {
    const std::string sub = cmd.back();
    std::vector<std::string> help_args = cmd;
    help_args.push_back("--help");
    const CliRun help = cli(help_args);
    ASSERT_EQ(help.code, 0) << sub;
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      static const std::regex numeric(R"(^\s+(?:-\w,)?(--[\w-]+) (N|S|X|INT|UINT|FLOAT|NUMBER)\b)");
      if (!std::regex_search(line, m, numeric)) continue;
      for (const char* bad : {"0", "-5", "nan", "inf", "1e400", "1e12", "abc"}) {
        std::vector<std::string> args = cmd;
        args.insert(args.end(), {m[1], bad});
        if (sub == "report") args.push_back("x.json");
        if (sub == "launch") args.insert(args.end(), {"--", "true"});
        if (sub == "run") args.push_back("hang/rank_exits");
        const CliRun r = cli(args);
        EXPECT_EQ(r.code, 2) << sub << ' ' << m[1] << ' ' << bad << ": " << r.err;
        const bool ranged = r.err.find("must be ") != std::string::npos && r.err.find("between ") != std::string::npos;
        EXPECT_TRUE(ranged) << sub << ' ' << m[1] << ' ' << bad << ": " << r.err;
        EXPECT_LT(r.err.size(), 300u) << r.err;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 17u);  // threads, timeouts, repetitions, min-time, peaks, ranks, scenario run --timeout
  const CliRun t = cli({"launch", "--timeout", "0", "--", "true"});
  EXPECT_NE(t.err.find("--timeout: must be between 1 and 86400 seconds (got '0')"), std::string::npos) << t.err;
}

TEST(Cli, LaunchOfAMissingOrNonExecutableProgramIsAShellsExitCode) {
  const fs::path dir = temp_dir();
  CliRun r = cli({"launch", "-n", "2", "--", (dir / "no_such_program").string()});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("not found: " + (dir / "no_such_program").string()), std::string::npos) << r.err;
  r = cli({"launch", "--", "tb-no-such-program-on-path"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("not found: tb-no-such-program-on-path"), std::string::npos) << r.err;
  const fs::path plain = write_script(dir / "not_executable", "exit 0", fs::perms::owner_read | fs::perms::owner_write);
  if (::access(plain.c_str(), X_OK) != 0) {  // root may execute anything with an x bit; this has none
    r = cli({"launch", "--", plain.string()});
    EXPECT_EQ(r.code, 126);
    EXPECT_NE(r.err.find("not executable: " + plain.string()), std::string::npos) << r.err;
  }
  r = cli({"launch", "--", dir.string()});
  EXPECT_EQ(r.code, 126);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// mpirun answers a missing hostfile with "an internal error has occurred in ORTE", a directory with
// a flex scanner error, and an empty path by running every rank here: checked first, a usage error.
// libstdc++ compiles a regex recursively: 15,000 nested groups overflowed the stack (SIGSEGV).
// Filters and scenario patterns past the bounds, or empty for `scenario run`, are usage errors.
TEST(Cli, RegexesPastTheBoundsAreUsageErrors) {
  const std::string deep = std::string(200, '(') + "a" + std::string(200, ')');
  const std::string lng(5000, 'a');
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"list", "--suite", "fake", "--filter", deep},
                                             {"list", "--suite", "fake", "--filter", lng},
                                             {"scenario", "run", deep},
                                             {"scenario", "run", ""}}) {
    const CliRun r = cli(args);
    EXPECT_EQ(r.code, 2) << args.back().substr(0, 20) << ": " << r.err;
    EXPECT_LT(r.err.size(), 600u) << r.err;
  }
  EXPECT_NE(cli({"list", "--suite", "fake", "--filter", deep}).err.find("nested 200 deep"), std::string::npos);
  EXPECT_NE(cli({"list", "--suite", "fake", "--filter", lng}).err.find("5000 characters"), std::string::npos);
  // Escaped parentheses are characters, not groups.
  const std::string escaped = [] {
    std::string e;
    for (int i = 0; i < 150; ++i) e += "\\(";
    return e;
  }();
  EXPECT_EQ(cli({"list", "--suite", "fake", "--filter", escaped}).code, 0);
}

TEST(Cli, AHostfileThatNamesNoHostIsAUsageError) {
  const fs::path dir = temp_dir();
  std::ofstream(dir / "empty.hf").flush();
  std::ofstream(dir / "comments.hf") << "# only a comment\n\n   # and another\n";
  fs::create_directories(dir / "folder.hf");
  const std::vector<std::pair<std::string, std::string>> bad = {{(dir / "missing.hf").string(), "no such file"},
                                                                {(dir / "empty.hf").string(), "names no host"},
                                                                {(dir / "comments.hf").string(), "names no host"},
                                                                {(dir / "folder.hf").string(), "is a directory"},
                                                                {"/dev/null", "not a regular file"},
                                                                {"", "an empty path"}};
  for (const auto& [path, why] : bad)
    for (const std::vector<std::string>& head :
         {std::vector<std::string>{"launch", "-n", "2", "--hostfile", path, "--", "true"},
          std::vector<std::string>{"test", "--suite", "fake", "--hostfile", path}}) {
      const CliRun r = cli(head);
      EXPECT_EQ(r.code, 2) << head[0] << " --hostfile '" << path << "': " << r.err;
      EXPECT_NE(r.err.find("--hostfile: "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(why), std::string::npos) << path << ": " << r.err;
    }
  std::ofstream(dir / "one.hf") << "# a host\nlocalhost slots=2\n";
  const CliRun ok = cli({"launch", "-n", "2", "--hostfile", (dir / "one.hf").string(), "--dry-run", "--", "true"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("--hostfile " + (dir / "one.hf").string()), std::string::npos) << ok.out;
  fs::remove_all(dir);
}

TEST(Cli, EmptySelectionFailsUnlessAllowed) {
  const fs::path dir = temp_dir();
  const std::string json = (dir / "empty.json").string();
  CliRun r = cli({"test", "--suite", "fake", "--filter", "layer/GELU", "--json", json});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no test cases in suite 'fake' match --filter 'layer/GELU'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(json));
  // A suite named next to one that matches still counts (a typo in one of several --suite).
  r = cli({"test", "--suite", "fake", "--suite", "hidden", "--filter", "pass", "--json", json});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("suite 'hidden'"), std::string::npos) << r.err;
  r = cli({"bench", "--suite", "hidden", "--json", json});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no benchmarks in suite 'hidden'"), std::string::npos) << r.err;
  r = cli({"test", "--filter", "^nothing$", "--json", json});  // the default suites
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the default suites match --filter '^nothing$'"), std::string::npos) << r.err;

  r = cli({"test", "--suite", "fake", "--filter", "layer/GELU", "--allow-empty", "--json", json});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: no test cases"), std::string::npos) << r.err;
  std::ifstream in(json);
  EXPECT_EQ(nlohmann::json::parse(in)["records"].size(), 0u);
  fs::remove_all(dir);
}

TEST(Cli, ListShowsSuitesThenTheCasesOfNamedOnes) {
  CliRun r = cli({"list"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("suite"), std::string::npos);
  for (const char* row : {"fake", "hidden", "broken"})
    EXPECT_NE(r.out.find(std::string("\n") + row + " "), std::string::npos) << row << '\n' << r.out;
  EXPECT_EQ(r.out.find("add/float32/pass"), std::string::npos) << r.out;  // no cases
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex(R"(\nfake +in-process +4 +3  yes )"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex(R"(\nhidden +in-process +0 +0  no )"))) << r.out;

  r = cli({"list", "--filter", "float32"});
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex(R"(\nfake +in-process +3 +3 )"))) << r.out;

  r = cli({"list", "--suite", "fake", "--filter", "^add/"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("  test   add/float32/pass\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("mul/float64/skip"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("hidden"), std::string::npos) << r.out;
}

TEST(Cli, JsonThatIsADirectoryFailsBeforeTheRun) {
  const fs::path dir = temp_dir();
  const CliRun r = cli({"test", "--suite", "fake", "--json", dir.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--json " + dir.string() + ": is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("add/float32/pass"), std::string::npos) << r.err;  // no case ran
  const CliRun null = cli({"test", "--suite", "fake", "--filter", "pass$", "--json", "/dev/null"});
  EXPECT_EQ(null.code, 0) << null.err;
  struct stat st {};
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  fs::remove_all(dir);
}

// The TRAINBENCH_PYTHON hint belongs only to an interpreter that cannot start or cannot import
// the report's dependencies; a bad input is the generator's one line, nothing added.
TEST(Report, PythonHintOnlyWhenTheInterpreterCannotRunTheReport) {
  const fs::path dir = temp_dir();
  const fs::path input = dir / "in.json";
  std::ofstream(input) << "{}";
  const std::string hint = "TRAINBENCH_PYTHON";
  auto report_error = [&](const std::string& python) -> std::optional<th::ReportError> {
    ScopedEnv env("TRAINBENCH_PYTHON", python);
    try {
      capture_fd(2, [&] { th::run_report({{input}, dir / "r"}); });
    } catch (const th::ReportError& e) {
      return e;
    }
    return std::nullopt;
  };
  // Cannot start: missing, not executable, a directory.
  for (const std::string& python :
       {(dir / "no_python").string(), write_script(dir / "noexec", "exit 0", fs::perms::owner_read).string(),
        dir.string()}) {
    if (python.find("noexec") != std::string::npos && ::access(python.c_str(), X_OK) == 0) continue;
    const auto e = report_error(python);
    ASSERT_TRUE(e) << python;
    EXPECT_EQ(e->exit_code, 127) << python;
    EXPECT_FALSE(e->reported);
    EXPECT_NE(std::string(e->what()).find("cannot start the Python interpreter '" + python + "'"), std::string::npos)
        << e->what();
    EXPECT_NE(std::string(e->what()).find(hint), std::string::npos) << e->what();
  }
  // Started, but the package says it cannot import a dependency (its exit status 3).
  auto e = report_error(write_script(dir / "py3", "echo 'cannot import matplotlib' >&2; exit 3").string());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_NE(std::string(e->what()).find(hint), std::string::npos) << e->what();
  // Bad input (2): already said by the generator.
  e = report_error(write_script(dir / "py2", "echo 'in.json: not UTF-8' >&2; exit 2").string());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 2);
  EXPECT_TRUE(e->reported);
  // Any other failure, including an interpreter that ran and exited 127: no hint.
  for (int code : {1, 127, 139}) {
    e = report_error(write_script(dir / "pyx", "exit " + std::to_string(code)).string());
    ASSERT_TRUE(e) << code;
    EXPECT_EQ(e->exit_code, code);
    EXPECT_EQ(std::string(e->what()).find(hint), std::string::npos) << e->what();
  }
  // Exit 0 without a report: not a Python at all.
  e = report_error(write_script(dir / "true", "exit 0").string());
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find(hint), std::string::npos) << e->what();

  // `trainbench report` adds nothing to the generator's line and exits 2.
  {
    ScopedEnv env("TRAINBENCH_PYTHON", (dir / "py2").string());
    const CliRun r = cli({"report", input.string()});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "in.json: not UTF-8\n");
  }
  fs::remove_all(dir);
}

// The same with the real interpreter and package: a bad input is one line and exit 2; a
// dependency that cannot be imported is exit 3 and the hint.
TEST(Report, RealGeneratorBadInputAndMissingDependency) {
  const std::string python = TB_TEST_PYTHON;
  if (python.empty() || !fs::exists(python)) GTEST_SKIP() << "no venv python";
  const fs::path dir = temp_dir();
  const fs::path input = dir / "latin1.json";
  std::ofstream(input, std::ios::binary) << "{\"schema\": \"caf\xe9\"}";
  ScopedEnv env("TRAINBENCH_PYTHON", python);
  CliRun r = cli({"report", "--out", (dir / "r").string(), input.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "trainbench_reports: error: " + input.string() +
                       ": not UTF-8 text (byte 0xe9 at offset 15); result files are UTF-8 JSON\n");
  const std::string sample = std::string(TB_SOURCE_DIR) + "/reports/tests/sample.json";
  r = cli({"report", "--out", input.string(), sample});  // --out an existing file
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exists and is not a folder"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("TRAINBENCH_PYTHON"), std::string::npos) << r.err;

  // A matplotlib that fails to import, first on PYTHONPATH after the package.
  fs::create_directories(dir / "shadow" / "matplotlib");
  std::ofstream(dir / "shadow" / "matplotlib" / "__init__.py") << "raise ImportError('broken matplotlib')\n";
  ScopedEnv path("PYTHONPATH", (dir / "shadow").string());
  r = cli({"report", "--out", (dir / "r").string(), input.string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot import"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TRAINBENCH_PYTHON"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Traceback"), std::string::npos) << r.err;
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
    r.status = th::status_from_string(status).value();
    r.message = status == "pass" ? "" : "rank 1 died";
    r.metrics = {{"samples_per_s", sps}, {"world", 2}, {"backend", "mpi"}};
    return r;
  };
  const std::vector<std::vector<tb::harness::Record>> rounds = {{rec("a", "pass", 100), rec("b", "pass", 10)},
                                                                {rec("a", "pass", 300), rec("b", "error", 0)}};
  const auto out = tb::harness::average_rounds(rounds);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].case_name, "a");
  EXPECT_EQ(out[0].status, th::Status::Pass);
  EXPECT_DOUBLE_EQ(out[0].metrics["samples_per_s"].get<double>(), 200);
  EXPECT_EQ(out[0].metrics["rounds"].get<int>(), 2);
  EXPECT_EQ(out[0].metrics["backend"], "mpi");
  EXPECT_EQ(out[1].status, th::Status::Error);
  EXPECT_EQ(out[1].message, "rank 1 died");
  EXPECT_DOUBLE_EQ(out[1].metrics["samples_per_s"].get<double>(), 10);  // the failed round is left out
  EXPECT_EQ(out[1].metrics["rounds"].get<int>(), 1);
  // One round: records pass through, no `rounds` metric.
  const auto single = tb::harness::average_rounds({rounds[0]});
  EXPECT_FALSE(single[0].metrics.contains("rounds"));
}

// Status is an enum in C++ and the schema's strings in JSON, both ways; a record another program
// wrote with a status outside the schema is an error that says so, never a pass.
TEST(Status, SerializesToTheSchemaStringsAndBack) {
  for (th::Status s : {th::Status::Pass, th::Status::Skip, th::Status::Fail, th::Status::Error}) {
    th::Record r;
    r.status = s;
    const nlohmann::json j = th::record_to_json(r);
    EXPECT_EQ(j["status"], std::string(th::to_string(s)));
    EXPECT_EQ(th::record_from_json(j).status, s);
  }
  EXPECT_EQ(th::record_from_json(nlohmann::json{{"case", "x"}}).status, th::Status::Error);
  const th::Record odd = th::record_from_json(nlohmann::json{{"case", "x"}, {"status", "ok"}, {"message", "hi"}});
  EXPECT_EQ(odd.status, th::Status::Error);
  EXPECT_EQ(odd.message, "status 'ok' is not pass, skip, fail or error: hi");
  EXPECT_LT(th::Status::Pass, th::Status::Skip);  // severity order: merges keep the greatest
  EXPECT_LT(th::Status::Skip, th::Status::Fail);
  EXPECT_LT(th::Status::Fail, th::Status::Error);
}
