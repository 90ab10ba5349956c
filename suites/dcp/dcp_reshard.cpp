// The dcp suite's resharding matrix and asynchronous save, run in every rank of one world-4 launch:
//   mpi/reshard/<saved>/to/<loaded>: for each of the six layouts (dcp_util.h) a GPT trains K = 3
//     AdamW steps and saves model and optimizer (train::distributed_state), then trains K more
//     steps (the uninterrupted run). Every layout then builds a fresh model (other initial
//     weights) and optimizer, loads the checkpoint (train::load_distributed_state) and must hold,
//     gathered whole, the saved model and optimizer state bit for bit; after the same K further
//     steps on the same data it must equal the uninterrupted run: bitwise when the loading layout
//     is the saving one (the same reduction order), else within the DDP suite's float64 parameter
//     tolerance (Note [DDP equivalence tolerances]: the layouts sum the gradient in other orders).
//     Metrics `after_k_steps_bitwise` and `after_k_steps_worst_tolerance_ratio` say which held.
//   mpi/async/full_shard_w4: two AsyncCheckpointer saves while training goes on (the second
//     waits for the first); each checkpoint equals the state at its save() bit for bit; the time
//     save() blocked beside a synchronous save of the same state.
//   mpi/async/background/full_shard_w4: the same with Staging::Background (the optimizer step
//     waits for the copy through the state fence).
//   mpi/async/background/write_before_wait_staged_w4: rank 1 writes a saved tensor before
//     wait_staged(): the save fails on every rank naming the tensor, the previous one still loads.
// Subgroups: the ranks [0, W) of the launched world, split per case (dcp_util.h: first_ranks);
// the other ranks wait at a barrier of the world group.
#include <chrono>
#include <exception>
#include <filesystem>
#include <map>

#include "engine/dist/process_group.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"
#include "engine/train/distributed_checkpoint.h"
#include "suites/dcp/dcp_suite.h"
#include "suites/dcp/dcp_util.h"
#include "suites/ddp/dist_check.h"

namespace tb::suites {

namespace dcp {

namespace fs = std::filesystem;
using dist::ProcessGroup;

constexpr int64_t K = kSteps;

void on_first_ranks(ProcessGroup& all, int world, const std::function<void()>& f) {
  std::exception_ptr err;
  if (all.rank() < world) {
    try {
      f();
    } catch (...) {
      err = std::current_exception();
    }
  }
  Tensor failed = from_vector_of<int64_t>({err ? 1 : 0}, {1});
  all.all_reduce(failed, dist::ReduceOp::Max)->wait();
  if (err) std::rethrow_exception(err);
  check(failed.data_ptr<int64_t>()[0] == 0, "another rank of the case failed (its record says why)");
}

// The checkpoints outlive the cases that use them; every rank removes them as it exits.
struct SavedCache : std::map<std::string, Saved> {
  ~SavedCache() {
    std::error_code ec;
    for (auto& [name, s] : *this) fs::remove_all(s.dir, ec);
  }
};

Saved train_and_save(const Layout& s, std::shared_ptr<ProcessGroup> g, const std::string& dir) {
  Saved out;
  out.dir = dir;
  Trained t = make_trained(s, std::move(g), 7);
  train(t, 0, K);
  out.at_save = whole_state(t);
  checkpoint::save_distributed(train::distributed_state(*t.model, t.opt.get(), K, {{"next_step", K}}, s.name), dir,
                               *t.group);
  out.losses = train(t, K, K);
  out.after = whole_state(t);
  return out;
}

const Saved& saved(const Layout& s, ProcessGroup& world) {
  static SavedCache cache;
  if (auto it = cache.find(s.name); it != cache.end()) return it->second;
  Saved out;
  out.dir = scratch_dir(world, "reshard_" + s.name);
  auto g = first_ranks(world, s.world);
  NamedTensors at, after;
  on_first_ranks(world, s.world, [&] {
    Saved mine = train_and_save(s, g, out.dir);
    at = std::move(mine.at_save);
    after = std::move(mine.after);
    out.losses = std::move(mine.losses);
  });
  out.at_save = share_from_rank0(world, at);
  out.after = share_from_rank0(world, after);
  const NamedTensors losses =
      share_from_rank0(world, {{"losses", from_vector(out.losses, {int64_t(out.losses.size())}, DType::Float64)}});
  out.losses.assign(losses[0].second.data_ptr<double>(), losses[0].second.data_ptr<double>() + K);
  return cache.emplace(s.name, std::move(out)).first->second;
}

void check_loaded(const Layout& s, const Saved& S, const Layout& l, std::shared_ptr<ProcessGroup> g,
                  harness::Record& rec) {
  const bool same_order = s.name == l.name;
  const Tolerance tol = param_tolerance(DType::Float64);
  rec.tolerances = {{"loaded", "bitwise"},
                    {"after_k_steps",
                     same_order ? nlohmann::json("bitwise") : nlohmann::json{{"rtol", tol.rtol}, {"atol", tol.atol}}}};
  {
    Trained t = make_trained(l, g, 99);  // other initial weights: the load must replace them all
    const checkpoint::DistributedState got = train::load_distributed_state(*t.model, t.opt.get(), S.dir, *g);
    check(got.step == K, "the loaded step is " + std::to_string(got.step) + ", saved " + std::to_string(K));
    check(got.layout == s.name, "the loaded layout is '" + got.layout + "', saved '" + s.name + "'");
    check(got.state.value("extra", nlohmann::json::object()).value("next_step", -1) == K,
          "state[\"extra\"] did not come back: " + got.state.dump());
    const std::string loaded = bit_diff(whole_state(t), S.at_save);
    check(loaded.empty(), "the loaded model and optimizer state differ from what " + s.name + " saved: " + loaded);
    const std::vector<double> losses = train(t, K, K);
    const NamedTensors after = whole_state(t);
    const std::string bits = bit_diff(after, S.after);
    std::string where;
    const double worst = worst_ratio(after, S.after, tol, &where);
    rec.metrics["saved_world"] = s.world;
    rec.metrics["loaded_world"] = l.world;
    rec.metrics["tensors"] = S.at_save.size();
    rec.metrics["loaded_bitwise"] = 1;
    rec.metrics["after_k_steps_bitwise"] = bits.empty() ? 1 : 0;
    rec.metrics["after_k_steps_worst_tolerance_ratio"] = worst;
    rec.series = {{"engine_loss", losses}, {"reference_loss", S.losses}};
    if (same_order)
      check(bits.empty(), "after " + std::to_string(K) +
                              " further steps in the saving layout the state is not bitwise "
                              "the uninterrupted run's: " +
                              bits);
    else
      check(worst <= 1, "after " + std::to_string(K) +
                            " further steps the state differs from the uninterrupted run "
                            "beyond the tolerance: " +
                            where);
  }
}

void run_pair(const Layout& s, const Layout& l, harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const Saved& S = saved(s, *world);
  auto g = first_ranks(*world, l.world);
  on_first_ranks(*world, l.world, [&] { check_loaded(s, S, l, g, rec); });
}

// Copies of every entry's rows: what a checkpoint of `st` must give back.
NamedTensors snapshot(const checkpoint::DistributedState& st) {
  NamedTensors out;
  for (const checkpoint::ShardedEntry& e : st.tensors) out.emplace_back(e.name, e.local.detach().clone());
  return out;
}

// Loads `path` into zeroed entries shaped as `like`'s and returns their rows.
NamedTensors load_rows(const checkpoint::DistributedState& like, const std::string& path, ProcessGroup& g,
                       int64_t* step) {
  checkpoint::DistributedState st = like;
  for (checkpoint::ShardedEntry& e : st.tensors) e.local = zeros_like(e.local);
  checkpoint::load_distributed(st, path, g);
  *step = st.step;
  return snapshot(st);
}

void run_async(harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const Layout& l = layouts()[3];  // full_shard_w4
  Trained t = make_trained(l, world, 11);
  // Beside the tiny GPT, 4 MiB of this rank's rows of a sharded tensor, so the write takes long
  // enough for the blocking time to mean something.
  const int64_t rows = 4096, cols = 256, mine = rows / world->size();
  core::Generator gen(123 + uint64_t(world->rank()));
  Tensor big = randn({mine, cols}, DType::Float32, &gen);
  auto state_at = [&](int64_t step) {
    checkpoint::DistributedState st = train::distributed_state(*t.model, t.opt.get(), step, {}, l.name);
    st.tensors.push_back({"extra.big", big, {rows, cols}, world->rank() * mine});
    return st;
  };
  const std::string dir = scratch_dir(*world, "async");
  train(t, 0, K);
  double blocking_first = 0, blocking_second = 0, call_first = 0;
  NamedTensors want_a, want_b;
  checkpoint::DistributedState like;
  {
    checkpoint::AsyncCheckpointer ckpt(world);
    like = state_at(K);
    want_a = snapshot(like);
    const auto t0 = std::chrono::steady_clock::now();
    ckpt.save(like, dir);
    call_first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    blocking_first = ckpt.last_blocking_seconds();
    // Training goes on while the first save writes: the live tensors change under it.
    train(t, K, K);
    ops::add_(big, 1.0);
    checkpoint::DistributedState b = state_at(2 * K);
    want_b = snapshot(b);
    ckpt.save(b, dir);  // waits for the first save
    blocking_second = ckpt.last_blocking_seconds();
    train(t, 2 * K, 1);
    ops::add_(big, 1.0);
    ckpt.wait();
  }
  int64_t step_a = 0, step_b = 0;
  const NamedTensors got_b = load_rows(like, dir, *world, &step_b);
  const NamedTensors got_a = load_rows(like, dir + "/step-" + std::to_string(K), *world, &step_a);
  // The same state, synchronously, into another directory.
  const std::string sync_dir = scratch_dir(*world, "async_sync");
  const auto t0 = std::chrono::steady_clock::now();
  checkpoint::save_distributed(like, sync_dir, *world);
  const double sync_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double sync_mean = global_mean(*world, sync_s), blocking_mean = global_mean(*world, blocking_first);
  remove_scratch(*world, dir);
  remove_scratch(*world, sync_dir);
  check(step_b == 2 * K, "the root's latest checkpoint is step " + std::to_string(step_b) + ", not the second save's");
  check(step_a == K, "step-" + std::to_string(K) + " holds step " + std::to_string(step_a));
  const std::string da = bit_diff(got_a, want_a), db = bit_diff(got_b, want_b);
  check(da.empty(), "the first async checkpoint is not the state at its save(): " + da);
  check(db.empty(), "the second async checkpoint is not the state at its save(): " + db);
  rec.metrics["world"] = world->size();
  rec.metrics["state_bytes_per_rank"] = double(big.numel() * 4);
  rec.metrics["async_blocking_s"] = blocking_mean;
  rec.metrics["async_save_call_s"] = call_first;
  rec.metrics["async_second_blocking_s"] = blocking_second;
  rec.metrics["sync_save_s"] = sync_mean;
  rec.metrics["blocking_over_sync"] = sync_mean > 0 ? blocking_mean / sync_mean : 0;
  rec.tolerances = {{"checkpoint", "bitwise"}};
}

// Staging::Background (Note [Background staging]): save() returns before the copy; the next
// optimizer step waits for it through the state fence, so training goes on without a call;
// writes after wait_staged() are allowed. Each checkpoint equals the state at its save() bit for
// bit.
void run_async_background(harness::Record& rec) {
  auto world = dist::new_group("mpi");
  Trained t = make_trained(layouts()[3], world, 12);  // full_shard_w4
  const int64_t rows = 4096, cols = 256, mine = rows / world->size();
  core::Generator gen(321 + uint64_t(world->rank()));
  Tensor big = randn({mine, cols}, DType::Float32, &gen);
  auto state_at = [&](int64_t step) {
    checkpoint::DistributedState st = train::distributed_state(*t.model, t.opt.get(), step, {}, "full_shard_w4");
    st.tensors.push_back({"extra.big", big, {rows, cols}, world->rank() * mine});
    return st;
  };
  const std::string dir = scratch_dir(*world, "async_background");
  train(t, 0, K);
  NamedTensors want_a, want_b;
  checkpoint::DistributedState like;
  double first_call = 0;
  {
    checkpoint::AsyncCheckpointer ckpt(world, {}, checkpoint::Staging::Background);
    like = state_at(K);
    want_a = snapshot(like);
    ckpt.save(like, dir);
    first_call = ckpt.last_blocking_seconds();
    train(t, K, 1);  // forward and backward beside the copy; AdamW's step waits for it
    ckpt.wait_staged();
    ops::add_(big, 1.0);
    checkpoint::DistributedState b = state_at(K + 1);
    want_b = snapshot(b);
    ckpt.save(b, dir);  // waits for the first save
    ckpt.wait_staged();
    ops::add_(big, 1.0);
    train(t, K + 1, 1);
    ckpt.wait();
  }
  int64_t step_a = 0, step_b = 0;
  const NamedTensors got_b = load_rows(like, dir, *world, &step_b);
  const NamedTensors got_a = load_rows(like, dir + "/step-" + std::to_string(K), *world, &step_a);
  world->barrier()->wait();
  remove_scratch(*world, dir);
  check(step_a == K && step_b == K + 1,
        "the checkpoints hold steps " + std::to_string(step_a) + " and " + std::to_string(step_b));
  const std::string da = bit_diff(got_a, want_a), db = bit_diff(got_b, want_b);
  check(da.empty(), "the first background-staged checkpoint is not the state at its save(): " + da);
  check(db.empty(), "the second background-staged checkpoint is not the state at its save(): " + db);
  rec.metrics["first_save_call_s"] = first_call;
  rec.tolerances = {{"checkpoint", "bitwise"}};
}

// A write between save() and wait_staged() (rank 1 only) with Staging::Background: wait_staged()
// names the tensor on rank 1, the save fails on every rank naming rank 1, and the previous
// checkpoint is still what the root loads.
void run_async_misuse(harness::Record& rec) {
  auto world = dist::new_group("mpi");
  const int64_t rows = 4096, cols = 256, mine = rows / world->size();
  core::Generator gen(77 + uint64_t(world->rank()));
  Tensor w = randn({mine, cols}, DType::Float32, &gen);
  auto state_at = [&](int64_t step) {
    checkpoint::DistributedState st;
    st.tensors.push_back({"model.w", w, {rows, cols}, world->rank() * mine});
    st.step = step;
    st.layout = "fsdp/full_shard";
    return st;
  };
  const std::string dir = scratch_dir(*world, "async_misuse");
  const checkpoint::DistributedState first = state_at(1);
  const NamedTensors want = snapshot(first);
  std::string staged_error, save_error;
  {
    checkpoint::AsyncCheckpointer ckpt(world, {}, checkpoint::Staging::Background);
    ckpt.save(first, dir);
    ckpt.wait_staged();
    ckpt.wait();
    ckpt.save(state_at(2), dir);
    if (world->rank() == 1) ops::add_(w, 1.0);  // the misuse: before wait_staged()
    staged_error = error_of([&] { ckpt.wait_staged(); });
    save_error = error_of([&] { ckpt.wait(); });
  }
  int64_t step = 0;
  const NamedTensors got = load_rows(first, dir, *world, &step);
  const bool step2_absent = !fs::exists(dir + "/step-2");
  world->barrier()->wait();
  remove_scratch(*world, dir);
  if (world->rank() == 1)
    check(staged_error.find("tensor 'model.w' was written in place") != std::string::npos &&
              staged_error.find("Call wait_staged()") != std::string::npos,
          "rank 1's wait_staged() did not name the written tensor and the remedy: '" + staged_error + "'");
  else check(staged_error.empty(), "wait_staged() failed on a rank that wrote nothing: " + staged_error);
  check(save_error.find("rank 1: ") != std::string::npos && save_error.find("'model.w'") != std::string::npos,
        "the save did not fail naming rank 1 and the tensor: '" + save_error + "'");
  check(step == 1 && step2_absent,
        "the root loads step " + std::to_string(step) + " (want 1); step-2 " + (step2_absent ? "absent" : "exists"));
  const std::string d = bit_diff(got, want);
  check(d.empty(), "the previous checkpoint does not hold the first save's state: " + d);
  rec.message = save_error;
}

}  // namespace dcp

std::vector<harness::TestCase> dcp_rank_tests(int world) {
  std::vector<harness::TestCase> t;
  if (world != 4) return t;
  for (const dcp::Layout& s : dcp::layouts())
    for (const dcp::Layout& l : dcp::layouts())
      t.push_back(dcp::dcp_case("mpi/reshard/" + s.name + "/to/" + l.name,
                                [s, l](harness::Record& rec) { dcp::run_pair(s, l, rec); }));
  t.push_back(dcp::dcp_case("mpi/async/full_shard_w4", dcp::run_async));
  t.push_back(dcp::dcp_case("mpi/async/background/full_shard_w4", dcp::run_async_background));
  t.push_back(dcp::dcp_case("mpi/async/background/write_before_wait_staged_w4", dcp::run_async_misuse));
  for (harness::TestCase& c : dcp::fault_rank_tests()) t.push_back(std::move(c));
  return t;
}

}  // namespace tb::suites
