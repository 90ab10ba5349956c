// A ProcessGroup of one rank, made in-process without a launcher: every collective with its exact
// result (on one rank each is the identity: a sum, mean, max or gather over one contribution),
// the argument checks, the flight recorder's entries, a Work that never completes timing out,
// and the watchdog ending a process whose collective hangs. Two groups run the same checks:
//   Loopback  a backend written here whose primitives are those of a world of one, so the
//             ProcessGroup base class (checks, queue, recorder, timeouts) is tested by itself;
//   gloo      the real Gloo backend (rendezvous through a FileStore in a temporary folder),
//             where it is built in (TB_WITH_GLOO).
// Several ranks run in the collectives suite (suites/collectives) under mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "engine/core/tests/error_of.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/process_group.h"
#include "engine/dist/watchdog.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb::dist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::error_of;
using testing::expect_contains;
using testing::values;
using V = std::vector<double>;

// World of one: the reduction of one contribution is itself, gathering one block copies it.
// `hold_barrier` makes barrier() block until release() (a collective whose peers never come).
class Loopback final : public ProcessGroup {
 public:
  explicit Loopback(Options o, bool hold_barrier = false) : ProcessGroup(0, 1, std::move(o)), hold_(hold_barrier) {
    start();
  }
  ~Loopback() override {
    release();
    shutdown();
  }
  std::string backend() const override { return "loopback"; }
  void release() {
    std::lock_guard lock(mu_);
    hold_ = false;
    cv_.notify_all();
  }

 protected:
  void run_all_reduce(Tensor&, ReduceOp) override {}
  void run_broadcast(Tensor&, int) override {}
  void run_all_gather(Tensor& out, const Tensor& in) override { copy_bytes(out, in); }
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>&, ReduceOp) override {
    copy_bytes(out, in);
  }
  void run_barrier() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !hold_; });
  }
  void run_send(const Tensor&, int, int) override { throw DistError("send", "a world of one has no peer"); }
  void run_recv(Tensor&, int, int) override { throw DistError("recv", "a world of one has no peer"); }

 private:
  static void copy_bytes(Tensor& out, const Tensor& in) {
    std::memcpy(out.data(), in.data(), size_t(out.numel()) * out.itemsize());
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_;
};

// A temporary run dir per test (progress board, gloo store, watchdog dump).
class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tb_engine_dist_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  Options options(std::chrono::milliseconds timeout = 20s, bool watchdog = true) const {
    Options o;
    o.timeout = timeout;
    o.run_dir = dir_.string();
    o.watchdog = watchdog;
    return o;
  }
  fs::path dir_;
};

void run_every_collective(ProcessGroup& pg) {
  ASSERT_EQ(pg.rank(), 0);
  ASSERT_EQ(pg.size(), 1);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
    Tensor t = from_vector({1, -2, 3.5});
    pg.all_reduce(t, op)->wait();
    EXPECT_EQ(values(t), V({1, -2, 3.5})) << reduce_op_name(op);
  }
  Tensor i = from_vector({7, -7}, DType::Int64);
  pg.all_reduce(i, ReduceOp::Avg)->wait();  // integers divide by the world size (1), truncating
  EXPECT_EQ(values(i), V({7, -7}));
  Tensor b = from_vector({0.5, 0.25}, DType::Float64);
  pg.broadcast(b, 0)->wait();
  EXPECT_EQ(values(b), V({0.5, 0.25}));
  Tensor out = zeros({3});
  pg.all_gather(out, from_vector({4, 5, 6}))->wait();
  EXPECT_EQ(values(out), V({4, 5, 6}));
  std::vector<Tensor> outs = {zeros({2})};
  pg.all_gather(outs, from_vector({8, 9}))->wait();
  EXPECT_EQ(values(outs[0]), V({8, 9}));
  Tensor rs = zeros({2});
  pg.reduce_scatter(rs, from_vector({1.5, 2.5}))->wait();
  EXPECT_EQ(values(rs), V({1.5, 2.5}));
  WorkPtr w = pg.barrier();
  w->wait();
  EXPECT_TRUE(w->is_completed());
  EXPECT_EQ(w->op(), "barrier");
  EXPECT_EQ(w->seq(), 11u) << "six all_reduce, broadcast, two all_gather, reduce_scatter: this is call 11";

  // Argument checks: nothing enters the backend.
  Tensor bad = from_vector({1, 2}, DType::Int32);
  EXPECT_EQ(error_of([&] { pg.all_reduce(bad); }),
            "all_reduce: the tensor has dtype int32; supported: float32, float64, bfloat16, int64");
  Tensor strided = zeros({2, 2}).t();
  expect_contains(error_of([&] { pg.all_reduce(strided); }), {"all_reduce", "not contiguous (strides [1, 2])"});
  expect_contains(error_of([&] { pg.broadcast(b, 1); }), {"root 1 is not a rank of this group of size 1"});
  expect_contains(error_of([&] { pg.all_gather(out, from_vector({1, 2})); }), {"all_gather", "[3]"});
  expect_contains(error_of([&] { pg.send(b, 0); }), {"send", "destination rank 0 is not another rank of this group"});
  expect_contains(error_of([&] { pg.all_gather(out, out); }), {"all_gather", "the output and the input share storage"});
}

void expect_recorded(ProcessGroup& pg) {
  const std::vector<CallRecord> e = pg.recorder().entries();
  ASSERT_GE(e.size(), 11u);
  const std::pair<const char*, const char*> want[] = {{"all_reduce", "sum"},
                                                      {"all_reduce", "avg"},
                                                      {"all_reduce", "max"},
                                                      {"all_reduce", "min"},
                                                      {"all_reduce", "product"},
                                                      {"all_reduce", "avg"},
                                                      {"broadcast", "root=0"},
                                                      {"all_gather", "tensor"},
                                                      {"all_gather", "list"},
                                                      {"reduce_scatter", "sum tensor"},
                                                      {"barrier", ""}};
  for (size_t k = 0; k < 11; ++k) {
    EXPECT_EQ(e[k].seq, k + 1);
    EXPECT_EQ(e[k].op, want[k].first) << k;
    EXPECT_EQ(e[k].detail, want[k].second) << k;
    EXPECT_EQ(e[k].state, CallState::Completed) << k;
    EXPECT_LE(e[k].enqueued, e[k].started);
    EXPECT_LE(e[k].started, e[k].ended);
  }
  EXPECT_EQ(e[0].shapes, std::vector<core::Shape>({{3}}));
  EXPECT_EQ(e[5].dtype, DType::Int64);
  EXPECT_EQ(e[7].shapes, std::vector<core::Shape>({{3}, {3}})) << "inputs then outputs";
  const nlohmann::json j = pg.recorder().to_json();
  EXPECT_EQ(j["rank"], 0);
  EXPECT_EQ(j["size"], 1);
  EXPECT_EQ(j["entries"][0]["op"], "all_reduce");
  EXPECT_EQ(j["entries"][0]["state"], "completed");
}

TEST_F(OneRank, LoopbackRunsEveryCollective) {
  Loopback pg(options());
  run_every_collective(pg);
  expect_recorded(pg);
  EXPECT_EQ(pg.backend(), "loopback");
}

TEST_F(OneRank, GlooRunsEveryCollective) {
#if TB_WITH_GLOO
  std::shared_ptr<ProcessGroup> pg = new_group("gloo", options());
  EXPECT_EQ(pg->backend(), "gloo");
  run_every_collective(*pg);
  expect_recorded(*pg);
#else
  GTEST_SKIP() << "the gloo backend is not built (libgloo-dev not found)";
#endif
}

// Rank 0 of a world of 2 whose rank 1 never comes: the rendezvous names it as never joined
// (Note [MPI rendezvous] words it the same for MPI).
TEST_F(OneRank, GlooRendezvousNamesTheRankThatNeverJoined) {
#if TB_WITH_GLOO
  ::setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  ::setenv("TRAINBENCH_GLOO_RUN_ID", ("never_joined_" + std::to_string(::getpid())).c_str(), 1);
  const std::string e = error_of([&] { new_group("gloo", options(1s, false)); });
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::unsetenv("TRAINBENCH_GLOO_RUN_ID");
  EXPECT_NE(e.find("rank 1 never joined"), std::string::npos) << e;
  EXPECT_EQ(e.find("rank 0 never joined"), std::string::npos) << e;
#else
  GTEST_SKIP() << "the gloo backend is not built (libgloo-dev not found)";
#endif
}

// A host name that does not resolve or an interface that does not exist is a clear error naming
// it and the variables to set, not a crash inside Gloo's transport (it dereferenced a failed
// lookup).
TEST_F(OneRank, GlooBadHostNameOrInterfaceIsAnError) {
#if TB_WITH_GLOO
  // Set by the user, so a configuration error (core::Error), not a DistError: the suites report
  // a DistError from new_group as "the backend cannot start here" and skip, and a typo passed.
  auto config_error = [&] {
    try {
      new_group("gloo", options(1s, false));
    } catch (const DistError& e) {
      ADD_FAILURE() << "a DistError (read as a skip): " << e.what();
      return std::string(e.what());
    } catch (const core::Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no error";
    return std::string();
  };
  ::setenv("TRAINBENCH_GLOO_HOSTNAME", "no-such-host.invalid", 1);
  std::string e = config_error();
  ::unsetenv("TRAINBENCH_GLOO_HOSTNAME");
  expect_contains(e, {"no-such-host.invalid", "does not resolve", "TRAINBENCH_GLOO_IFACE"});
  ::setenv("TRAINBENCH_GLOO_IFACE", "tbnosuchif0", 1);
  e = config_error();
  ::unsetenv("TRAINBENCH_GLOO_IFACE");
  expect_contains(e, {"tbnosuchif0", "TRAINBENCH_GLOO_IFACE"});
#else
  GTEST_SKIP() << "the gloo backend is not built (libgloo-dev not found)";
#endif
}

TEST_F(OneRank, UnknownBackendAndWorldFromEnv) {
  EXPECT_EQ(error_of([&] { new_group("carrier-pigeon", options()); }),
            "new_group: unknown backend 'carrier-pigeon'; known: mpi, gloo, nccl");
  // ctest starts no launcher: a single process, 0 of 1
  const WorldInfo w = world_from_env();
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
}

// MPI is optional like Gloo and NCCL: without it the engine builds, and asking for the backend
// says why it is missing (ci/tsan builds the engine with TB_WITH_MPI=OFF).
TEST_F(OneRank, ABackendLeftOutSaysWhy) {
#if TB_WITH_MPI
  GTEST_SKIP() << "the mpi backend is built here (ci/tsan's build leaves it out)";
#else
  EXPECT_EQ(error_of([&] { new_group("mpi", options()); }),
            "new_group: backend mpi not built (libopenmpi-dev was not found when configuring, or TB_WITH_MPI=OFF)");
#endif
}

TEST_F(OneRank, AWorkThatNeverCompletesTimesOut) {
  Loopback pg(options(20s, /*watchdog=*/false), /*hold_barrier=*/true);
  WorkPtr w = pg.barrier();
  EXPECT_FALSE(w->wait_for(50ms));
  expect_contains(error_of([&] { w->wait(50ms); }),
                  {"barrier: #1 did not complete within", "(timeout 0.05 s)", "the watchdog ends the process"});
  EXPECT_EQ(pg.recorder().get(1)->state, CallState::Started);
  pg.release();
  w->wait();
  EXPECT_EQ(pg.recorder().get(1)->state, CallState::Completed);
}

TEST_F(OneRank, WatchdogEndsAHungProcessWithADump) {
  // gtest's default "fast" style forks without exec: the child sees this test's run dir. The
  // parent runs no thread of ours at this point (earlier groups have been destroyed).
  EXPECT_EXIT(
      {
        Loopback pg(options(300ms), /*hold_barrier=*/true);
        // wait() gives up after the same timeout the watchdog uses, so either may come first:
        // keep waiting on the issued barrier until the watchdog ends the process.
        auto work = pg.barrier();
        for (;;) {
          try {
            work->wait();
          } catch (const std::exception&) {
          }
        }
      },
      ::testing::ExitedWithCode(kWatchdogExitCode),
      "trainbench: watchdog: .*barrier.*dump: .*flight_recorder_rank0.json");
  std::ifstream dump(dir_ / "flight_recorder_rank0.json");
  ASSERT_TRUE(dump.good()) << "the watchdog writes the flight recorder next to the run";
  const nlohmann::json j = nlohmann::json::parse(dump);
  EXPECT_EQ(j["entries"][0]["op"], "barrier");
  EXPECT_EQ(j["entries"][0]["state"], "started");
  EXPECT_EQ(j["stuck"]["seq"], 1);
}

}  // namespace
}  // namespace tb::dist
