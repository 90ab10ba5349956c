// The launcher on plain shell programs (no engine, no MPI code in the ranks): output split by
// rank, exit statuses passed through, and a hanging job killed at its deadline.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/dist/placement.h"
#include "harness/distributed.h"
#include "harness/launcher.h"

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

// A test's run folder, removed when the test ends, a failed ASSERT_* included.
tb::testing::ScratchDir fresh_dir(const std::string& name) {
  return tb::testing::ScratchDir("tb_launcher_test_" + name + "_");
}

// Two ranks of `argv` in `run_dir`, killed after `timeout`.
LaunchSpec two_ranks(const fs::path& run_dir, std::vector<std::string> argv,
                     std::chrono::seconds timeout = std::chrono::seconds(2)) {
  LaunchSpec spec;
  spec.ranks = 2;
  spec.run_dir = run_dir;
  spec.timeout = timeout;
  spec.argv = std::move(argv);
  return spec;
}

// launch(spec), its wall time in `took`.
LaunchResult timed_launch(const LaunchSpec& spec, double& took) {
  const auto t0 = std::chrono::steady_clock::now();
  LaunchResult res = launch(spec);
  took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

// A run that hit its timeout left nothing alive, counted by the launcher and by us.
void expect_timed_out_and_gone(const LaunchResult& res, const LaunchSpec& spec) {
  EXPECT_TRUE(res.timed_out);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.orphans, 0);
  EXPECT_TRUE(processes_in_run(spec.run_dir).empty());
}

// Until both ranks have touched up<R> in `dir` (a script's first step), and a little more for
// the exec that follows the touch.
void wait_for_ranks_up(const fs::path& dir) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(fs::exists(dir / "up0") && fs::exists(dir / "up1")) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

TEST(Launcher, SplitsOutputByRankAndKeepsLogs) {
  const tb::testing::ScratchDir run = fresh_dir("split");
  LaunchSpec spec;
  spec.ranks = 3;
  spec.run_dir = run;
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
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A rank's line longer than mpirun's chunks (4 KiB), other ranks' lines arriving between its
// chunks: whole in its output, its log and the echo. A std::regex over the line overflowed the
// stack from about 40,000 characters on (SIGSEGV of the launcher).
TEST(Launcher, ALongLineArrivesWhole) {
  const tb::testing::ScratchDir run = fresh_dir("long_line");
  LaunchSpec spec =
      two_ranks(run,
                {"sh", "-c",
                 "if [ $OMPI_COMM_WORLD_RANK = 0 ]; then for k in 1 2 3 4; do head -c 262144 /dev/zero | tr '\\0' x; "
                 "sleep 0.1; done; echo; else for i in 1 2 3 4 5; do echo r1-$i; sleep 0.08; done; fi"},
                std::chrono::seconds(60));
  std::ostringstream echo;
  spec.echo = &echo;
  const LaunchResult res = launch(spec);
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  const std::string line(std::size_t(1) << 20, 'x');
  EXPECT_TRUE(res.rank_output[0] == line + "\n") << res.rank_output[0].size() << " bytes";
  EXPECT_TRUE(read_file(spec.run_dir / "rank0.log") == line + "\n");
  EXPECT_NE(echo.str().find("[rank 0] " + line + "\n"), std::string::npos);
  EXPECT_EQ(res.rank_output[1], "r1-1\nr1-2\nr1-3\nr1-4\nr1-5\n");
  EXPECT_EQ(read_file(spec.run_dir / "rank1.log"), res.rank_output[1]);
}

// Each rank writes the start of a line (stderr and stdout), waits until the other has written
// its start, then ends its lines: mpirun forwards "[1,0]<stderr>:r0-start [1,1]<stderr>:r1-start
// [1,0]<stderr>:r0-end\n". Each piece is its own rank's, each line stays whole.
TEST(Launcher, PiecesOfALineGoToTheRankOfTheirOwnTag) {
  const tb::testing::ScratchDir run = fresh_dir("pieces");
  LaunchSpec spec = two_ranks(run,
                              {"sh", "-c",
                               "d=$TRAINBENCH_DIST_DIR; r=$OMPI_COMM_WORLD_RANK; o=$((1 - r)); "
                               "printf \"r$r-start \" >&2; printf \"r$r-out \"; touch \"$d/s$r\"; "
                               "while [ ! -e \"$d/s$o\" ]; do sleep 0.02; done; sleep 0.3; "
                               "echo \"r$r-end\" >&2; echo \"r$r-out-end\""},
                              std::chrono::seconds(60));
  std::ostringstream echo;
  spec.echo = &echo;
  const LaunchResult res = launch(spec);
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  for (int r = 0; r < 2; ++r) {
    const std::string me = "r" + std::to_string(r);
    const std::string err = me + "-start " + me + "-end\n", out = me + "-out " + me + "-out-end\n";
    const std::string& got = res.rank_output[std::size_t(r)];
    EXPECT_TRUE(got == err + out || got == out + err) << got;  // stdout and stderr are forwarded apart
    EXPECT_EQ(read_file(spec.run_dir / ("rank" + std::to_string(r) + ".log")), got);
    EXPECT_NE(echo.str().find("[rank " + std::to_string(r) + "] " + err), std::string::npos) << echo.str();
    EXPECT_NE(echo.str().find("[rank " + std::to_string(r) + "] " + out), std::string::npos) << echo.str();
  }
  EXPECT_EQ(res.launcher_output.find("r0-"), std::string::npos) << res.launcher_output;
  EXPECT_EQ(res.launcher_output.find("r1-"), std::string::npos) << res.launcher_output;
}

using Lines = std::vector<std::pair<int, std::string>>;

// The lines TaggedOutputSplitter makes of `stream` fed `piece` bytes at a time (0: all at once).
Lines split_tagged(const std::string& stream, std::size_t piece, int ranks = 2) {
  Lines lines;
  TaggedOutputSplitter splitter(ranks, [&](int r, std::string&& l) { lines.emplace_back(r, std::move(l)); });
  const std::size_t step = piece ? piece : std::max<std::size_t>(stream.size(), 1);
  for (std::size_t at = 0; at < stream.size(); at += step) splitter.feed(std::string_view(stream).substr(at, step));
  splitter.finish();
  return lines;
}

// The same lines however the stream is cut into reads (a tag may be cut too).
void expect_lines(const std::string& stream, const Lines& want, int ranks = 2) {
  for (const std::size_t piece : {0, 1, 2, 3, 7, 16})
    EXPECT_EQ(split_tagged(stream, piece, ranks), want) << "fed " << piece << " bytes at a time: " << stream;
}

TEST(TaggedOutput, EachPieceGoesToTheRankOfItsOwnTag) {
  expect_lines("[1,0]<stderr>:r0-start [1,1]<stderr>:r1-start [1,0]<stderr>:r0-end\n[1,1]<stderr>:r1-end\n",
               {{0, "r0-start r0-end"}, {1, "r1-start r1-end"}});
  // A rank's stdout and stderr are lines of their own.
  expect_lines("[1,0]<stdout>:part[1,0]<stderr>:err\n[1,0]<stdout>:ial\n[1,1]<stddiag>:diag\n",
               {{0, "err"}, {0, "partial"}, {1, "diag"}});
  // Several lines in one chunk: the tag after each newline; an empty line is a line.
  expect_lines("[1,1]<stdout>:a\n[1,1]<stdout>:\n[1,1]<stdout>:b\n", {{1, "a"}, {1, ""}, {1, "b"}});
}

TEST(TaggedOutput, UntaggedLinesAreTheLaunchers) {
  expect_lines("-----\n[1,0]<stdout>:a\nmpirun noticed that process rank 1 [host:12] exited [1,0]\n[1,1]<stdout>:b\n",
               {{-1, "-----"}, {0, "a"}, {-1, "mpirun noticed that process rank 1 [host:12] exited [1,0]"}, {1, "b"}});
  // A tag naming a rank outside the job: the launcher's, shown with its tag.
  expect_lines("[1,2]<stdout>:hi\n[1,12345678901]<stdout>:x\n",
               {{-1, "[1,2]<stdout>:hi"}, {-1, "[1,12345678901]<stdout>:x"}});
}

TEST(TaggedOutput, TextThatIsNoTagStaysText) {
  const std::string text = "x[1] [2,3 [a,b]<stdout>: [1,0]<stdin>: [1,0]<stdout> [1,0]<stdoutt 10%\r20% [";
  expect_lines("[1,1]<stdout>:" + text + "\n", {{1, text}});
}

TEST(TaggedOutput, LinesWithoutTheirNewlineComeAtTheEnd) {
  expect_lines("[1,0]<stdout>:a[1,1]<stderr>:b[1,0]<stdout>:c", {{0, "ac"}, {1, "b"}});
  // A tag cut off by the end of the stream is text.
  expect_lines("[1,0]<std", {{-1, "[1,0]<std"}});
  expect_lines("[1,0]<stdout>:x\n[1,0]<st", {{0, "x"}, {-1, "[1,0]<st"}});
  expect_lines("[1,0]<stdout>:x[1,0]<st", {{0, "x[1,0]<st"}});
  expect_lines("", {});
}

// 1 MiB in mpirun's chunks of 4 KiB, rank 1's lines between them: one line of rank 0.
TEST(TaggedOutput, AMegabyteLineInChunksIsWhole) {
  const std::string line(std::size_t(1) << 20, 'x');
  std::string stream;
  Lines want;
  for (std::size_t at = 0; at < line.size(); at += 4096) {
    stream += "[1,0]<stdout>:" + line.substr(at, 4096);
    if (at % (64 * 4096) == 0) {
      stream += "[1,1]<stdout>:r1-" + std::to_string(at) + "\n";
      want.emplace_back(1, "r1-" + std::to_string(at));
    }
  }
  stream += "[1,0]<stdout>:\n";
  want.emplace_back(0, line);
  for (const std::size_t piece : {0, 1000, 4096, 65536}) EXPECT_TRUE(split_tagged(stream, piece) == want) << piece;
}

TEST(Launcher, ReportsAFailingRank) {
  const tb::testing::ScratchDir run = fresh_dir("fail");
  LaunchSpec spec;
  spec.ranks = 2;
  spec.run_dir = run;
  spec.timeout = std::chrono::seconds(60);
  spec.argv = {"sh", "-c", "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then echo boom; exit 7; fi; echo fine"};
  const LaunchResult res = launch(spec);
  EXPECT_FALSE(res.ok());
  EXPECT_FALSE(res.timed_out);
  EXPECT_NE(res.exit_code, 0);
  EXPECT_NE(res.diagnosis().find("boom"), std::string::npos) << res.diagnosis();
}

TEST(Launcher, KillsAHangingJobAtItsDeadline) {
  const tb::testing::ScratchDir run = fresh_dir("hang");
  const LaunchSpec spec = two_ranks(run, {"sh", "-c", "echo started; exec sleep 300"});
  double took = 0;
  const LaunchResult res = timed_launch(spec, took);
  expect_timed_out_and_gone(res, spec);
  EXPECT_LT(took, 2 + 15.0) << "the launcher waited too long for a hanging job";
  EXPECT_NE(res.diagnosis().find("did not finish within"), std::string::npos);
}

TEST(Launcher, ProcessesInRunSeesTheRanksWhileTheyRun) {
  const tb::testing::ScratchDir run = fresh_dir("procs");
  const LaunchSpec spec =
      two_ranks(run, {"sh", "-c", "touch \"$TRAINBENCH_DIST_DIR/up$OMPI_COMM_WORLD_RANK\"; exec sleep 300"},
                std::chrono::seconds(30));
  LaunchResult res;
  std::thread runner([&] { res = launch(spec); });
  wait_for_ranks_up(spec.run_dir);
  const std::vector<int> live = processes_in_run(spec.run_dir);
  EXPECT_GE(live.size(), 3u) << "mpirun and 2 ranks";
  for (int pid : live) ::kill(pid, SIGKILL);
  runner.join();
  EXPECT_EQ(res.orphans, 0);
  EXPECT_TRUE(processes_in_run(spec.run_dir).empty());
  EXPECT_TRUE(processes_in_run(spec.run_dir / "other").empty());
}

TEST(Launcher, LeavesNoOrphanWhenARankForksAChildThatIgnoresSigterm) {
  // The grandchild leaves the rank's process group and session and ignores SIGTERM: only the
  // environment scan finds it.
  const tb::testing::ScratchDir run = fresh_dir("orphan");
  const LaunchSpec spec = two_ranks(run,
                                    {"sh", "-c", "trap '' TERM; setsid sh -c \"trap '' TERM; sleep 300\" & sleep 300"});
  double took = 0;
  const LaunchResult res = timed_launch(spec, took);
  expect_timed_out_and_gone(res, spec);
  EXPECT_LT(took, 2 + 15.0);
}

// Past the timeout every rank's stack is read before the kill, naming where each rank is.
TEST(Launcher, TimeoutPrintsEveryRanksStackThenKills) {
  const tb::testing::ScratchDir run = fresh_dir("stacks");
  LaunchSpec spec = two_ranks(run, {TB_LAUNCHER_SLEEPER, "sleep"});
  std::ostringstream echo;
  spec.echo = &echo;
  double took = 0;
  const LaunchResult res = timed_launch(spec, took);
  expect_timed_out_and_gone(res, spec);
  EXPECT_LT(took, 2 + 15.0);
  ASSERT_EQ(res.stacks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(res.stacks[std::size_t(r)].find("rank_sleeps_in_here"), std::string::npos) << res.stacks[std::size_t(r)];
    EXPECT_TRUE(fs::exists(spec.run_dir / ("rank" + std::to_string(r) + ".stack")));
  }
  EXPECT_NE(res.diagnosis().find("rank_sleeps_in_here"), std::string::npos) << res.diagnosis();
  EXPECT_NE(echo.str().find("[rank 1]   "), std::string::npos) << echo.str();
}

// A frozen rank cannot run a signal handler; ptrace still reads it, and SIGKILL still ends it.
TEST(Launcher, AStoppedRankStillHasItsStackAndIsKilled) {
  const tb::testing::ScratchDir run = fresh_dir("stopped");
  const LaunchSpec spec = two_ranks(run, {TB_LAUNCHER_SLEEPER, "stop", "1"});
  double took = 0;
  const LaunchResult res = timed_launch(spec, took);
  expect_timed_out_and_gone(res, spec);
  ASSERT_EQ(res.stacks.size(), 2u);
  EXPECT_NE(res.stacks[0].find("rank_sleeps_in_here"), std::string::npos) << res.stacks[0];
  EXPECT_NE(res.stacks[1].find("rank_stops_itself_here"), std::string::npos) << res.stacks[1];
}

// Two ranks that ignore SIGTERM, launched in a child process (returned) that is the launcher;
// back once the ranks are up. `setsid_child`: each rank first starts a child in a session of its
// own that ignores SIGTERM too (which mpirun does not know of).
pid_t launcher_of_stubborn_ranks(const fs::path& run_dir, bool setsid_child = false) {
  const std::string own_session = setsid_child ? "setsid sh -c \"trap '' TERM; sleep 300\" & " : "";
  const LaunchSpec spec = two_ranks(run_dir,
                                    {"sh", "-c",
                                     "trap '' TERM; " + own_session +
                                         "touch \"$TRAINBENCH_DIST_DIR/up$OMPI_COMM_WORLD_RANK\"; sleep 300"},
                                    std::chrono::seconds(60));
  const pid_t child = ::fork();
  if (child == 0) {
    launch(spec);
    ::_exit(0);  // not reached: the tests signal the launcher
  }
  if (child > 0) wait_for_ranks_up(run_dir);
  return child;
}

// SIGTERM to the launcher: the ranks are ended, nothing is left, and the launcher then dies of
// the signal as it would have without the launch.
TEST(Launcher, ASignalToTheLauncherEndsTheRunFirst) {
  const tb::testing::ScratchDir run = fresh_dir("signal");
  const pid_t child = launcher_of_stubborn_ranks(run);
  ASSERT_GT(child, 0);
  EXPECT_GE(processes_in_run(run).size(), 3u);
  ::kill(child, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_TRUE(processes_in_run(run).empty());
}

// SIGKILLs the launcher `child`, then expects every process of the run gone within 30 s (any
// left are killed, so a failure leaves nothing behind either).
void sigkill_and_expect_nothing_left(pid_t child, const fs::path& run) {
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!processes_in_run(run).empty() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::vector<int> left = processes_in_run(run);
  EXPECT_TRUE(left.empty()) << left.size() << " processes of the run outlived the launcher";
  for (int pid : left) ::kill(pid, SIGKILL);
}

// SIGKILL to the launcher (a CI job's hard timeout, the OOM killer) runs none of its code:
// mpirun, told of its parent's death, still ends the ranks, those that ignore SIGTERM included.
TEST(Launcher, ASigkillToTheLauncherStillEndsTheRun) {
  const tb::testing::ScratchDir run = fresh_dir("sigkill");
  const pid_t child = launcher_of_stubborn_ranks(run);
  ASSERT_GT(child, 0);
  EXPECT_GE(processes_in_run(run).size(), 3u);
  sigkill_and_expect_nothing_left(child, run);
}

// ... and what a rank started in a session of its own, which mpirun cannot reach: the launch's
// guard ends it (Note [A guard for a launcher killed outright] in harness/launcher.cpp).
TEST(Launcher, ASigkillToTheLauncherEndsARanksSetsidChildToo) {
  const tb::testing::ScratchDir run = fresh_dir("sigkill_setsid");
  const pid_t child = launcher_of_stubborn_ranks(run, true);
  ASSERT_GT(child, 0);
  EXPECT_GE(processes_in_run(run).size(), 5u) << "mpirun, 2 ranks and their 2 children";
  sigkill_and_expect_nothing_left(child, run);
  std::ifstream log(fs::path(run) / "launch_guard.log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("killed process"), std::string::npos) << text;
  EXPECT_NE(text.find("(sleep)"), std::string::npos) << text;
}

// A launch that ends as it should leaves its guard nothing to do: it exits at once, logs nothing.
TEST(Launcher, AGuardOfALaunchThatEndedLeavesNoTrace) {
  const tb::testing::ScratchDir run = fresh_dir("guard_quiet");
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchResult res = launch(two_ranks(run, {"true"}, std::chrono::seconds(60)));
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0)
      << "the launch waited for its guard's grace";
  EXPECT_FALSE(fs::exists(fs::path(run) / "launch_guard.log"));
}

TEST(Launcher, ForwardsTrainbenchNcclAndOmpiVariables) {
  // TRAINBENCH_SEED stands for every TRAINBENCH_* variable (a made-up one would need a row in
  // docs/env.md); the ranks here are shell scripts that only print it.
  const char* had = std::getenv("TRAINBENCH_SEED");
  const std::string previous = had ? had : "";
  ::setenv("TRAINBENCH_SEED", "4242", 1);
  ::setenv("NCCL_LAUNCH_TEST_FORWARDED", "nccl-yes", 1);
  ::setenv("OMPI_LAUNCH_TEST_FORWARDED", "ompi-yes", 1);
  const tb::testing::ScratchDir run = fresh_dir("forward");
  const LaunchSpec spec =
      two_ranks(run,
                {"sh", "-c", "echo \"got $TRAINBENCH_SEED $NCCL_LAUNCH_TEST_FORWARDED $OMPI_LAUNCH_TEST_FORWARDED\""},
                std::chrono::seconds(60));
  const std::vector<std::string> names = forwarded_variables(spec);
  for (const char* n :
       {"TRAINBENCH_SEED", "NCCL_LAUNCH_TEST_FORWARDED", "OMPI_LAUNCH_TEST_FORWARDED", "TRAINBENCH_DIST_DIR"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(std::find(names.begin(), names.end(), "HOME"), names.end());
  const LaunchResult res = launch(spec);
  if (had) ::setenv("TRAINBENCH_SEED", previous.c_str(), 1);
  else ::unsetenv("TRAINBENCH_SEED");
  ::unsetenv("NCCL_LAUNCH_TEST_FORWARDED");
  ::unsetenv("OMPI_LAUNCH_TEST_FORWARDED");
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  for (const std::string& out : res.rank_output)
    EXPECT_NE(out.find("got 4242 nccl-yes ompi-yes"), std::string::npos) << out;
}

// The caller's own place (a shell, an outer job's rank) is no rank's: not forwarded, and removed
// from the environment the ranks on this host inherit from mpirun; named in the spec it goes.
TEST(Launcher, TheCallersOwnRankIsNotPassedOn) {
  ::setenv("TRAINBENCH_RANK", "0", 1);
  ::setenv("TRAINBENCH_WORLD_SIZE", "2", 1);
  ::setenv("TRAINBENCH_LOCAL_RANK", "0", 1);
  const tb::testing::ScratchDir run = fresh_dir("own_place");
  LaunchSpec spec = two_ranks(
      run,
      {"sh", "-c", "echo place ${TRAINBENCH_RANK-unset} ${TRAINBENCH_WORLD_SIZE-unset} ${TRAINBENCH_LOCAL_RANK-unset}"},
      std::chrono::seconds(60));
  const std::vector<std::string> names = forwarded_variables(spec);
  const LaunchResult res = launch(spec);
  spec.env["TRAINBENCH_WORLD_SIZE"] = "7";
  const std::vector<std::string> named = forwarded_variables(spec);
  for (const char* v : {"TRAINBENCH_RANK", "TRAINBENCH_WORLD_SIZE", "TRAINBENCH_LOCAL_RANK"}) ::unsetenv(v);
  for (const char* v : {"TRAINBENCH_RANK", "TRAINBENCH_WORLD_SIZE", "TRAINBENCH_LOCAL_RANK"})
    EXPECT_EQ(std::find(names.begin(), names.end(), v), names.end()) << v;
  EXPECT_NE(std::find(named.begin(), named.end(), "TRAINBENCH_WORLD_SIZE"), named.end());
  ASSERT_TRUE(res.ok()) << res.diagnosis();
  for (const std::string& out : res.rank_output)
    EXPECT_NE(out.find("place unset unset unset"), std::string::npos) << out;
}

// Ranks on the engine's MPI backend mark their arrival before MPI_Init (Note [MPI rendezvous]);
// here scripts leave the marks: rank 1 dies before it would, and the result names it.
TEST(Launcher, NamesTheRankThatNeverReachedMpiInit) {
  const tb::testing::ScratchDir run = fresh_dir("never_joined");
  const LaunchSpec spec = two_ranks(run,
                                    {"sh", "-c",
                                     "if [ $OMPI_COMM_WORLD_RANK = 1 ]; then exit 127; fi; touch "
                                     "\"$TRAINBENCH_DIST_DIR/mpi_init_job_rank0\"; exit 3"},
                                    std::chrono::seconds(60));
  const LaunchResult res = launch(spec);
  EXPECT_FALSE(res.ok());
  EXPECT_EQ(res.never_joined, std::vector<int>{1});
  EXPECT_NE(res.diagnosis().find("rank 1 never joined"), std::string::npos) << res.diagnosis();
  EXPECT_EQ(res.diagnosis().find("rank 0 never joined"), std::string::npos) << res.diagnosis();
  // A program that leaves no mark at all (not on the engine's MPI backend): nobody is named.
  const tb::testing::ScratchDir plain_run = fresh_dir("no_marks");
  const LaunchSpec plain = two_ranks(plain_run, {"sh", "-c", "exit 3"}, std::chrono::seconds(60));
  EXPECT_TRUE(launch(plain).never_joined.empty());
}

TEST(Launcher, ShortStackKeepsTheTopFramesOfTheFirstThreads) {
  const std::string eu =
      "pid 10 (trainbench):\nPID 10 - process\nTID 10:\n#0  0x00007f0000000001 clock_nanosleep\n"
      "#1  0x00007f0000000002 nanosleep\n#2  0x0000000000401000 waits_here()\n#3  0x0000000000401100 main\n"
      "TID 11:\n#0  0x00007f0000000003 poll\nTID 12:\n#0  0x00007f0000000004 epoll_wait\nTID 13:\n#0  0x1 futex\n";
  const std::string cut = short_stack(eu, 3, 2);
  EXPECT_NE(cut.find("pid 10 (trainbench):"), std::string::npos) << cut;
  EXPECT_NE(cut.find("#2 waits_here()"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("main"), std::string::npos) << cut;                  // frame 3 is past the 3 kept
  EXPECT_NE(cut.find("thread 2:\n  #0 poll"), std::string::npos) << cut;  // the second thread
  EXPECT_EQ(cut.find("epoll_wait"), std::string::npos) << cut;            // the third is only counted
  EXPECT_NE(cut.find("(+2 more threads)"), std::string::npos) << cut;
  EXPECT_EQ(cut.find("0x00007f"), std::string::npos) << cut;
  const std::string gdb =
      "pid 20 (sleeper):\n[New LWP 21]\nThread 1 (Thread 0x7f (LWP 20) \"sleeper\"):\n"
      "#0  0x00007f00 in clock_nanosleep () from /lib/libc.so.6\n"
      "#1  0x0040 in waits_here(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > "
      "const&) ()\n";
  EXPECT_NE(short_stack(gdb).find("#1 waits_here(std::string const&) ()"), std::string::npos) << short_stack(gdb);
}

// Frame lines as the regex ^#(\d+)\s+(0x[0-9a-fA-F]+\s+)?(in\s+)?(.*)$ read them before the hand
// parse replaced it: each part as long as it goes, address and "in" taken off only where they fit.
TEST(Launcher, ShortStackReadsFrameLinesAsBefore) {
  const std::string s = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"#0  0x00007f0000000001 clock_nanosleep", "  #0 clock_nanosleep\n"},
      {"#1  0x0040 in waits_here () from /lib/libc.so.6", "  #1 waits_here () from /lib/libc.so.6\n"},
      {"#2 in f()", "  #2 f()\n"},
      {"#3\t0xAbC\tin\v\fg()", "  #3 g()\n"},
      {"#4 inline_fn()", "  #4 inline_fn()\n"},  // "in" without a space after it is the name's
      {"#5 0x12", "  #5 0x12\n"},                // an address needs a space after it
      {"#6 0x in h", "  #6 0x in h\n"},          // and a hex digit
      {"#7 0xZZ h", "  #7 0xZZ h\n"},
      {"#8 0x1 0x2 h", "  #8 0x2 h\n"},  // one address is taken off, not two
      {"#9 in in h", "  #9 in h\n"},     // and one "in"
      {"#10 0x1 ", "  #10 \n"},          // nothing after the address: an empty name
      {"#007 h", "  #007 h\n"},          // the number as written
      {"#11 " + s + " " + s, "  #11 std::string std::string\n"},
      {"#1 " + std::string(200, 'a'), "  #1 " + std::string(107, 'a') + "...\n"},
      {"#1 " + std::string(110, 'a'), "  #1 " + std::string(110, 'a') + "\n"},
      {"#1 \r h", "  #1 h\n"},          // a carriage return is a space between parts
      {"#1 h\r", ""},                   // but not in the name (the regex's '.')
      {"#12 h", ""},                    // frames 0 to 11 are kept
      {"#99999999999999999999 h", ""},  // past int: past the limit (std::stoi threw)
      {"#1", ""},
      {"#1h", ""},
      {"# 1 h", ""},
      {"#x h", ""},
      {" #1 h", ""},
      {"1 h", ""},
  };
  for (const auto& [line, want] : cases) EXPECT_EQ(short_stack(line + "\n"), want) << line;
  // The second thread's frame 0 (as written: "0", not "00") opens it.
  EXPECT_EQ(short_stack("TID 1:\n#0 a\nTID 2:\n#0 b\n#1 c\n"), "  #0 a\n  thread 2:\n  #0 b\n  #1 c\n");
  EXPECT_EQ(short_stack("TID 1:\n#0 a\nTID 2:\n#00 b\n"), "  #0 a\n  #00 b\n");
}

// A 100,000-character frame line (a huge template's name, or garbage): std::regex recursed once
// per character over it and overflowed the stack; now it is cut like any long name.
TEST(Launcher, ShortStackSurvivesAHugeLine) {
  const std::size_t n = 100000;
  const std::string name(n, 'x');
  EXPECT_EQ(short_stack("#0  0x00007f0000000001 in " + name + "\n"), "  #0 " + std::string(107, 'x') + "...\n");
  EXPECT_EQ(short_stack("#0" + std::string(n, ' ') + "f\n"), "  #0 f\n");
  EXPECT_EQ(short_stack("#" + std::string(n, '1') + " f\n"), "");
  EXPECT_EQ(short_stack("#1 0x" + std::string(n, 'a') + " f\n"), "  #1 f\n");
  EXPECT_EQ(short_stack("#1 " + name + "\r\n"), "");
  // 1300 long names in one line (100,000 characters), each shortened.
  std::string templates = "#2 f<", shortened = "f<";
  for (int i = 0; i < 1300; ++i) {
    templates += "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >,";
    shortened += "std::string,";
  }
  EXPECT_EQ(short_stack(templates + ">()\n"), "  #2 " + shortened.substr(0, 107) + "...\n");
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

// Note [A core of its own]: place_ranks sets TRAINBENCH_RANK_CPUS for worlds that fit this
// machine and clears it otherwise (a stale value must not reach the next world's ranks).
TEST(DistributedPlacement, RanksThatFitGetCoresOfTheirOwn) {
  ::unsetenv("TRAINBENCH_BIND");
  const std::vector<std::vector<int>> cores = dist::cores_of_this_process();
  const int n = int(cores.size());
  const std::string one = place_ranks(1, 1, true);
  EXPECT_EQ(one, dist::format_rank_cpus(dist::plan_rank_cpus(1, 1, cores)));
  EXPECT_EQ(core::env_or("TRAINBENCH_RANK_CPUS"), one);
  if (n >= 2) {
    const std::string two = place_ranks(2, 1, true);
    const auto lists = dist::parse_rank_cpus("TRAINBENCH_RANK_CPUS", core::env_or("TRAINBENCH_RANK_CPUS"), 2);
    EXPECT_EQ(two, core::env_or("TRAINBENCH_RANK_CPUS"));
    EXPECT_EQ(lists[0], cores[0]);  // whole cores, in order
    EXPECT_EQ(lists[1], cores[size_t(n / 2)]);
  }
  EXPECT_EQ(place_ranks(n + 1, 1, true), "");  // oversubscribed: unbound, and the variable cleared
  EXPECT_EQ(std::getenv("TRAINBENCH_RANK_CPUS"), nullptr);
  place_ranks(1, 1, true);
  EXPECT_EQ(place_ranks(1, 1, false), "");  // a real hostfile's hosts or Slurm's nodes
  EXPECT_EQ(std::getenv("TRAINBENCH_RANK_CPUS"), nullptr);
  ::setenv("TRAINBENCH_BIND", "none", 1);
  EXPECT_EQ(place_ranks(1, 1, true), "");
  ::setenv("TRAINBENCH_BIND", "cores", 1);
  try {
    place_ranks(1, 1, true);
    ADD_FAILURE() << "TRAINBENCH_BIND=cores was accepted";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("TRAINBENCH_BIND"), std::string::npos) << e.what();
  }
  ::unsetenv("TRAINBENCH_BIND");
  ::unsetenv("TRAINBENCH_RANK_CPUS");
}

TEST(DistributedNames, WorldSizeIsInEveryRankCaseName) {
  EXPECT_EQ(rank_case_name("mpi/all_reduce/sum/float32/n7", 2), "mpi/all_reduce/sum/float32/n7/w2");
  EXPECT_EQ(rank_case_name("all_reduce/float32/8/w2/engine", 2), "all_reduce/float32/8/w2/engine");
  EXPECT_EQ(rank_case_name("ddp/mlp/w4/engine", 2), "ddp/mlp/w4/engine/w2");
}

}  // namespace
}  // namespace tb::harness
