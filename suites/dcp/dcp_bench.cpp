// The dcp suite's benchmarks, run inside every rank (dcp_bench.h names the cases).
//
// Note [DCP bench timing]
// Each rank fills its rows of every tensor with random values. Then kRepetitions times: a
// synchronous save into a fresh step directory under a temporary root (std::filesystem's
// temp_directory_path, /tmp by default; removed afterwards), timed from a barrier to the save's
// return on every rank (the commit included) and reduced with MAX over the ranks; the buffers are
// zeroed, and the same checkpoint is loaded back in place, timed the same way, and checked
// against the saved values (XXH64 of each rank's rows). save_gbps / load_gbps: the state's bytes
// over the median repetition (aggregate over the ranks), _min/_max from the extremes. The files
// were just written, so loads read the page cache, on both sides alike. rank<r>_save_gbps /
// rank<r>_load_gbps: that rank's data bytes (SaveStats/LoadStats) over its own seconds, median.
// Then asynchronous saves inside a training loop (Note [DCP bench training loop]):
// async_blocking_ms is the median time a save with Staging::Background kept the loop from going
// on (save() + the next step's wait_staged()), async_blocking_fraction its ratio to the
// synchronous save's median time; async_copy_* the same with Staging::Blocking (the copy inside
// save()), in the same run. memcpy_gbps: every rank
// copies a 256 MiB buffer at once (the best of 3): the aggregate rate of copying bytes in memory,
// which a save or load through the page cache cannot beat; it is recorded beside them as the
// machine's figure. plain_write_gbps: every rank writes as many bytes as its save wrote, from
// memory, in 256 MiB pwrite calls to one file in the same directory, then fsyncs it, timed from a
// barrier to the last rank's fsync (median of kRepetitions): a durable write with no hashing, no
// metadata and no commit, the way a simple program writes. It is not a floor: the save starts
// each tensor's writeback while it copies the next (Note [Load and save I/O]); in quiet runs it
// ran at 0.88-1.3x of it (save_vs_plain_write, the save's rate over it). async_blocking_floor_ms:
// the slowest rank's state bytes over its memcpy rate, the least a staging copy can block.
// reference/dist/torch_dcp_bench.py measures torch.distributed.checkpoint the same way.
// Durability, like for like: both saves are durable when they return. torch's FileSystemWriter
// (sync_files=True, its default) fsyncs each rank's .distcp file and .metadata.tmp, then renames
// it to .metadata (no directory fsync). save_distributed fsyncs each rank's file, metadata.json
// and the staging directory, renames it into place, fsyncs the root, then moves `latest` (a
// fsynced temporary renamed over it, the root fsynced again): more fsyncs than torch, not fewer.
#include "suites/dcp/dcp_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/distributed.h"
#include "engine/core/rng.h"
#include "engine/dist/process_group.h"
#include "engine/nn/models.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/linalg.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kRepetitions = 3;
constexpr size_t kMemcpyBytes = size_t(256) << 20;

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double reduce_value(dist::ProcessGroup& g, double v, dist::ReduceOp op) {
  Tensor t = from_vector({v}, {1}, DType::Float64);
  g.all_reduce(t, op)->wait();
  return t.data_ptr<double>()[0];
}

// Rows [begin, end) of n that `rank` holds: torch.chunk's split (DTensor's Shard(0)).
std::pair<int64_t, int64_t> rank_rows(int64_t n, int rank, int world) {
  const int64_t per = (n + world - 1) / world;
  return {std::min(n, per * rank), std::min(n, per * (rank + 1))};
}

// The temporary root, the same on every rank (rank 0 draws its name), removed when done.
struct TempRoot {
  std::string path;
  bool owner = false;
  TempRoot(dist::ProcessGroup& g) {
    std::random_device rd;
    Tensor id = from_vector({double(rd() & 0xffffff) * 16777216.0 + double(rd() & 0xffffff)}, {1}, DType::Float64);
    g.broadcast(id, 0)->wait();
    char name[64];
    std::snprintf(name, sizeof name, "tb_dcp_bench_%012llx", (unsigned long long)id.data_ptr<double>()[0]);
    path = (fs::temp_directory_path() / name).string();
    owner = g.rank() == 0;
    if (owner) fs::create_directories(path);
    g.barrier()->wait();
  }
  ~TempRoot() {
    std::error_code ec;
    if (owner) fs::remove_all(path, ec);
  }
};

std::string local_checksum(const checkpoint::DistributedState& s) {
  std::string all;
  for (const checkpoint::ShardedEntry& e : s.tensors)
    all += checkpoint::checksum_hex(e.local.data_ptr<float>(), size_t(e.local.numel()) * sizeof(float));
  return checkpoint::checksum_hex(all.data(), all.size());
}

void zero_locals(checkpoint::DistributedState& s) {
  for (checkpoint::ShardedEntry& e : s.tensors)
    std::memset(e.local.data_ptr<float>(), 0, size_t(e.local.numel()) * sizeof(float));
}

// Note [DCP bench training loop]
// The asynchronous save is measured where it matters, inside training. A step is a compute
// stand-in for forward and backward (matrix products of a few MiB, ~kComputeSeconds, the same
// count on every rank) and a real AdamW step over this rank's rows of the benchmarked state
// (parameters with fixed gradients; the optimizer's own exp_avg, exp_avg_sq and step are the
// saved moments): a memory-bound pass over the whole state, as in training. A save follows the
// optimizer step at least kSaveEvery steps after the previous one and only once that one has
// committed on every rank (AsyncCheckpointer::done(), agreed by an all_reduce), as a loop that
// checkpoints far less often than a save takes would; the next step calls wait_staged() before
// its optimizer step, as a loop with background staging must. Per save, the time save() and that
// wait_staged() kept the loop from going on is the blocking time (MAX over the ranks). The last
// step always saves (after waiting for the previous save): that checkpoint is loaded back and
// must equal the state (XXH64 of each rank's rows), and it is left out of the figures. A step is
// "with a save in flight" when it overlaps [save(), the save's commit]. The idle step time is the
// median of kIdleSteps steps without a checkpointer before the loops and kIdleSteps after them. The loop runs kLoopSteps steps
// once per staging mode (Staging::Blocking, then Staging::Background).
constexpr int kIdleSteps = 5, kLoopSteps = 14, kSaveEvery = 3;
constexpr double kComputeSeconds = 0.25;

struct LoopFigures {
  std::vector<double> blocking;    // per save, MAX over ranks
  std::vector<double> save_s;      // per save: save() to commit on this rank
  std::vector<double> busy_steps;  // steps with a save in flight
  double staging_s = 0;            // the last save's copy
};

class TrainingLoop {
 public:
  TrainingLoop(dist::ProcessGroup& g, checkpoint::DistributedState& state) : g_(g), state_(state) {
    // The "model." entries become parameters with fixed gradients; the optimizer's state replaces
    // the "optim." entries (the same names and shapes), so the saved state is what AdamW writes.
    std::vector<Tensor> params;
    std::vector<std::string> fqns;
    core::Generator gen(9000 + uint64_t(g.rank()));
    std::vector<checkpoint::ShardedEntry> entries;
    for (checkpoint::ShardedEntry& e : state.tensors)
      if (e.name.rfind("model.", 0) == 0) {
        e.local.requires_grad_(true);
        e.local.set_grad(ops::mul(rand(e.local.sizes(), DType::Float32, &gen), 1e-3));
        params.push_back(e.local);
        fqns.push_back(e.name.substr(6));
        entries.push_back(e);
      }
    optim::AdamW::Options o;
    o.lr = 1e-4;
    opt_ = std::make_unique<optim::AdamW>(params, o);
    opt_->step();  // makes the moments
    const auto by_name = [&] {
      std::map<std::string, const checkpoint::ShardedEntry*> m;
      for (const checkpoint::ShardedEntry& e : state.tensors) m[e.name] = &e;
      return m;
    }();
    const optim::StateDict sd = opt_->state_dict();  // live tensors
    for (const auto& [key, t] : sd.tensors) {        // "state.<i>.<exp_avg|exp_avg_sq|step>"
      const size_t dot = key.find('.', 6);
      const std::string name = "optim." + fqns.at(std::stoul(key.substr(6, dot - 6))) + "." + key.substr(dot + 1);
      checkpoint::ShardedEntry e = *by_name.at(name);
      e.local = t;
      entries.push_back(std::move(e));
    }
    TB_CHECK(entries.size() == state.tensors.size(), "dcp bench", "the optimizer's state does not cover the bench's ",
             state.tensors.size(), " tensors (", entries.size(), ")");
    state.tensors = std::move(entries);
    // The compute stand-in: as many products as take kComputeSeconds here, the most any rank needs.
    a_ = rand({256, 1024}, DType::Float32, &gen);
    b_ = rand({1024, 1024}, DType::Float32, &gen);
    ops::matmul(a_, b_);
    const auto t0 = Clock::now();
    for (int i = 0; i < 4; ++i) ops::matmul(a_, b_);
    const double one = secs(t0, Clock::now()) / 4;
    products_ = int(reduce_value(g, std::ceil(kComputeSeconds / std::max(one, 1e-6)), dist::ReduceOp::Max));
  }

  // kIdleSteps steps without a checkpointer: their step times.
  std::vector<double> idle() {
    std::vector<double> steps;
    g_.barrier()->wait();
    for (int i = 0; i < kIdleSteps; ++i) {
      const auto t0 = Clock::now();
      compute();
      opt_->step();
      steps.push_back(secs(t0, Clock::now()));
    }
    return steps;
  }

  // `values_ok` is cleared when the last checkpoint, taken at the last step, is not the state.
  LoopFigures run(const std::shared_ptr<dist::ProcessGroup>& g, checkpoint::Staging staging, const std::string& dir,
                  bool& values_ok) {
    LoopFigures f;
    checkpoint::DistributedSaveOptions so;
    so.keep_last = 1;
    checkpoint::AsyncCheckpointer ck(g, so, staging);
    struct Window {
      double begin = 0, end = 1e30, blocked = 0;
    };
    std::vector<Window> saves;
    std::vector<std::pair<double, double>> steps;
    bool staging_pending = false;
    int next_due = kSaveEvery - 1;
    auto collect = [&](const checkpoint::SaveStats& ss) {  // the last save just finished
      Window& w = saves.back();
      w.end = w.begin + ck.last_staging_seconds() + ss.seconds;
      f.save_s.push_back(ck.last_staging_seconds() + ss.seconds);
    };
    g->barrier()->wait();
    const auto origin = Clock::now();
    for (int i = 0; i < kLoopSteps; ++i) {
      const double begin = secs(origin, Clock::now());
      compute();
      if (staging_pending) {
        const auto t0 = Clock::now();
        ck.wait_staged();
        saves.back().blocked += secs(t0, Clock::now());
        staging_pending = false;
      }
      opt_->step();
      // Due, and the previous save done on every rank (a save is a collective); the last step
      // always saves, after waiting for the previous one.
      const bool last = i == kLoopSteps - 1;
      if (last || (i >= next_due && reduce_value(*g, ck.done() ? 1.0 : 0.0, dist::ReduceOp::Min) == 1.0)) {
        if (!saves.empty()) collect(ck.wait());  // at once, unless last
        const auto t0 = Clock::now();
        state_.step = i + 1;
        ck.save(state_, dir);
        saves.push_back({secs(origin, t0), 1e30, secs(t0, Clock::now())});
        staging_pending = true;
        next_due = i + kSaveEvery;
      }
      steps.emplace_back(begin, secs(origin, Clock::now()));
    }
    collect(ck.wait());
    f.staging_s = ck.last_staging_seconds();
    // The last save is the check's, not a figure.
    for (size_t k = 0; k + 1 < saves.size(); ++k)
      f.blocking.push_back(reduce_value(*g, saves[k].blocked, dist::ReduceOp::Max));
    // The last save came after the last step: it must hold the state as it is now.
    const std::string want = local_checksum(state_);
    zero_locals(state_);
    checkpoint::load_distributed(state_, dir, *g);
    values_ok = values_ok && local_checksum(state_) == want;
    for (const auto& [b, e] : steps) {
      for (const Window& w : saves)
        if (b < w.end && e > w.begin) {
          f.busy_steps.push_back(e - b);
          break;
        }
    }
    return f;
  }

 private:
  void compute() {
    for (int i = 0; i < products_; ++i) ops::matmul(a_, b_);
  }

  dist::ProcessGroup& g_;
  checkpoint::DistributedState& state_;
  std::unique_ptr<optim::AdamW> opt_;
  Tensor a_, b_;
  int products_ = 1;
};

void run_dcp_bench(const std::string& model, harness::Record& rec) {
  rec.kind = "benchmark";
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);  // Note [MPI polling in the DDP bench]
  std::shared_ptr<dist::ProcessGroup> g = dist::new_group("mpi");
  const int world = g->size(), rank = g->rank();

  checkpoint::DistributedState state;
  state.layout = "fsdp/full_shard";
  state.step = 1;
  state.state = {{"bench", "dcp"}, {"model", model}};
  core::Generator gen(7000 + uint64_t(rank));
  int64_t state_bytes = 0;
  for (const auto& [name, shape] : dcp_bench_spec(model)) {
    checkpoint::ShardedEntry e;
    e.name = name;
    e.global_shape = shape;
    Shape local = shape;
    if (!shape.empty()) {
      const auto [b, end] = rank_rows(shape[0], rank, world);
      e.row_offset = b;
      local[0] = end - b;
    }
    e.local = rand(local, DType::Float32, &gen);
    if (shape.empty()) e.local.data_ptr<float>()[0] = 1;  // AdamW's step: the same on every rank
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    state_bytes += n * int64_t(sizeof(float));
    state.tensors.push_back(std::move(e));
  }
  const std::string saved_sum = local_checksum(state);
  TempRoot root(*g);

  std::vector<double> save_s, load_s, rank_save_gbps, rank_load_gbps;
  int64_t rank_written = 0, rank_read = 0;
  bool values_ok = true;
  for (int r = 0; r < kRepetitions; ++r) {
    const std::string dir = root.path + "/sync-" + std::to_string(r);
    g->barrier()->wait();
    auto t0 = Clock::now();
    const checkpoint::SaveStats ss = checkpoint::save_distributed(state, dir, *g);
    save_s.push_back(reduce_value(*g, secs(t0, Clock::now()), dist::ReduceOp::Max));
    rank_save_gbps.push_back(double(ss.bytes_written) / ss.seconds / 1e9);
    rank_written = ss.bytes_written;

    zero_locals(state);
    g->barrier()->wait();
    t0 = Clock::now();
    const checkpoint::LoadStats ls = checkpoint::load_distributed(state, dir, *g);
    load_s.push_back(reduce_value(*g, secs(t0, Clock::now()), dist::ReduceOp::Max));
    rank_load_gbps.push_back(double(ls.bytes_read) / ls.seconds / 1e9);
    rank_read = ls.bytes_read;
    values_ok = values_ok && local_checksum(state) == saved_sum;
    g->barrier()->wait();
    std::error_code ec;
    if (rank == 0) fs::remove_all(dir, ec);
  }

  // Asynchronous saves inside a training loop (Note [DCP bench training loop]).
  TrainingLoop loop(*g, state);
  std::vector<double> idle_steps = loop.idle();
  const LoopFigures copying = loop.run(g, checkpoint::Staging::Blocking, root.path + "/async-blocking", values_ok);
  const LoopFigures bg = loop.run(g, checkpoint::Staging::Background, root.path + "/async-background", values_ok);
  for (double t : loop.idle()) idle_steps.push_back(t);  // before and after: the load drifts

  // memcpy: every rank at once, the best of 3.
  std::vector<char> src(kMemcpyBytes, 1), dst(kMemcpyBytes, 0);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    g->barrier()->wait();
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), kMemcpyBytes);
    best = std::min(best, secs(t0, Clock::now()));
  }
  const double memcpy_rank = double(kMemcpyBytes) / best / 1e9;

  // The save's bytes written plainly and fsynced, every rank at once.
  std::vector<double> plain_s;
  for (int r = 0; r < kRepetitions; ++r) {
    const std::string path = root.path + "/plain-" + std::to_string(r) + "-rank" + std::to_string(rank) + ".bin";
    g->barrier()->wait();
    const auto t0 = Clock::now();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    for (int64_t off = 0; ok && off < rank_written;) {
      const size_t n = size_t(std::min<int64_t>(int64_t(kMemcpyBytes), rank_written - off));
      const ssize_t w = ::pwrite(fd, src.data(), n, off_t(off));
      ok = w > 0;
      off += ok ? w : 0;
    }
    ok = ok && ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    const double t = secs(t0, Clock::now());
    TB_CHECK(reduce_value(*g, ok ? 1.0 : 0.0, dist::ReduceOp::Min) == 1.0, "dcp bench", "the plain-write file ", path,
             " (or another rank's) could not be written");
    plain_s.push_back(reduce_value(*g, t, dist::ReduceOp::Max));
    std::error_code ec;
    fs::remove(path, ec);
  }
  const double plain_med = median(plain_s);
  const double blocking_floor = reduce_value(*g, double(rank_written) / (memcpy_rank * 1e9), dist::ReduceOp::Max);

  const double save_med = median(save_s), load_med = median(load_s);
  auto minmax = [](const std::vector<double>& v) { return std::minmax_element(v.begin(), v.end()); };
  const double gb = double(state_bytes) / 1e9;
  auto slowest = [&](double v) { return reduce_value(*g, v, dist::ReduceOp::Max); };
  const double idle_step = slowest(median(idle_steps));
  const double bg_block = median(bg.blocking), copy_block = median(copying.blocking);
  rec.metrics = {{"save_gbps", gb / save_med},
                 {"save_gbps_min", gb / *minmax(save_s).second},
                 {"save_gbps_max", gb / *minmax(save_s).first},
                 {"load_gbps", gb / load_med},
                 {"load_gbps_min", gb / *minmax(load_s).second},
                 {"load_gbps_max", gb / *minmax(load_s).first},
                 {"save_ms", save_med * 1e3},
                 {"load_ms", load_med * 1e3},
                 {"async_blocking_ms", bg_block * 1e3},
                 {"async_blocking_fraction", bg_block / save_med},
                 {"async_save_ms", slowest(median(bg.save_s)) * 1e3},
                 {"async_staging_ms", slowest(bg.staging_s) * 1e3},
                 {"step_ms", idle_step * 1e3},
                 {"async_step_slowdown", slowest(median(bg.busy_steps)) / idle_step},
                 {"async_copy_blocking_ms", copy_block * 1e3},
                 {"async_copy_blocking_fraction", copy_block / save_med},
                 {"async_copy_step_slowdown", slowest(median(copying.busy_steps)) / idle_step},
                 {"memcpy_gbps", reduce_value(*g, memcpy_rank, dist::ReduceOp::Sum)},
                 {"plain_write_gbps", gb / plain_med},
                 {"save_vs_plain_write", plain_med / save_med},
                 {"async_blocking_floor_ms", blocking_floor * 1e3},
                 {"state_bytes", double(state_bytes)},
                 {"tensors", double(state.tensors.size())},
                 {"repetitions", kRepetitions},
                 {"world", world},
                 {"layout", state.layout}};
  for (int r = 0; r < world; ++r) {
    // Every rank's own figures, gathered by a sum where only rank r contributes.
    auto of_rank = [&](double v) { return reduce_value(*g, rank == r ? v : 0.0, dist::ReduceOp::Sum); };
    const std::string p = "rank" + std::to_string(r) + "_";
    rec.metrics[p + "save_gbps"] = of_rank(median(rank_save_gbps));
    rec.metrics[p + "load_gbps"] = of_rank(median(rank_load_gbps));
    rec.metrics[p + "bytes_written"] = of_rank(double(rank_written));
    rec.metrics[p + "bytes_read"] = of_rank(double(rank_read));
  }
  const bool all_ok = reduce_value(*g, values_ok ? 1.0 : 0.0, dist::ReduceOp::Min) == 1.0;
  if (!all_ok) {
    rec.status = harness::Status::Fail;
    rec.message = "a load did not give back the saved values (XXH64 of a rank's rows differs)";
  }
  g->barrier()->wait();
}

}  // namespace

std::vector<std::string> dcp_bench_models() { return {"gpt"}; }

std::vector<std::pair<std::string, core::Shape>> dcp_bench_spec(const std::string& model) {
  TB_CHECK(model == "gpt", "dcp bench", "unknown model '", model, "' (known: gpt)");
  nn::GPTConfig c;
  c.vocab = 16384, c.d_model = 1024, c.n_layers = 2, c.n_heads = 8, c.max_seq = 512, c.dropout = 0;
  std::vector<std::pair<std::string, core::Shape>> spec;
  const nn::GPT gpt(c);
  const auto params = gpt.named_parameters();
  for (const auto& [fqn, p] : params) spec.emplace_back("model." + fqn, p.sizes());
  // AdamW's state, named as train::distributed_state names it.
  for (const auto& [fqn, p] : params) {
    spec.emplace_back("optim." + fqn + ".exp_avg", p.sizes());
    spec.emplace_back("optim." + fqn + ".exp_avg_sq", p.sizes());
    spec.emplace_back("optim." + fqn + ".step", core::Shape{});
  }
  return spec;
}

std::vector<harness::TestCase> dcp_rank_benches(int world) {
  std::vector<harness::TestCase> b;
  if (world > 2) return b;  // the figures are at worlds 1 and 2
  for (const std::string& model : dcp_bench_models()) {
    const std::string name = "dcp/" + model + "/w" + std::to_string(world) + "/engine";
    b.push_back(recorded_case(
        "dcp", name, [model](harness::Record& r) { run_dcp_bench(model, r); }, false));
  }
  return b;
}

}  // namespace tb::suites
