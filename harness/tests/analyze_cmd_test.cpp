// `trainbench analyze DUMP_DIR` as users run it: the built command in a child process, on
// synthetic dumps (text, --json, the exit statuses 0 / 1 / 2, --help) and, where mpirun is
// found, on the real dump of a hang: `trainbench launch` of two ranks where rank 1 leaves out
// all_reduce #4 (the collectives suite's watchdog demo, TRAINBENCH_WATCHDOG_DEMO).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/subprocess.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

tb::harness::SubprocessResult trainbench(std::vector<std::string> args,
                                         std::map<std::string, std::optional<std::string>> env = {}) {
  tb::harness::SubprocessSpec spec;
  args.insert(args.begin(), TB_TRAINBENCH);
  spec.argv = std::move(args);
  spec.timeout = std::chrono::seconds(120);
  spec.env = std::move(env);
  return tb::harness::run_subprocess(spec);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

json call(uint64_t seq, const std::string& op, const std::string& state, const std::string& dtype = "float32") {
  return {{"seq", seq},     {"collective_seq", seq},
          {"op", op},       {"detail", op == "all_reduce" ? "sum" : "tensor"},
          {"dtype", dtype}, {"shapes", {{1024}}},
          {"state", state}, {"error", ""}};
}

class AnalyzeCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("tb_analyze_cli_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  void write_rank(int rank, int size, const json& entries) {
    std::ofstream(dir / ("flight_recorder_rank" + std::to_string(rank) + ".json"))
        << json{{"backend", "mpi"}, {"rank", rank}, {"size", size}, {"entries", entries}}.dump(2);
  }
};

TEST_F(AnalyzeCli, ConsistentDumpsExitZero) {
  for (int r : {0, 1}) write_rank(r, 2, {call(1, "all_reduce", "completed"), call(2, "all_reduce", "completed")});
  const auto res = trainbench({"analyze", dir.string()});
  EXPECT_EQ(res.exit_code, 0) << res.out << res.err;
  EXPECT_TRUE(has(res.out, "flight-recorder dumps: 2 of 2 ranks (backend mpi)\nconsistent:")) << res.out;
}

TEST_F(AnalyzeCli, OpMismatchAsTextAndJson) {
  write_rank(0, 2, {call(1, "all_reduce", "completed"), call(2, "all_reduce", "started")});
  write_rank(1, 2, {call(1, "all_reduce", "completed"), call(2, "all_gather", "started")});
  auto res = trainbench({"analyze", dir.string()});
  EXPECT_EQ(res.exit_code, 1) << res.out << res.err;
  EXPECT_TRUE(has(res.out,
                  "diagnosis: op_mismatch: collective #2 differs between ranks: rank 0: all_reduce (float32 [1024], "
                  "sum); rank 1: all_gather (float32 [1024], tensor) (different ops)\n"))
      << res.out;
  EXPECT_TRUE(has(res.out, "diverged at collective #2\n")) << res.out;
  res = trainbench({"analyze", dir.string(), "--json"});
  EXPECT_EQ(res.exit_code, 1) << res.err;
  const json j = json::parse(res.out);
  EXPECT_EQ(j["findings"][0]["kind"], "op_mismatch");
  EXPECT_EQ(j["diverged_at_collective"], 2);
  EXPECT_EQ(j["ranks"][1]["last_started"]["op"], "all_gather");
}

// A 55-byte dump may claim 2^20 ranks: the command used 1.8 GB (2.5 GB more with --json) and,
// with a completed collective (every other rank absent), wrote 275 MB of text. The ranks nothing is
// known of are one run (Note [Ranks nothing is known of] in engine/dist/dump_analysis.h).
TEST_F(AnalyzeCli, ClaimedMillionRanksGiveAFewLines) {
  for (const json& entries : {json::array(), json::array({call(1, "barrier", "completed")})}) {
    write_rank(0, 1 << 20, entries);
    for (const bool as_json : {false, true}) {
      std::vector<std::string> args = {"analyze", dir.string()};
      if (as_json) args.push_back("--json");
      const auto t0 = std::chrono::steady_clock::now();
      const auto res = trainbench(args);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(res.exit_code, 1) << res.err;
      EXPECT_LT(res.out.size(), 4096u) << res.out.substr(0, 4096);
      EXPECT_LT(s, 10.0);
      const std::string run = entries.empty() ? "ranks 1-1048575: no dump; never joined\n"
                                              : "ranks 1-1048575: no dump; joined (collective #1 completed, which "
                                                "needs every rank)\n";
      if (!as_json) EXPECT_TRUE(has(res.out, run)) << res.out;
      if (!as_json) continue;
      const json j = json::parse(res.out);
      ASSERT_EQ(j["ranks"].size(), 2u) << res.out;
      EXPECT_EQ(j["ranks"][1]["first_rank"], 1);
      EXPECT_EQ(j["ranks"][1]["last_rank"], 1048575);
      EXPECT_EQ(j["ranks"][1]["presence"], entries.empty() ? "never joined" : "absent");
      ASSERT_EQ(j["findings"].size(), 1u) << res.out;
      EXPECT_EQ(j["findings"][0]["ranks"], json::parse(R"([{"first_rank": 1, "last_rank": 1048575}])"));
    }
  }
}

TEST_F(AnalyzeCli, BadInputExitsTwo) {
  auto res = trainbench({"analyze", dir.string()});  // empty
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_TRUE(has(res.err, "trainbench: analyze: " + dir.string() + ": no flight-recorder dumps")) << res.err;
  std::ofstream(dir / "flight_recorder_rank0.json") << std::string(5000, '[');
  res = trainbench({"analyze", dir.string()});
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_TRUE(has(res.err, "flight_recorder_rank0.json: JSON nested deeper than 128 levels")) << res.err;
  res = trainbench({"analyze"});
  EXPECT_EQ(res.exit_code, 2);
  EXPECT_TRUE(has(res.err, "dump_dir is required")) << res.err;
}

TEST_F(AnalyzeCli, Help) {
  const auto res = trainbench({"--help"});
  EXPECT_EQ(res.exit_code, 0);
  EXPECT_TRUE(has(res.out, "analyze")) << res.out;
  const auto sub = trainbench({"analyze", "--help"});
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_TRUE(has(sub.out, "--json")) << sub.out;
}

// A real hang: the launcher runs two ranks; rank 1 skips all_reduce #4 and sleeps, rank 0's
// watchdog (3 s) writes its dump into the launch's run dir. Rank 1 writes one too when mpirun's
// SIGTERM reaches it in time (its watchdog names rank 0's failure), or none: either way the
// analyzer must name rank 1 as the rank that never arrived at #4 (lagging, or absent but joined).
TEST_F(AnalyzeCli, RealHangDumpFromTheLauncher) {
  const auto which = tb::harness::run_subprocess({.argv = {"sh", "-c", "command -v mpirun"}});
  if (!which.ok()) GTEST_SKIP() << "mpirun not found";
  // The variables go to the ranks only (through env): the launching trainbench would run the demo itself.
  const auto launch = trainbench({"launch", "-n", "2", "--timeout", "90", "--", "env",
                                  "TRAINBENCH_WATCHDOG_DEMO=mpi:1:4", "TRAINBENCH_DIST_TIMEOUT=3", TB_TRAINBENCH,
                                  "list"});
  const std::string all = launch.out + launch.err;
  if (has(all, "backend mpi not built")) GTEST_SKIP() << "mpi backend not built";
  ASSERT_EQ(launch.exit_code, 3) << all;  // the watchdog's status
  std::smatch m;
  ASSERT_TRUE(std::regex_search(all, m, std::regex("rank logs in (\\S+)"))) << all;
  const fs::path run_dir = m[1].str();
  const auto res = trainbench({"analyze", run_dir.string()});
  fs::remove_all(run_dir);
  std::error_code ec;  // results/ranks, if the launch made them and they are empty now
  fs::remove(run_dir.parent_path(), ec);
  fs::remove(run_dir.parent_path().parent_path(), ec);
  EXPECT_EQ(res.exit_code, 1) << res.out << res.err;
  EXPECT_TRUE(std::regex_search(res.out, std::regex("diagnosis: (lagging|rank_absent): rank 1 "))) << res.out;
  EXPECT_TRUE(has(res.out, "never arrived at #4 all_reduce (float32 [1024], sum), which rank 0 waits in")) << res.out;
  EXPECT_TRUE(has(res.out, "diverged at collective #4\n")) << res.out;
  EXPECT_TRUE(has(res.out, "    last started:   #4 all_reduce (float32 [1024], sum) [started]\n")) << res.out;
}

}  // namespace
