// Hang diagnosis, the engine side (issue 18): call-site labels in the flight recorder,
// TRAINBENCH_DIST_DEBUG (INFO, DETAIL's full fingerprints), straggler reports, DDP's Join for
// uneven inputs and the error for a parameter without a gradient. What needs one rank runs on a
// world of one in process; what needs several forks a Gloo world of 2 or 3 ranks here (each rank
// a child of this test, its stderr in a file the test reads), skipped where Gloo is not built
// or under ThreadSanitizer (forked children of an instrumented, threaded process).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/rng.h"
#include "engine/core/tests/error_of.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/dist/call_site.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/ddp/join.h"
#include "engine/dist/dump_analysis.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/dist/watchdog.h"
#include "engine/nn/linear.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb::dist {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_contains;
using testing::WorldOfOne;

// Forked ranks inherit the path and end with _Exit: only this process removes the directory.
testing::ScratchDir fresh_dir(const std::string& what) { return testing::ScratchDir("tb_dist_debug_" + what + "_"); }

std::shared_ptr<ProcessGroup> world_of_one(const fs::path& dir) {
  Options o;
  o.run_dir = dir.string();
  o.watchdog = false;
  return std::make_shared<WorldOfOne>(o);
}

// Sets environment variables for its lifetime.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      ::setenv(k, v, 1);
    }
  }
  ~EnvGuard() {
    for (const auto& [k, v] : saved_)
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Two linear layers; forward uses `b` only when `use_b` (a parameter without a gradient otherwise).
struct TwoLayers : nn::Module {
  explicit TwoLayers(bool use_b) : nn::Module("TwoLayers"), use_b_(use_b) {
    a = register_module("a", std::make_shared<nn::Linear>(4, 3));
    b = register_module("b", std::make_shared<nn::Linear>(3, 2));
  }
  Tensor forward(const Tensor& x) override { return use_b_ ? (*b)((*a)(x)) : (*a)(x); }
  std::shared_ptr<nn::Linear> a, b;
  bool use_b_;
};

std::vector<std::string> labels(ProcessGroup& g) {
  std::vector<std::string> out;
  for (const CallRecord& r : g.recorder().entries()) out.push_back(r.label);
  return out;
}

TEST(CallSite, LabelsEveryRecordedCallAndNests) {
  const testing::ScratchDir dir = fresh_dir("labels");
  auto g = world_of_one(dir);
  Tensor t = zeros({2});
  g->all_reduce(t)->wait();
  {
    CallSite outer("user/outer");
    g->all_reduce(t)->wait();
    {
      CallSite inner(std::string("user/") + "inner");  // a temporary: the guard keeps a copy
      g->broadcast(t, 0)->wait();
    }
    g->barrier()->wait();
  }
  g->all_reduce(t)->wait();
  EXPECT_EQ(labels(*g), std::vector<std::string>({"", "user/outer", "user/inner", "user/outer", ""}));
  EXPECT_EQ(CallSite::current(), "");
  const nlohmann::json j = g->recorder().to_json();
  EXPECT_FALSE(j["entries"][0].contains("label")) << "no key for a call without a label";
  EXPECT_EQ(j["entries"][2]["label"], "user/inner");
}

TEST(CallSite, DdpBucketsAreLabelled) {
  const testing::ScratchDir dir = fresh_dir("ddp_labels");
  auto g = world_of_one(dir);
  core::manual_seed(1);
  auto model = std::make_shared<TwoLayers>(true);
  DDPOptions o;
  o.first_bucket_cap_mb = 1e-6;  // 1 byte: the first bucket closes at its first parameter (b.bias)
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
  ASSERT_EQ(ddp->bucket_indices().size(), 2u);
  tb::sum((*ddp)(ones({5, 4}))).backward();
  const std::vector<std::string> l = labels(*g);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0], "ddp/bucket 0 (1 param, 0.0 MiB)");
  EXPECT_EQ(l[1], "ddp/bucket 1 (3 params, 0.0 MiB)");
}

TEST(DistDebug, TheVariablesAreParsedAndBadValuesAreErrors) {
  const testing::ScratchDir dir = fresh_dir("env");
  {
    EnvGuard env({{"TRAINBENCH_DIST_DEBUG", "detail"}, {"TRAINBENCH_STRAGGLER_WARN", "1.5"}});
    auto g = world_of_one(dir);
    EXPECT_EQ(g->options().debug, Options::Debug::Detail);
    EXPECT_EQ(g->options().straggler_warn, std::chrono::milliseconds(1500));
  }
  {
    auto g = world_of_one(dir);
    EXPECT_EQ(g->options().debug, Options::Debug::Off);
    EXPECT_EQ(g->options().straggler_warn, std::chrono::seconds(5)) << "min(5 s, half the 10 min timeout)";
  }
  {
    EnvGuard env({{"TRAINBENCH_DIST_DEBUG", "VERBOSE"}});
    expect_contains(error_of([&] { world_of_one(dir); }), {"TRAINBENCH_DIST_DEBUG", "VERBOSE", "DETAIL"});
  }
  {
    EnvGuard env({{"TRAINBENCH_STRAGGLER_WARN", "-2"}});
    expect_contains(error_of([&] { world_of_one(dir); }), {"TRAINBENCH_STRAGGLER_WARN"});
  }
  {  // under a millisecond rounds up: truncated, it became 0, which means "never warn"
    EnvGuard env({{"TRAINBENCH_STRAGGLER_WARN", "1e-9"}});
    EXPECT_EQ(world_of_one(dir)->options().straggler_warn, std::chrono::milliseconds(1));
  }
  {
    EnvGuard env({{"TRAINBENCH_STRAGGLER_WARN", "0"}});
    EXPECT_EQ(world_of_one(dir)->options().straggler_warn, std::chrono::milliseconds(0));
  }
}

TEST(DdpUnusedParameter, IsAnErrorNamingItAtTheEndOfBackward) {
  const testing::ScratchDir dir = fresh_dir("unused");
  auto g = world_of_one(dir);
  auto model = std::make_shared<TwoLayers>(false);
  auto ddp = std::make_shared<DistributedDataParallel>(model, g);
  for (int step = 0; step < 2; ++step) {  // the iteration is reset: the next one raises the same
    Tensor loss = tb::sum((*ddp)(ones({5, 4})));
    expect_contains(error_of([&] { loss.backward(); }),
                    {"parameters that were not used in producing loss", "find_unused_parameters",
                     "parameters which did not receive grad for rank 0: b.weight, b.bias"});
  }
}

// ---- forked Gloo worlds ----

struct RankRun {
  int status = -1;  // exit code; 128 + signal; -1: killed at the deadline
  std::string err;  // its stderr
};

// Forks `world` ranks that join one Gloo world through `dir` and run `body`; its return value is
// the rank's exit code. Once a rank ends with the watchdog's code the others get 1 s, then are
// killed (a rank left waiting on the one that failed); all are killed after `limit`.
std::vector<RankRun> run_ranks(int world, const fs::path& dir, std::vector<std::pair<std::string, std::string>> env,
                               const std::function<int(std::shared_ptr<ProcessGroup>)>& body,
                               std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const fs::path err = dir / ("rank" + std::to_string(r) + ".err");
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      tb::set_num_threads(1);  // OpenMP after fork hangs if the parent had a team
      ::setenv("TRAINBENCH_RANK", std::to_string(r).c_str(), 1);
      ::setenv("TRAINBENCH_WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("TRAINBENCH_LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("TRAINBENCH_DIST_DIR", dir.c_str(), 1);
      ::setenv("TRAINBENCH_GLOO_RUN_ID", dir.filename().c_str(), 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      int rc = 0;
      try {
        rc = body(new_group("gloo"));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: uncaught: %s\n", r, e.what());
        rc = 2;
      }
      std::fflush(stderr);
      std::_Exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<RankRun> out(static_cast<std::size_t>(world));
  std::vector<bool> done(static_cast<std::size_t>(world), false);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      int st = 0;
      if (done[std::size_t(r)] || ::waitpid(pids[std::size_t(r)], &st, WNOHANG) != pids[std::size_t(r)]) continue;
      done[std::size_t(r)] = true;
      --left;
      out[std::size_t(r)].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      if (out[std::size_t(r)].status == kWatchdogExitCode && !kill_at)
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    const auto now = std::chrono::steady_clock::now();
    if (left > 0 && (now > deadline || (kill_at && now > *kill_at))) {
      for (int r = 0; r < world; ++r)
        if (!done[std::size_t(r)]) {
          ::kill(pids[std::size_t(r)], SIGKILL);
          ::waitpid(pids[std::size_t(r)], nullptr, 0);
          done[std::size_t(r)] = true;
          --left;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int r = 0; r < world; ++r) {
    std::ifstream in(dir / ("rank" + std::to_string(r) + ".err"));
    std::stringstream ss;
    ss << in.rdbuf();
    out[std::size_t(r)].err = ss.str();
  }
  return out;
}

bool can_fork_worlds() {
#if !TB_WITH_GLOO || defined(__SANITIZE_THREAD__)
  return false;
#else
  return true;
#endif
}

#define TB_NEED_FORKED_WORLDS() \
  if (!can_fork_worlds()) GTEST_SKIP() << "needs the gloo backend, and no ThreadSanitizer (forked ranks)"

TEST(DistDebugRanks, DetailCatchesAShapeMismatchOnEveryRankWithBothFingerprints) {
  TB_NEED_FORKED_WORLDS();
  // DETAIL after the board check (auto: one host), instead of the plain exchange, and with the check off.
  for (const char* check : {"auto", "exchange", "off"}) {
    SCOPED_TRACE(std::string("TRAINBENCH_DIST_CHECK=") + check);
    const testing::ScratchDir dir = fresh_dir(std::string("detail_") + check);
    const auto runs = run_ranks(2, dir, {{"TRAINBENCH_DIST_DEBUG", "DETAIL"}, {"TRAINBENCH_DIST_CHECK", check}},
                                [](std::shared_ptr<ProcessGroup> g) {
                                  // Same element count, other shapes: the default check lets it through; DETAIL does not.
                                  Tensor t = ones(g->rank() == 0 ? Shape{2, 3} : Shape{3, 2});
                                  try {
                                    CallSite site("test/shapes");
                                    g->all_reduce(t)->wait();
                                    return 1;
                                  } catch (const DistError& e) {
                                    std::fprintf(stderr, "caught: %s\n", e.what());
                                  }
                                  Tensor u = ones({2, 3});  // the group stays in step: the next call works
                                  g->all_reduce(u)->wait();
                                  return u.data_ptr<float>()[0] == 2.f ? 0 : 3;
                                });
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + ": " + runs[std::size_t(r)].err);
      EXPECT_EQ(runs[std::size_t(r)].status, 0);
      expect_contains(runs[std::size_t(r)].err,
                      {"caught: all_reduce: TRAINBENCH_DIST_DEBUG=DETAIL: collective #1 differs between ranks: ",
                       "rank 0: all_reduce #1 float32 shapes [2, 3] sum label \"test/shapes\"",
                       "rank 1: all_reduce #1 float32 shapes [3, 2] sum label \"test/shapes\""});
    }
    expect_contains(runs[0].err, {"trainbench: dist: group world on gloo: 2 ranks", "debug DETAIL"});
  }
}

TEST(DistDebugRanks, AStragglerIsReportedOnceAndTrainingGoesOn) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("straggler");
  const auto runs = run_ranks(2, dir, {{"TRAINBENCH_STRAGGLER_WARN", "0.3"}}, [](std::shared_ptr<ProcessGroup> g) {
    Tensor t = ones({4});
    g->all_reduce(t)->wait();  // both on time
    if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    CallSite site("test/slow step");
    g->all_reduce(t)->wait();
    return t.data_ptr<float>()[0] == 4.f ? 0 : 3;
  });
  EXPECT_EQ(runs[0].status, 0) << runs[0].err;
  EXPECT_EQ(runs[1].status, 0) << runs[1].err;
  const std::string& e = runs[0].err;
  const auto at = e.find("trainbench: straggler: rank 1 arrived ");
  ASSERT_NE(at, std::string::npos) << e;
  const double lag = std::stod(e.substr(at + std::strlen("trainbench: straggler: rank 1 arrived ")));
  EXPECT_GE(lag, 0.7);
  EXPECT_LT(lag, 5.0);
  expect_contains(e, {" s after the others at collective #2 all_reduce (label test/slow step); threshold 0.3 s, "
                      "reported by rank 0"});
  EXPECT_EQ(e.find("trainbench: straggler", at + 1), std::string::npos) << "one line, for collective #2 only";
  EXPECT_EQ(runs[1].err.find("straggler"), std::string::npos) << "the straggler does not report itself";
}

// Rank r has 2 + r batches; a batch is a deterministic function of (rank, step).
std::pair<Tensor, Tensor> batch(int rank, int step) {
  core::Generator gen(uint64_t(100 * rank + step + 1));
  return {randn({5, 4}, DType::Float32, &gen), randn({5, 2}, DType::Float32, &gen)};
}

void sgd(nn::Module& m, double lr) {
  autograd::NoGradGuard ng;
  for (Tensor& p : m.parameters())
    if (p.grad().defined()) ops::sub_(p, p.grad(), lr);
}

TEST(DistDebugRanks, JoinFinishesUnevenInputsWithTheReferenceParameters) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("join");
  constexpr int kWorld = 3;
  const auto runs = run_ranks(kWorld, dir, {}, [](std::shared_ptr<ProcessGroup> g) {
    const int rank = g->rank(), W = g->size();
    const double lr = 0.1;
    core::manual_seed(7);
    auto model = std::make_shared<TwoLayers>(true);
    core::manual_seed(7);
    auto ref = std::make_shared<TwoLayers>(true);
    DDPOptions o;
    o.first_bucket_cap_mb = 1e-5;  // two buckets: the joined ranks shadow both, in order
    auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
    int64_t shadowed = 0;
    {
      Join join(*ddp);
      for (int step = 0; step < 2 + rank; ++step) {
        model->zero_grad();
        const auto [x, y] = batch(rank, step);
        tb::mse_loss((*ddp)(x), y).backward();
        sgd(*model, lr);
      }
      shadowed = join.join();
    }
    // The same steps in one process: at step s the ranks that still have a batch contribute their
    // gradient, divided by the initial world size (PyTorch's default).
    for (int step = 0; step < 2 + W - 1; ++step) {
      ref->zero_grad();
      for (int r = 0; r < W; ++r)
        if (step < 2 + r) {
          const auto [x, y] = batch(r, step);
          tb::mse_loss((*ref)(x), y).backward();
        }
      autograd::NoGradGuard ng;
      for (Tensor& p : ref->parameters()) {
        Tensor avg = tb::mul(p.grad(), 1.0 / W);
        p.grad().copy_(avg);
      }
      sgd(*ref, lr);
    }
    double worst = 0;
    const auto a = model->parameters(), b = ref->parameters();
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Tensor d = tb::sub(a[i], b[i]).contiguous();
      for (int64_t k = 0; k < d.numel(); ++k) worst = std::max(worst, double(std::abs(d.data_ptr<float>()[k])));
    }
    std::fprintf(stderr, "rank %d: shadowed %lld iterations; largest difference from the reference %.3g\n", rank,
                 static_cast<long long>(shadowed), worst);
    return worst <= 1e-5 && shadowed == W - 1 - rank ? 0 : 3;
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(runs[std::size_t(r)].status, 0) << runs[std::size_t(r)].err;
}

// TwoLayers with a buffer its forward updates (a running mean of the input, as BatchNorm's
// running statistics), and whose second layer is used only when `use_b`.
struct TwoLayersWithBuffer : TwoLayers {
  TwoLayersWithBuffer() : TwoLayers(true) { running = register_buffer("running", zeros({4})); }
  Tensor forward(const Tensor& x) override {
    {
      autograd::NoGradGuard ng;
      Tensor m = tb::mean(x, {0});
      ops::mul_(running, 0.9);
      ops::add_(running, m, 0.1);
    }
    return TwoLayers::forward(x);
  }
  Tensor running;
};

double largest_difference(const TensorList& a, const TensorList& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Tensor d = tb::sub(a[i], b[i]).contiguous();
    for (int64_t k = 0; k < d.numel(); ++k) worst = std::max(worst, double(std::abs(d.data_ptr<float>()[k])));
  }
  return worst;
}

// Rank r trains 1 + r optimizer steps of `micro` micro-batches each, all but the last under
// no_sync, with b unused on odd steps (find_unused_parameters) and a buffer broadcast every synced
// iteration. Checked against one process: each step sums the micro-batch gradients of the ranks
// that still have the step, divided by the initial world size; every replica's buffer must be
// the one of the last rank (the highest still training at every iteration, PyTorch's
// authoritative rank), computed from its own batches alone.
int join_edge_case_rank(const std::shared_ptr<ProcessGroup>& g, int micro) {
  const int rank = g->rank(), W = g->size();
  const double lr = 0.1;
  core::manual_seed(7);
  auto model = std::make_shared<TwoLayersWithBuffer>();
  core::manual_seed(7);
  auto ref = std::make_shared<TwoLayersWithBuffer>();
  DDPOptions o;
  o.first_bucket_cap_mb = 1e-5;
  o.find_unused_parameters = true;
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
  const auto micro_batch = [&](int r, int step, int m) { return batch(r, step * micro + m); };
  int64_t shadowed = 0;
  {
    Join join(*ddp);
    for (int step = 0; step < 1 + rank; ++step) {
      model->zero_grad();
      model->use_b_ = step % 2 == 0;
      for (int m = 0; m < micro; ++m) {
        std::optional<DistributedDataParallel::NoSyncGuard> local;
        if (m + 1 < micro) local.emplace(*ddp);
        const auto [x, y] = micro_batch(rank, step, m);
        const Tensor out = (*ddp)(x);
        tb::mse_loss(model->use_b_ ? out : out.narrow(1, 0, 2), y).backward();
      }
      sgd(*model, lr);
    }
    shadowed = join.join();
  }
  // The reference's parameters: all ranks' micro-batches; its buffer: the last rank's alone.
  for (int step = 0; step < W; ++step) {
    ref->zero_grad();
    ref->use_b_ = step % 2 == 0;
    for (int r = 0; r < W; ++r)
      if (step < 1 + r)
        for (int m = 0; m < micro; ++m) {
          const auto [x, y] = micro_batch(r, step, m);
          const Tensor out = r == W - 1 ? (*ref)(x) : ref->TwoLayers::forward(x);
          tb::mse_loss(ref->use_b_ ? out : out.narrow(1, 0, 2), y).backward();
        }
    autograd::NoGradGuard ng;
    for (Tensor& p : ref->parameters())
      if (p.grad().defined()) p.grad().copy_(tb::mul(p.grad(), 1.0 / W));
    sgd(*ref, lr);
  }
  const double params = largest_difference(model->parameters(), ref->parameters());
  const double buffer = largest_difference({model->running}, {ref->running});
  std::fprintf(stderr, "rank %d: shadowed %lld; parameters differ by %.3g, the buffer by %.3g\n", rank,
               static_cast<long long>(shadowed), params, buffer);
  return params <= 1e-5 && buffer <= 1e-6 && shadowed == int64_t(micro) * (W - 1 - rank) ? 0 : 3;
}

TEST(DistDebugRanks, JoinWithBuffersUnusedParametersAndNoSyncMatchesTheReference) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("join_edges");
  constexpr int kWorld = 3;
  const auto runs = run_ranks(kWorld, dir, {},
                              [](std::shared_ptr<ProcessGroup> g) { return join_edge_case_rank(g, 2); });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(runs[std::size_t(r)].status, 0) << runs[std::size_t(r)].err;
}

TEST(DistDebugRanks, JoinWithSomeRanksUnderNoSyncAndOthersSyncedIsAnErrorOnEveryRank) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("join_mix");
  // Rank 0 joins at once; rank 1 runs a forward under no_sync while rank 2 runs a synced one.
  const auto runs = run_ranks(3, dir, {{"TRAINBENCH_DIST_TIMEOUT", "20"}}, [](std::shared_ptr<ProcessGroup> g) {
    core::manual_seed(7);
    auto model = std::make_shared<TwoLayers>(true);
    auto ddp = std::make_shared<DistributedDataParallel>(model, g);
    try {
      Join join(*ddp);
      if (g->rank() > 0) {
        std::optional<DistributedDataParallel::NoSyncGuard> local;
        if (g->rank() == 1) local.emplace(*ddp);
        const auto [x, y] = batch(g->rank(), 0);
        tb::mse_loss((*ddp)(x), y).backward();
      }
      join.join();
    } catch (const core::Error& e) {
      std::fprintf(stderr, "caught: %s\n", e.what());
      return 5;
    }
    return 0;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(runs[std::size_t(r)].status, 5) << runs[std::size_t(r)].err;
    expect_contains(runs[std::size_t(r)].err,
                    {"caught: ", "are under no_sync; under a Join every rank still training"});
  }
}

// Rank 1 issues one all_reduce more than the others; rank 0 leaves at once and rank 2 300 ms
// later. Rank 1's watchdog sees rank 0 gone within milliseconds, but waits for rank 2 to settle
// before its dump (Note [Settle before a dead-peer dump]), so the analysis names the extra
// collective instead of calling rank 2 frozen (the 50-seed soak hit this race twice in 100 runs).
TEST(DistDebugRanks, ADeadPeerDumpWaitsForTheOtherPeersToLeave) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("settle");
  const auto runs = run_ranks(3, dir, {{"TRAINBENCH_DIST_TIMEOUT", "20"}}, [](std::shared_ptr<ProcessGroup> g) {
    Tensor t = ones({4});
    g->all_reduce(t)->wait();
    if (g->rank() == 1) {
      g->all_reduce(t)->wait();  // the extra one: the watchdog ends this rank
      return 0;
    }
    if (g->rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    g.reset();  // leaves the group cleanly
    return 0;
  });
  ASSERT_EQ(runs[1].status, kWatchdogExitCode) << runs[1].err;
  EXPECT_EQ(runs[0].status, 0) << runs[0].err;
  EXPECT_EQ(runs[2].status, 0) << runs[2].err;
  const Diagnosis d = analyze_dumps(read_dump_dir(dir.path().string()));
  ASSERT_FALSE(d.findings.empty()) << diagnosis_text(d);
  EXPECT_EQ(d.findings[0].kind, FindingKind::ExtraCollective) << diagnosis_text(d);
  EXPECT_EQ(d.findings[0].collective_seq, 2u) << diagnosis_text(d);
  EXPECT_EQ(d.findings[0].ranks, std::vector<int>{1}) << diagnosis_text(d);
}

// Two ranks gone when the survivor looks: rank 0 ended inside all_reduce #2 (an _exit with its
// group alive, as a crash would), rank 1 was killed before reaching it. The survivor names rank 1,
// without which #2 cannot complete (Note [Dead ranks]); it named the lowest dead rank before,
// and so once blamed a rank that had itself named the real one (ci/main, collectives dead_rank).
TEST(DistDebugRanks, OfTwoDeadPeersTheOneThatNeverReachedTheCollectiveIsNamed) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("two_dead");
  const auto runs = run_ranks(3, dir, {{"TRAINBENCH_DIST_TIMEOUT", "20"}}, [](std::shared_ptr<ProcessGroup> g) {
    Tensor t = ones({4});
    g->all_reduce(t)->wait();
    if (g->rank() == 0) {
      auto w = g->all_reduce(t);  // #2: entered (after kPeerWaitMax, 250 ms), never completed
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::_Exit(9);
    }
    if (g->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      ::raise(SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    g->all_reduce(t)->wait();
    return 0;
  });
  EXPECT_EQ(runs[0].status, 9) << runs[0].err;
  EXPECT_EQ(runs[1].status, 128 + SIGKILL) << runs[1].err;
  ASSERT_EQ(runs[2].status, kWatchdogExitCode) << runs[2].err;
  expect_contains(runs[2].err, {"trainbench: watchdog: rank 2: rank 1 (pid ", "before reaching all_reduce #2 ",
                                "(its last collective: #1 "});
}

TEST(DistDebugRanks, WithoutJoinUnevenInputsHangAndTheWatchdogNamesTheBucket) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("nojoin");
  // Collective #1 is DDP's broadcast at construction, #2 step 0's bucket; rank 1's step 1 issues #3.
  const auto runs = run_ranks(2, dir, {{"TRAINBENCH_DIST_TIMEOUT", "3"}}, [](std::shared_ptr<ProcessGroup> g) {
    const int rank = g->rank();
    core::manual_seed(7);
    auto model = std::make_shared<TwoLayers>(true);
    auto ddp = std::make_shared<DistributedDataParallel>(model, g);
    for (int step = 0; step < 1 + rank; ++step) {
      model->zero_grad();
      const auto [x, y] = batch(rank, step);
      tb::mse_loss((*ddp)(x), y).backward();
    }
    std::this_thread::sleep_for(std::chrono::seconds(30));  // rank 0 is "evaluating": killed by the test
    return 0;
  });
  ASSERT_EQ(runs[1].status, kWatchdogExitCode) << runs[1].err;
  expect_contains(runs[1].err, {"trainbench: watchdog: rank 1: all_reduce #3 (", "label ddp/bucket 0 (4 params",
                                "rank 0 never arrived at #3"});
  const nlohmann::json dump = nlohmann::json::parse(std::ifstream(dir / "flight_recorder_rank1.json"));
  EXPECT_EQ(dump["entries"].back()["label"], "ddp/bucket 0 (4 params, 0.0 MiB)");
}

TEST(DistDebugRanks, AParameterWithoutAGradientIsAnErrorOnEveryRankNotAHang) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("unused_ranks");
  const auto runs = run_ranks(2, dir, {{"TRAINBENCH_DIST_TIMEOUT", "20"}}, [](std::shared_ptr<ProcessGroup> g) {
    auto model = std::make_shared<TwoLayers>(false);
    DDPOptions o;
    o.first_bucket_cap_mb = 1e-6;  // b's bucket (unready) comes first: nothing is launched
    auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
    Tensor loss = tb::sum((*ddp)(ones({5, 4})));
    try {
      loss.backward();
      return 1;
    } catch (const core::Error& e) {
      std::fprintf(stderr, "caught: %s\n", e.what());
    }
    Tensor t = ones({3});  // the ranks are still in step
    g->all_reduce(t)->wait();
    return t.data_ptr<float>()[0] == 2.f ? 0 : 3;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(runs[std::size_t(r)].status, 0) << runs[std::size_t(r)].err;
    expect_contains(runs[std::size_t(r)].err,
                    {"caught: DistributedDataParallel: some parameters received no gradient",
                     "parameters which did not receive grad for rank " + std::to_string(r) + ": b.weight, b.bias"});
  }
}

TEST(DistDebugRanks, FsdpCollectivesAreLabelledWithTheirUnit) {
  TB_NEED_FORKED_WORLDS();
  const testing::ScratchDir dir = fresh_dir("fsdp");
  const auto runs = run_ranks(2, dir, {}, [](std::shared_ptr<ProcessGroup> g) {
    core::manual_seed(3);
    auto model = std::make_shared<TwoLayers>(true);
    fully_shard(model->a, g);
    fully_shard(model, g);
    const auto [x, y] = batch(0, 0);
    tb::mse_loss((*model)(x), y).backward();
    std::string seen;
    for (const CallRecord& r : g->recorder().entries()) seen += r.label + "|";
    std::fprintf(stderr, "labels: %s\n", seen.c_str());
    return 0;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(runs[std::size_t(r)].status, 0) << runs[std::size_t(r)].err;
    expect_contains(runs[std::size_t(r)].err,
                    {"fsdp/root all_gather", "fsdp/a all_gather", "fsdp/a reduce_scatter", "fsdp/root reduce_scatter"});
  }
}

}  // namespace
}  // namespace tb::dist
