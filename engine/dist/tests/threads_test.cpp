// The process group's threads, in one process and without a backend library: a one-rank group
// whose primitives are plain memory operations (LoopbackGroup) drives the collective worker, the
// waiting threads that run calls inline (Note [Collective worker]) and the watchdog (its probe
// while calls run, its diagnosis of a hung call, its SIGTERM path). Written to be run under
// ThreadSanitizer (ci/tsan): the primitives keep an unsynchronised log, so two calls running at
// once, or a result read before its call finished, is a reported race, not a lucky pass.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/flight_recorder.h"
#include "engine/dist/process_group.h"
#include "engine/dist/watchdog.h"
#include "engine/tensor/factories.h"

namespace tb::dist {
namespace {

using namespace std::chrono_literals;

// A group of one rank whose collectives are what one rank's collectives are: the tensor itself
// (all_reduce, broadcast), a copy (all_gather, reduce_scatter). Each primitive rewrites its output
// and appends the tensor's first value to `log`, which nothing locks: the group's promise to run
// one call at a time, in issue order, is what makes that safe.
class LoopbackGroup : public ProcessGroup {
 public:
  explicit LoopbackGroup(Options options, std::chrono::microseconds delay = 0us)
      : ProcessGroup(0, 1, std::move(options)), delay_(delay) {
    start();
  }
  ~LoopbackGroup() override { shutdown(); }
  std::string backend() const override { return "loopback"; }

  std::vector<double> log;        // first value of every all_reduce, in run order
  std::atomic<bool> hang{false};  // the next primitive never returns (watchdog tests)

 protected:
  void run_all_reduce(Tensor& t, ReduceOp) override {
    pause();
    float* p = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] + 0.0f;  // one rank: the sum is the value
    log.push_back(t.numel() ? p[0] : 0.0);
  }
  void run_broadcast(Tensor&, int) override { pause(); }
  void run_all_gather(Tensor& out, const Tensor& in) override { copy(out, in); }
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>&, ReduceOp) override {
    copy(out, in);
  }
  void run_barrier() override { pause(); }
  void run_send(const Tensor&, int, int) override { FAIL() << "a one-rank group has no peer to send to"; }
  void run_recv(Tensor&, int, int) override { FAIL() << "a one-rank group has no peer to receive from"; }

 private:
  std::chrono::microseconds delay_;
  void pause() {
    while (hang.load()) std::this_thread::sleep_for(10ms);
    if (delay_.count()) std::this_thread::sleep_for(delay_);
  }
  void copy(Tensor& out, const Tensor& in) {
    pause();
    const float* s = in.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t i = 0; i < in.numel(); ++i) d[i] = s[i];
  }
};

// This process's scratch directory, removed when the tests end.
const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                           ("tb_dist_threads_test_" + std::to_string(::getpid()));
  return dir;
}
class RemoveScratch : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(scratch()); }
};
[[maybe_unused]] ::testing::Environment* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

// A fresh directory for a group's dumps and progress board.
std::string run_dir(const std::string& name) {
  const auto dir = scratch() / name;
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The same directory in a death test's child, which re-runs the test from the start in a new
// process (threadsafe style): the parent names it in the environment the child inherits.
std::string shared_dir(const std::string& name) {
  const std::string var = "TB_THREADS_TEST_DIR_" + name;
  if (const char* dir = std::getenv(var.c_str())) return dir;
  const std::string dir = run_dir(name);
  ::setenv(var.c_str(), dir.c_str(), 1);
  return dir;
}

Options options(const std::string& dir, std::chrono::milliseconds timeout = 60s) {
  Options o;
  o.timeout = timeout;
  o.run_dir = dir;
  return o;
}

// Several threads issue all_reduces at once and wait in every way a caller can: at once (the
// waiter runs the call inline), later (the worker ran it), with a short timeout (never inline),
// or not at all (synchronize). Every call runs exactly once, each thread's calls in its issue
// order, and each caller sees its result.
TEST(CollectiveWorker, ConcurrentCallersRunOneCallAtATimeInIssueOrder) {
  LoopbackGroup pg(options(run_dir("order")), 50us);
  constexpr int kThreads = 4, kCalls = 40;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int th = 0; th < kThreads; ++th)
    threads.emplace_back([&, th] {
      std::vector<std::pair<Tensor, WorkPtr>> pending;
      for (int i = 0; i < kCalls; ++i) {
        Tensor t = full({64}, double(th * 1000 + i), DType::Float32);
        WorkPtr w = pg.all_reduce(t);
        switch (i % 4) {
          case 0: w->wait(); break;  // inline
          case 1:
            while (!w->wait_for(1ms)) {
            }
            break;                                    // the worker
          case 2: pending.emplace_back(t, w); break;  // waited later
          case 3: break;                              // left to synchronize()
        }
        if (i % 4 < 2 && t.data_ptr<float>()[63] != float(th * 1000 + i)) ++bad[th];
      }
      for (auto& [t, w] : pending) {
        w->wait();
        if (!w->is_completed()) ++bad[th];
      }
    });
  for (std::thread& t : threads) t.join();
  pg.synchronize();
  EXPECT_EQ(bad, std::vector<int>(kThreads, 0));
  ASSERT_EQ(pg.log.size(), size_t(kThreads * kCalls));
  std::vector<int> next(kThreads, 0);
  for (double v : pg.log) {
    const int th = int(v) / 1000, i = int(v) % 1000;
    ASSERT_EQ(i, next[th]) << "thread " << th << "'s calls ran out of issue order";
    ++next[th];
  }
  for (const CallRecord& r : pg.recorder().entries()) EXPECT_EQ(r.state, CallState::Completed) << r.seq;
}

// A burst nobody waits on (DDP's buckets during backward) is run by the worker while the caller
// goes on; every collective type goes through the same queue.
TEST(CollectiveWorker, BurstWithoutWaitersCompletesOnTheWorker) {
  LoopbackGroup pg(options(run_dir("burst")), 100us);
  std::vector<Tensor> grads;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 30; ++i) {
    grads.push_back(full({256}, double(i), DType::Float32));
    works.push_back(pg.all_reduce(grads.back(), i % 2 ? ReduceOp::Avg : ReduceOp::Sum));
  }
  Tensor in = arange(8, DType::Float32), out = zeros({8}), rs = zeros({8});
  works.push_back(pg.all_gather(out, in));
  works.push_back(pg.reduce_scatter(rs, in));
  works.push_back(pg.broadcast(grads[0], 0));
  works.push_back(pg.barrier());
  // Another thread watches completion while this one waits on the last call only.
  std::atomic<int> seen{0};
  std::thread watcher([&] {
    for (const WorkPtr& w : works) {
      while (!w->is_completed()) std::this_thread::sleep_for(100us);
      ++seen;
    }
  });
  works.back()->wait();
  watcher.join();
  EXPECT_EQ(seen.load(), int(works.size()));
  for (int i = 0; i < 30; ++i) EXPECT_EQ(grads[size_t(i)].data_ptr<float>()[255], float(i)) << i;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out.data_ptr<float>()[i], float(i));
    EXPECT_EQ(rs.data_ptr<float>()[i], float(i));
  }
}

// A wait shorter than the call gives up with a DistError and leaves the call running; a later
// wait sees it finish. Meanwhile the watchdog thread probes the running call (every 100 ms).
TEST(CollectiveWorker, TimedOutWaitLeavesTheCallRunning) {
  LoopbackGroup pg(options(run_dir("timeout")), 300ms);
  Tensor t = full({4}, 7.0, DType::Float32);
  WorkPtr w = pg.all_reduce(t);
  std::string message;
  try {
    w->wait(20ms);
  } catch (const DistError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("did not complete within"), std::string::npos) << message;
  w->wait();
  EXPECT_TRUE(w->is_completed());
  EXPECT_EQ(t.data_ptr<float>()[3], 7.0f);
}

// The watchdog reads the group's running call, the flight recorder and the progress board from
// its own thread while the call is stuck, writes the dump and ends the process with exit code 3.
TEST(Watchdog, HungCallEndsTheProcessWithADiagnosis) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Options o = options(shared_dir("hang"), 1s);  // long enough for the first call on a loaded machine
  EXPECT_EXIT(
      {
        LoopbackGroup pg(o);
        Tensor ok = full({2}, 1.0, DType::Float32);
        pg.all_reduce(ok)->wait();  // one finished call in the dump
        pg.hang = true;
        Tensor t = full({2}, 1.0, DType::Float32);
        WorkPtr w = pg.all_reduce(t);
        while (true) w->wait_for(10ms);  // short waits never run the call: the worker hangs
      },
      ::testing::ExitedWithCode(kWatchdogExitCode), "trainbench: watchdog: .*all_reduce #2.*this is the only rank");
  std::ifstream dump(std::filesystem::path(o.run_dir) / "flight_recorder_rank0.json");
  const std::string text((std::istreambuf_iterator<char>(dump)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"state\": \"completed\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"state\": \"started\""), std::string::npos) << text;
}

// SIGTERM while a group lives is caught (Note [Dead ranks]), handed to the watchdog thread
// through a pipe; with no dead peer to name, the old disposition is restored and the signal
// raised again, so the process still dies of SIGTERM.
TEST(Watchdog, SigtermWithoutDeadPeersStillTerminates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Options o = options(shared_dir("sigterm"));
  EXPECT_EXIT(
      {
        LoopbackGroup pg(o);
        Tensor t = full({2}, 1.0, DType::Float32);
        pg.all_reduce(t)->wait();
        ::kill(::getpid(), SIGTERM);
        for (;;) std::this_thread::sleep_for(10ms);
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

// Groups created and destroyed while others run: each has its own worker and watchdog, and the
// process-wide state they share (the list of watchdogs, the SIGTERM handler) stays consistent.
TEST(Watchdog, GroupsComeAndGoConcurrently) {
  std::vector<std::thread> threads;
  std::atomic<int> done{0};
  for (int th = 0; th < 3; ++th)
    threads.emplace_back([&, th] {
      for (int round = 0; round < 4; ++round) {
        LoopbackGroup pg(options(run_dir("churn" + std::to_string(th))), 100us);
        Tensor t = full({16}, double(round), DType::Float32);
        pg.all_reduce(t)->wait();
        if (t.data_ptr<float>()[15] == float(round)) ++done;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(done.load(), 12);
}

}  // namespace
}  // namespace tb::dist
