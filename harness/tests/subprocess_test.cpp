// harness/subprocess.h on shell programs: output captured and bounded, exit status and signal
// decoded, a program that cannot start, and a deadline that kills the whole group (a sleeping
// grandchild included).
#include "harness/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace th = tb::harness;

namespace {

th::SubprocessSpec sh(const std::string& script) {
  th::SubprocessSpec s;
  s.argv = {"sh", "-c", script};
  return s;
}

// Running, not a zombie waiting for a reaper that may never come (PID 1 in a container).
bool alive(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

}  // namespace

TEST(Subprocess, CapturesStdoutAndStderrApartAndTheExitCode) {
  const th::SubprocessResult r = th::run_subprocess(sh("echo out; echo err >&2; exit 3"));
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status_code(), 3);
  EXPECT_EQ(r.describe(), "exited with status 3");
}

TEST(Subprocess, MergeKeepsTheOrderOfBothStreams) {
  th::SubprocessSpec s = sh("echo one; echo two >&2; echo three");
  s.output = th::SubprocessSpec::Output::Merge;
  std::string live;
  s.on_output = [&](std::string_view chunk) { live += chunk; };
  const th::SubprocessResult r = th::run_subprocess(s);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out, "one\ntwo\nthree\n");
  EXPECT_EQ(live, r.out);
  EXPECT_EQ(r.err, "");
}

TEST(Subprocess, ReportsTheSignalThatEndedIt) {
  const th::SubprocessResult r = th::run_subprocess(sh("kill -SEGV $$"));
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.status_code(), 128 + SIGSEGV);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.describe().find("killed by signal 11"), std::string::npos) << r.describe();
}

TEST(Subprocess, AProgramThatCannotStartIsAResultNotAThrow) {
  th::SubprocessSpec s;
  s.argv = {"/nonexistent/trainbench-no-such-program"};
  const th::SubprocessResult r = th::run_subprocess(s);
  EXPECT_FALSE(r.started());
  EXPECT_EQ(r.exec_errno, ENOENT);
  EXPECT_EQ(r.status_code(), 127);
  EXPECT_NE(r.describe().find("could not be started"), std::string::npos);
}

TEST(Subprocess, EnvironmentIsSetAndRemoved) {
  ::setenv("TB_SUBPROCESS_TEST_GONE", "still here", 1);
  th::SubprocessSpec s = sh("echo \"[$TB_SUBPROCESS_TEST_SET][${TB_SUBPROCESS_TEST_GONE-unset}]\"");
  s.env["TB_SUBPROCESS_TEST_SET"] = "forty-two";
  s.env["TB_SUBPROCESS_TEST_GONE"] = std::nullopt;
  const th::SubprocessResult r = th::run_subprocess(s);
  ::unsetenv("TB_SUBPROCESS_TEST_GONE");
  EXPECT_EQ(r.out, "[forty-two][unset]\n");
}

TEST(Subprocess, OutputBeyondTheBoundIsDroppedAndSaidSo) {
  th::SubprocessSpec s = sh("head -c 100000 /dev/zero");
  s.max_output = 1000;
  const th::SubprocessResult r = th::run_subprocess(s);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_TRUE(r.truncated);
}

// The child starts a grandchild that sleeps and ignores SIGTERM, records its pid, then sleeps
// itself: at the deadline the group gets SIGTERM, after the grace SIGKILL, and nothing survives.
TEST(Subprocess, DeadlineKillsTheWholeGroupGrandchildIncluded) {
  const std::string pidfile = ::testing::TempDir() + "tb_subprocess_grandchild.pid";
  std::remove(pidfile.c_str());
  th::SubprocessSpec s = sh("(trap '' TERM; sleep 60) & echo $! > '" + pidfile + "'; echo started; sleep 60");
  s.timeout = std::chrono::milliseconds(500);
  s.grace = std::chrono::milliseconds(300);
  std::vector<int> signals;
  s.on_kill = [&](int sig) { signals.push_back(sig); };
  const auto t0 = std::chrono::steady_clock::now();
  const th::SubprocessResult r = th::run_subprocess(s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.out, "started\n");
  EXPECT_EQ(r.signal, SIGTERM);  // sh itself honours SIGTERM
  EXPECT_LT(took, 10.0);
  ASSERT_FALSE(signals.empty());
  EXPECT_EQ(signals.front(), SIGTERM);
  EXPECT_EQ(signals.back(), SIGKILL);
  long grandchild = 0;
  std::ifstream(pidfile) >> grandchild;
  ASSERT_GT(grandchild, 1);
  for (int i = 0; i < 50 && alive(grandchild); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(grandchild)) << "grandchild " << grandchild << " outlived the deadline";
  std::remove(pidfile.c_str());
}

// on_deadline runs once, while the child is still there and before any signal; stop_requested
// ends a child without a deadline the same way, and says so apart from a timeout.
TEST(Subprocess, OnDeadlineRunsBeforeTheKillAndStopRequestedEndsTheChild) {
  th::SubprocessSpec s = sh("echo started; sleep 60");
  s.timeout = std::chrono::milliseconds(300);
  s.grace = std::chrono::milliseconds(300);
  std::vector<std::string> events;
  s.on_deadline = [&] { events.push_back("deadline"); };
  s.on_kill = [&](int sig) { events.push_back("kill " + std::to_string(sig)); };
  th::SubprocessResult r = th::run_subprocess(s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.stopped);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], "deadline");
  EXPECT_EQ(events[1], "kill " + std::to_string(SIGTERM));
  EXPECT_EQ(std::count(events.begin(), events.end(), "deadline"), 1);

  th::SubprocessSpec t = sh("sleep 60");
  const auto t0 = std::chrono::steady_clock::now();
  bool deadline_called = false;
  t.on_deadline = [&] { deadline_called = true; };
  t.stop_requested = [&] { return std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(200); };
  r = th::run_subprocess(t);
  EXPECT_TRUE(r.stopped);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(deadline_called);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_NE(r.describe().find("asked to stop"), std::string::npos) << r.describe();
}

TEST(Subprocess, ShellQuoteSurvivesQuotes) {
  EXPECT_EQ(th::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(th::shell_join({"a b", "c"}), "'a b' 'c'");
}
