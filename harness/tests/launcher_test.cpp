// The launcher on plain shell programs (no engine, no MPI code in the ranks): output split by
// rank, exit statuses passed through, and a hanging job killed at its deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/distributed.h"
#include "harness/launcher.h"

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tb_launcher_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(Launcher, SplitsOutputByRankAndKeepsLogs) {
  LaunchSpec spec;
  spec.ranks = 3;
  spec.run_dir = fresh_dir("split");
  spec.timeout = std::chrono::seconds(60);
  spec.env["TB_LAUNCH_TEST_VALUE"] = "forty-two";
  spec.argv = {"sh", "-c", "echo out $OMPI_COMM_WORLD_RANK $TB_LAUNCH_TEST_VALUE; echo err $OMPI_COMM_WORLD_RANK >&2"};
  const LaunchResult res = launch(spec);
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  ASSERT_EQ(res.rank_output.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const std::string& out = res.rank_output[std::size_t(r)];
    EXPECT_NE(out.find("out " + std::to_string(r) + " forty-two"), std::string::npos) << out;
    EXPECT_NE(out.find("err " + std::to_string(r)), std::string::npos) << out;
    std::ifstream log(spec.run_dir / ("rank" + std::to_string(r) + ".log"));
    std::stringstream ss;
    ss << log.rdbuf();
    EXPECT_EQ(ss.str(), out);
  }
  fs::remove_all(spec.run_dir);
}

TEST(Launcher, ReportsAFailingRank) {
  LaunchSpec spec;
  spec.ranks = 2;
  spec.run_dir = fresh_dir("fail");
  spec.timeout = std::chrono::seconds(60);
  spec.argv = {"sh", "-c", "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then echo boom; exit 7; fi; echo fine"};
  const LaunchResult res = launch(spec);
  EXPECT_FALSE(res.ok());
  EXPECT_FALSE(res.timed_out);
  EXPECT_NE(res.exit_code, 0);
  EXPECT_NE(res.diagnosis().find("boom"), std::string::npos) << res.diagnosis();
  fs::remove_all(spec.run_dir);
}

TEST(Launcher, KillsAHangingJobAtItsDeadline) {
  LaunchSpec spec;
  spec.ranks = 2;
  spec.run_dir = fresh_dir("hang");
  spec.timeout = std::chrono::seconds(2);
  spec.argv = {"sh", "-c", "echo started; exec sleep 300"};
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchResult res = launch(spec);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(res.timed_out);
  EXPECT_FALSE(res.ok());
  EXPECT_LT(s, 2 + 10.0) << "the launcher waited too long for a hanging job";
  EXPECT_NE(res.diagnosis().find("did not finish within"), std::string::npos);
  fs::remove_all(spec.run_dir);
}

TEST(Launcher, MpirunCommandCarriesTheRootAndOversubscribeFlags) {
  LaunchSpec spec;
  spec.ranks = 4;
  spec.argv = {"prog", "arg"};
  spec.env["X"] = "1";
  const std::vector<std::string> cmd = mpirun_command(spec);
  auto has = [&](const std::string& a) { return std::find(cmd.begin(), cmd.end(), a) != cmd.end(); };
  EXPECT_TRUE(has("--oversubscribe"));
  EXPECT_EQ(has("--allow-run-as-root"), ::geteuid() == 0);
  EXPECT_EQ(cmd.back(), "arg");
  EXPECT_TRUE(has("X"));
  spec.hostfile = "hosts.txt";
  EXPECT_FALSE(has("--hostfile"));
  const std::vector<std::string> multi = mpirun_command(spec);
  EXPECT_NE(std::find(multi.begin(), multi.end(), "hosts.txt"), multi.end());
  EXPECT_EQ(std::find(multi.begin(), multi.end(), "--oversubscribe"), multi.end());
}

TEST(DistributedNames, WorldSizeIsInEveryRankCaseName) {
  EXPECT_EQ(rank_case_name("mpi/all_reduce/sum/float32/n7", 2), "mpi/all_reduce/sum/float32/n7/w2");
  EXPECT_EQ(rank_case_name("all_reduce/float32/8/w2/engine", 2), "all_reduce/float32/8/w2/engine");
  EXPECT_EQ(rank_case_name("ddp/mlp/w4/engine", 2), "ddp/mlp/w4/engine/w2");
}

}  // namespace
}  // namespace tb::harness
