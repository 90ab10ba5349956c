// `trainbench scenario` as users run it: the built command in a child process. The argument
// errors (an unknown name, a bad regex, bad --seeds / --backend / --timeout) exit 2 naming the
// problem; `list` shows every hang scenario with its fault and diagnosis; and a few scenarios run
// end to end on MPI and Gloo (real ranks; skipped without mpirun), each record a passing
// "scenario" with no orphan and a time to diagnosis.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tests/scratch_dir.h"
#include "harness/scenario.h"
#include "harness/subprocess.h"

namespace {

namespace fs = std::filesystem;

tb::harness::SubprocessResult trainbench(std::vector<std::string> args, int timeout_s = 60) {
  tb::harness::SubprocessSpec spec;
  args.insert(args.begin(), TB_TRAINBENCH);
  spec.argv = std::move(args);
  spec.timeout = std::chrono::seconds(timeout_s);
  return tb::harness::run_subprocess(spec);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ScenarioCli, ListShowsEveryHangScenario) {
  const auto res = trainbench({"scenario", "list"});
  ASSERT_EQ(res.exit_code, 0) << res.out << res.err;
  for (const char* name :
       {"hang/rank_exits", "hang/frozen_rank", "hang/op_mismatch", "hang/shape_mismatch", "hang/dtype_mismatch",
        "hang/barrier_skipped", "hang/extra_collective", "hang/rank_throws", "hang/rank_never_starts",
        "hang/ddp_unused_parameter", "hang/ddp_uneven_batches", "hang/ddp_uneven_batches_join", "hang/straggler"})
    EXPECT_TRUE(has(res.out, std::string(name) + "\n") || has(res.out, std::string(name) + "  (")) << name << res.out;
  EXPECT_TRUE(has(res.out, "  fault:     ")) << res.out;
  EXPECT_TRUE(has(res.out, "  diagnosis: ")) << res.out;
}

TEST(ScenarioCli, UnknownNameIsAnError) {
  const auto res = trainbench({"scenario", "run", "hang/no_such_thing"});
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
  EXPECT_TRUE(has(res.err, "no scenario named or matching 'hang/no_such_thing'")) << res.err;
}

TEST(ScenarioCli, BadRegexIsAnError) {
  const auto res = trainbench({"scenario", "run", "hang/(op"});
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
  EXPECT_TRUE(has(res.err, "invalid scenario regex 'hang/(op'")) << res.err;
}

TEST(ScenarioCli, BadOptionsAreErrors) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--seeds", "0"},
                                              {"--seeds", "x"},
                                              {"--seeds", "-3"},
                                              {"--backend", "nccl"},
                                              {"--timeout", "0"}}) {
    std::vector<std::string> args = {"scenario", "run", "hang/op_mismatch"};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto res = trainbench(args);
    EXPECT_EQ(res.exit_code, 2) << bad[0] << " " << bad[1] << ": " << res.out << res.err;
    EXPECT_TRUE(has(res.err, bad[0])) << res.err;
  }
  const auto none = trainbench({"scenario", "run"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  const auto sub = trainbench({"scenario"});
  EXPECT_EQ(sub.exit_code, 2) << sub.err;
}

// Runs on both backends: a dead rank (diagnosed by the watchdog's dead-peer check and the dumps)
// and an op mismatch (raised on every rank by the fingerprint check).
TEST(ScenarioCli, ScenariosRunEndToEnd) {
  if (::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not found";
  const tb::testing::ScratchDir dir("tb_scenario_cli_");
  const fs::path json = dir / "s.json";
  const auto res = trainbench({"scenario", "run", "^hang/(rank_exits|op_mismatch)$", "--timeout", "3", "--json",
                               json.string()},
                              170);
  ASSERT_EQ(res.exit_code, 0) << res.out << res.err;
  EXPECT_TRUE(has(res.out, "4 passed, 0 failed, 0 skipped")) << res.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["records"].size(), 4u) << j.dump(2);
  for (const auto& r : j["records"]) {
    EXPECT_EQ(r["kind"], "scenario");
    EXPECT_EQ(r["status"], "pass") << r.dump(2);
    EXPECT_EQ(r["metrics"]["orphans"], 0) << r.dump(2);
    EXPECT_EQ(r["metrics"]["outer_kill"], 0) << r.dump(2);
    EXPECT_TRUE(r["metrics"].contains("time_to_diagnosis_s")) << r.dump(2);
    EXPECT_TRUE(r["metrics"].contains("peak_bytes_rank0")) << r.dump(2);
    EXPECT_FALSE(r["message"].get<std::string>().empty()) << r.dump(2);
  }
  const std::string s = j.dump();
  EXPECT_TRUE(has(s, "hang/op_mismatch/mpi/seed0") && has(s, "hang/op_mismatch/gloo/seed0")) << s;
}

}  // namespace

// The registry (in this process, which registers no scenario of its own): names need the hang/ or
// oom/ prefix and something after it; the shortest legal names of both prefixes register.
TEST(ScenarioRegistry, NamesArePrefixedAndUnique) {
  auto make = [](const std::string& name) {
    tb::harness::Scenario s;
    s.name = name;
    s.run = [](const tb::harness::ScenarioContext&) { return tb::harness::Record{}; };
    return s;
  };
  EXPECT_NO_THROW(tb::harness::register_scenario(make("oom/x")));
  EXPECT_NO_THROW(tb::harness::register_scenario(make("hang/x")));
  EXPECT_NE(tb::harness::find_scenario("oom/x"), nullptr);
  for (const std::string bad : {"oom/", "hang/", "hang/x/", "x/y", "", "hangx", "oom/x"})
    EXPECT_THROW(tb::harness::register_scenario(make(bad)), std::invalid_argument) << bad;
  tb::harness::Scenario no_run = make("oom/no_run");
  no_run.run = nullptr;
  EXPECT_THROW(tb::harness::register_scenario(no_run), std::invalid_argument);
}
