// The dcp suite's kill -9 case, run in the parent process (a killed rank would end a launched
// job): worlds of 2 and 3 ranks are forked from here, join over Gloo (TRAINBENCH_RANK and
// _WORLD_SIZE in each child's environment; the rendezvous folder is the trial's) and save a
// sharded state in a loop, one step after another; after a random delay one random rank gets
// SIGKILL, and a random moment later the others (as mpirun tears a job down). The checkpoint root
// must then load, here in a world of one, as a complete checkpoint: the one before the trial or
// one the trial wrote, every tensor equal to the state of its step bit for bit. Never torn. In
// every fourth trial the survivors are not killed: they must end on their own within 30 s (their
// save's error or their watchdog) with a message naming the killed rank. After the trials, one
// clean save must remove every staging entry the killed saves left.
// Seed: TB_DCP_SEED overrides the fixed default; the seed is in the record's metrics.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "engine/checkpoint/atomic_file.h"
#include "engine/core/env.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/checkpoint/checkpoint_util.h"
#include "suites/dcp/dcp_suite.h"
#include "suites/dcp/dcp_util.h"

namespace tb::suites {

namespace dcp {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 384, kCols = 512;  // 4 tensors of 768 KiB: a save has phases to hit

// The state of `step` as rank `rank` of `world` holds it: four tensors split along dim 0 (384
// rows: 192 or 128 per rank), one replicated on every rank, a 0-dim one; values from the step.
checkpoint::DistributedState crash_state(int64_t step, int rank, int world) {
  checkpoint::DistributedState s;
  const int64_t per = kRows / world;
  for (int i = 0; i < 4; ++i) {
    core::Generator gen(uint64_t(step) * 16 + uint64_t(i));
    const Tensor whole = randn({kRows, kCols}, DType::Float32, &gen);
    s.tensors.push_back(
        {"w" + std::to_string(i), whole.narrow(0, rank * per, per).contiguous(), {kRows, kCols}, rank * per});
  }
  core::Generator gen(uint64_t(step) * 16 + 7);
  s.tensors.push_back({"replicated", randn({33}, DType::Float64, &gen), {33}, 0});
  s.tensors.push_back({"step", scalar_tensor(double(step), DType::Int64), {}, 0});
  s.state = {{"step", step}};
  s.step = step;
  s.layout = "crash_w" + std::to_string(world);
  return s;
}

// A forked rank: joins the world over Gloo, tells the parent (one byte on `ready`), then saves
// steps first, first + 1, ... until killed. Exit 3: a save threw; 4: no Gloo world.
[[noreturn]] void saving_rank(const std::string& root, const std::string& store, int rank, int world, int64_t first,
                              int ready) {
  tb::set_num_threads(1);  // a forked child has only this thread (see checkpoint_crash.cpp)
  // Gloo writes to the dead peer's socket; SIGPIPE's default would end a survivor silently (seen:
  // wait status 13, no diagnosis). Neither the engine's Gloo group nor the harness ignores it;
  // PyTorch's Python does, and so do these ranks.
  ::signal(SIGPIPE, SIG_IGN);
  // The survivors' watchdogs report the killed rank: expected, so into the trial's folder.
  const int log = ::open((store + "/rank" + std::to_string(rank) + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log >= 0) ::dup2(log, 1), ::dup2(log, 2);
  ::setenv("TRAINBENCH_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("TRAINBENCH_WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("TRAINBENCH_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("TRAINBENCH_DIST_DIR", store.c_str(), 1);
  ::setenv("TRAINBENCH_GLOO_RUN_ID", fs::path(store).filename().c_str(), 1);
  std::shared_ptr<dist::ProcessGroup> g;
  try {
    g = dist::new_group("gloo");
  } catch (...) {
    ::_exit(4);
  }
  if (rank == 0 && ::write(ready, "r", 1) != 1) ::_exit(5);
  try {
    checkpoint::DistributedSaveOptions o;
    o.keep_last = 2;
    o.timeout = std::chrono::seconds(10);
    for (int64_t s = first;; ++s) {
      checkpoint::save_distributed(crash_state(s, rank, world), root, *g, o);
      if (rank == 0 && ::write(ready, "s", 1) != 1) ::_exit(5);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "saving rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    ::_exit(3);
  } catch (...) {
    ::_exit(3);
  }
}

struct World {
  std::vector<pid_t> pids;
  std::vector<int> status;  // wait status of each rank once reaped
  std::vector<bool> reaped;
  int ready = -1;  // the read end of rank 0's pipe
};

World start_world(const std::string& root, const std::string& store, int world, int64_t first) {
  int fds[2];
  check(::pipe(fds) == 0, std::string("pipe: ") + std::strerror(errno));
  World w;
  w.ready = fds[0];
  fs::create_directories(store);
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      saving_rank(root, store, r, world, first, fds[1]);
    }
    check(pid > 0, std::string("fork: ") + std::strerror(errno));
    w.pids.push_back(pid);
  }
  w.status.assign(size_t(world), 0);
  w.reaped.assign(size_t(world), false);
  ::close(fds[1]);
  return w;
}

// Waits for one byte from rank 0 (false: none within `timeout`, or the pipe closed).
bool next_byte(const World& w, std::chrono::milliseconds timeout) {
  struct pollfd p = {w.ready, POLLIN, 0};
  if (::poll(&p, 1, int(timeout.count())) != 1) return false;
  char c;
  return ::read(w.ready, &c, 1) == 1;
}

// Reaps the ranks that have ended, until all have or `seconds` pass; true when all have.
bool wait_exits(World& w, double seconds) {
  const auto t0 = Clock::now();
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < w.pids.size(); ++r) {
      if (!w.reaped[r] && ::waitpid(w.pids[r], &w.status[r], WNOHANG) == w.pids[r]) w.reaped[r] = true;
      all = all && w.reaped[r];
    }
    if (all || std::chrono::duration<double>(Clock::now() - t0).count() > seconds) return all;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Kills what is left of the world and reaps it; returns each rank's wait status.
std::vector<int> end_world(World& w) {
  for (size_t r = 0; r < w.pids.size(); ++r)
    if (!w.reaped[r]) ::kill(w.pids[r], SIGKILL);
  for (size_t r = 0; r < w.pids.size(); ++r)
    if (!w.reaped[r]) ::waitpid(w.pids[r], &w.status[r], 0), w.reaped[r] = true;
  ::close(w.ready);
  return w.status;
}

// The root loaded in a world of one: its step, and "" when every tensor is the state of that step.
std::pair<int64_t, std::string> load_whole(const std::string& root) {
  auto g = std::make_shared<testing::WorldOfOne>(dist::Options{});
  const checkpoint::DistributedMetadata meta = checkpoint::read_distributed_metadata(root);
  const checkpoint::DistributedState want = crash_state(meta.step, 0, 1);
  checkpoint::DistributedState got = want;
  for (checkpoint::ShardedEntry& e : got.tensors) e.local = zeros_like(e.local);
  checkpoint::load_distributed(got, root, *g);
  NamedTensors a, b;
  for (auto& e : got.tensors) a.emplace_back(e.name, e.local);
  for (auto& e : want.tensors) b.emplace_back(e.name, e.local);
  std::string d = bit_diff(a, b);
  if (d.empty() && got.state.value("step", int64_t(-1)) != meta.step) d = "state[\"step\"] is " + got.state.dump();
  return {meta.step, d};
}

void run_kill9(harness::Record& rec) {
  const uint64_t seed = core::env_uint64("TB_DCP_SEED", 20261203ull);
  std::mt19937_64 rng(seed);
  ckpt::TempDir dir;
  const std::string root = dir / "ckpt";
  {
    auto one = std::make_shared<testing::WorldOfOne>(dist::Options{});
    checkpoint::save_distributed(crash_state(1, 0, 1), root, *one);  // the checkpoint before the first kill
  }
  // How long one save takes in a world of 2: the kill moments spread over two saves.
  double save_s = 0;
  {
    World w = start_world(root, dir / "store_calibrate", 2, 2);
    const bool joined = next_byte(w, std::chrono::seconds(60));
    const auto t0 = Clock::now();
    bool saved3 = joined;
    for (int i = 0; i < 3 && saved3; ++i) saved3 = next_byte(w, std::chrono::seconds(60));
    save_s = std::chrono::duration<double>(Clock::now() - t0).count() / 3;
    const std::vector<int> st = end_world(w);
    for (int s : st)
      if (WIFEXITED(s) && WEXITSTATUS(s) == 4) {
        rec.status = harness::Status::Skip;
        rec.message = "no Gloo world (backend not built or rendezvous failed): the ranks cannot be forked";
        return;
      }
    check(saved3, "the calibration world did not save 3 times within 60 s (rank statuses " + std::to_string(st[0]) +
                      ", " + std::to_string(st[1]) + ")");
  }
  int64_t prev = load_whole(root).first;
  int kept_previous = 0, took_new = 0, survivors_checked = 0;
  double survivors_s = 0;
  std::string survivor_sample;  // what a survivor said, for the record
  constexpr int kTrials = 24;
  constexpr double kSurvivorLimitS = 30;
  for (int k = 0; k < kTrials; ++k) {
    const int world = 2 + k % 2;
    World w = start_world(root, dir / ("store_" + std::to_string(k)), world, prev + 1);
    if (!next_byte(w, std::chrono::seconds(60))) {
      end_world(w);
      throw CheckFailed("trial " + std::to_string(k) + ": the world of " + std::to_string(world) + " did not join");
    }
    std::uniform_real_distribution<double> delay(0, 2 * save_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
    const int victim = int(rng() % uint64_t(world));
    const std::string trial = "trial " + std::to_string(k) + " (rank " + std::to_string(victim) + " of " +
                              std::to_string(world) + " killed)";
    ::kill(w.pids[size_t(victim)], SIGKILL);
    // Every fourth trial the survivors are left to notice on their own: they must end (a save
    // error or their watchdog), never hang, and say which rank is gone.
    const bool on_their_own = k % 4 == 3;
    if (on_their_own) {
      const auto t0 = Clock::now();
      const bool ended = wait_exits(w, kSurvivorLimitS);
      survivors_s = std::max(survivors_s, std::chrono::duration<double>(Clock::now() - t0).count());
      if (!ended) end_world(w);
      check(ended, trial + ": the other ranks still run " + std::to_string(kSurvivorLimitS) + " s later (a hang)");
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng) / 4));
    }
    const std::vector<int> st = end_world(w);
    const int vs = st[size_t(victim)];
    check(WIFSIGNALED(vs) && WTERMSIG(vs) == SIGKILL,
          trial + ": the victim ended on its own before the kill (wait status " + std::to_string(vs) + ")");
    // Each survivor names a rank that is gone: the victim, or a survivor that ended before it
    // (its error ends it, so the last one may see only that one); at least one names the victim.
    int named_victim = 0;
    std::string logs;
    for (int r = 0; on_their_own && r < world; ++r) {
      if (r == victim) continue;
      const std::string log = checkpoint::read_small_file(
          dir / ("store_" + std::to_string(k) + "/rank" + std::to_string(r) + ".log"));
      logs += "\n  rank " + std::to_string(r) + " (wait status " + std::to_string(st[size_t(r)]) +
              "): " + log.substr(0, 700);
      bool names_other = false;
      for (int o = 0; o < world; ++o)
        names_other = names_other || (o != r && log.find("rank " + std::to_string(o)) != std::string::npos);
      check(names_other, trial + ": rank " + std::to_string(r) + " ended without naming the rank it lost:" + logs);
      if (log.find("rank " + std::to_string(victim)) != std::string::npos) ++named_victim;
      if (survivor_sample.empty() && log.find("rank " + std::to_string(victim)) != std::string::npos)
        survivor_sample = log.substr(0, 400);
      ++survivors_checked;
    }
    check(!on_their_own || named_victim > 0, trial + ": no survivor names rank " + std::to_string(victim) + ":" + logs);
    std::pair<int64_t, std::string> got;
    try {
      got = load_whole(root);
    } catch (const std::exception& e) {
      throw CheckFailed(trial + ": the checkpoint does not load: " + e.what());
    }
    check(got.second.empty(),
          "trial " + std::to_string(k) + ": step " + std::to_string(got.first) + " loads torn: " + got.second);
    check(got.first >= prev, "trial " + std::to_string(k) + ": latest went back from step " + std::to_string(prev) +
                                 " to " + std::to_string(got.first));
    (got.first == prev ? kept_previous : took_new)++;
    prev = got.first;
  }
  // Not correctness but the test's reach: kills must land both before and after a commit.
  check(kept_previous > 0 && took_new > 0, "every kill left the same outcome (" + std::to_string(kept_previous) +
                                               " previous, " + std::to_string(took_new) +
                                               " new): the kill moments do not cover the saves");
  // The next save after all those kills cleans what the killed ones left behind.
  {
    auto one = std::make_shared<testing::WorldOfOne>(dist::Options{});
    checkpoint::save_distributed(crash_state(prev + 1, 0, 1), root, *one);
  }
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(root))
    if (e.path().filename().string()[0] == '.') ++leftovers;
  check(leftovers == 0, std::to_string(leftovers) + " staging entries of the killed saves survive the next save");
  rec.message = "a survivor said: " + survivor_sample;
  rec.metrics.update({{"seed", seed},
                      {"trials", kTrials},
                      {"loaded_previous", kept_previous},
                      {"loaded_new", took_new},
                      {"save_s", save_s},
                      {"survivors_checked", survivors_checked},
                      {"survivors_slowest_exit_s", survivors_s}});
  rec.tolerances = {{"loaded_state", "bitwise, previous or new"}};
}

}  // namespace

}  // namespace dcp

std::vector<harness::TestCase> dcp_tests() { return {dcp::dcp_case("kill9/gloo/w2_w3", dcp::run_kill9)}; }

}  // namespace tb::suites
