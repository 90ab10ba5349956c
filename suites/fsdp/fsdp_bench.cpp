// The fsdp suite's benchmarks, run inside every rank (fsdp_bench.h names the cases): the engine's
// FSDP under each sharding strategy and the engine's DDP on the ddp benchmarks' models
//   mlp: MLP 784-1024-1024-10, global batch 256 (256 / world per rank), cross-entropy;
//        units: each Linear, then the root (which keeps no parameters of its own);
//   gpt: vocabulary 1024, d 256, 4 layers, 8 heads, T 128, no dropout, global batch 16
//        sequences; units: each TransformerBlock, then the root (embeddings, final norm, head);
// with AdamW (lr 1e-3, weight decay 0.01) stepping each rank's shards, on the MPI process group
// asked to yield when idle (Note [MPI polling in the DDP bench]). FSDPOptions are the defaults
// (float32, forward and backward prefetch); hybrid_shard uses shard groups of 2 ranks. The DDP
// case uses the ddp benchmarks' options (gradient_as_bucket_view as TRAINBENCH_DDP_BUCKET_VIEW).
// reference/dist/torch_fsdp_bench.py measures PyTorch FSDP2 the same way.
//
// Note [FSDP bench timing]
// 2 warm-up steps, one probe step (the slowest rank's), then 5 repetitions of
// m = max(1, ceil(n / 5)) steps, n = clamp(ceil(target / probe), 3, 50) (target:
// TRAINBENCH_FSDP_BENCH_S, default 2 s), each repetition between a barrier and the clock and
// reduced with MAX over the ranks: step_ms is the median repetition's mean step, step_min_ms and
// step_max_ms the extremes; samples_per_s = global batch / step_ms (its _min/_max from the
// extremes). The phase split (forward, backward, waits, optimizer) are means over every timed
// step, averaged over the ranks. Memory is measured afterwards, in one more step of its own
// (Note [FSDP bench memory]), so its sampling costs the timed steps nothing. At world 1 the step
// is then timed once more at a quarter of the batch (small_batch_*: Note [Two batches at world 1]
// in suites/ddp/ddp_bench.cpp) and on one thread (one_thread_*: Note [One thread at world 1]).
//
// Note [FSDP bench memory]
// The allocator keeps live bytes per tag (engine/memory/allocator.h) but one peak only (of all
// tags together). So peak_<tag>_bytes is the largest live byte count of that tag over the sample
// points of the memory step: before forward, after forward, after backward, after the optimizer
// step, and for FSDP also at each unit's forward start (after its all-gather: its gathered
// parameters and the prefetched next unit's buffer are live) and each unit's backward start
// (its output's gradient hook, after FSDP's: gathered again under full_shard). Tags: parameter
// (master shards and gathered parameters), gradient, optimizer_state, activation, communication
// (all-gather and reduce-scatter buffers, DDP's buckets), other (inputs). peak_allocated_bytes is
// the allocator's own peak over that step (every tag, at any instant: at least the largest sum of
// the sampled tags). peak_rss_bytes: the largest resident set size (/proc/self/statm) at the same
// points, the figure the PyTorch peer reports too. Each is the largest over the ranks.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/env.h"
#include "engine/core/rng.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/memory/allocator.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/ddp/ddp_suite.h"
#include "suites/fsdp/fsdp_bench.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Resident set size of this process (bytes), from /proc/self/statm; 0 where unreadable.
int64_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? int64_t(resident) * int64_t(sysconf(_SC_PAGESIZE)) : 0;
}

constexpr int kWarmup = 2, kMinSteps = 3, kMaxSteps = 50, kRepetitions = 5;

struct Workload {
  std::shared_ptr<nn::Module> model;
  std::vector<std::string> unit_types;  // the modules that become FSDP units (then the root)
  Tensor x, y;
  std::function<Tensor(nn::Module& m, const Tensor& x, const Tensor& y)> loss;
  int64_t global_batch = 0, per_rank = 0;
};

// The ddp benchmarks' models, batches and data (suites/ddp/ddp_bench.cpp: make_workload).
Workload make_workload(const std::string& name, int world, int rank) {
  Workload w;
  core::manual_seed(0);
  core::Generator gen(1000 + uint64_t(rank));  // each rank its own data
  if (name == "mlp") {
    w.global_batch = 256;
    w.per_rank = w.global_batch / world;
    w.model = std::make_shared<nn::MLP>(784, 1024, 10);
    w.unit_types = {"Linear"};
    w.x = randn({w.per_rank, 784}, DType::Float32, &gen);
    w.y = randint(0, 10, {w.per_rank}, DType::Int64, &gen);
    w.loss = [](nn::Module& m, const Tensor& x, const Tensor& y) { return tb::cross_entropy(m(x), y); };
  } else {
    nn::GPTConfig c;
    c.vocab = 1024, c.d_model = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq = 128, c.dropout = 0;
    w.global_batch = 16;
    w.per_rank = w.global_batch / world;
    w.model = std::make_shared<nn::GPT>(c);
    w.unit_types = {"TransformerBlock"};
    w.x = randint(0, c.vocab, {w.per_rank, c.max_seq}, DType::Int64, &gen);
    w.y = randint(0, c.vocab, {w.per_rank, c.max_seq}, DType::Int64, &gen);
    // m(x), not m.forward(x): the call runs the module's hooks, where FSDP's root gathers.
    w.loss = [](nn::Module& m, const Tensor& x, const Tensor& y) { return nn::GPT::loss(m(x), y); };
  }
  return w;
}

double reduce_value(dist::ProcessGroup& g, double v, dist::ReduceOp op) {
  Tensor t = from_vector({v}, {1}, DType::Float64);
  g.all_reduce(t, op)->wait();
  return t.data_ptr<double>()[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Per-tag live bytes and RSS: the largest seen at the sample points (Note [FSDP bench memory]).
struct MemorySampler {
  std::array<int64_t, memory::kNumTags> peak{};
  int64_t rss = 0;
  void sample() {
    const memory::Stats s = memory::cpu_allocator().stats();
    for (int t = 0; t < memory::kNumTags; ++t) peak[t] = std::max(peak[t], s.allocated_by_tag[t]);
    rss = std::max(rss, rss_bytes());
  }
};

// The case body; `strategy` is a ShardingStrategy's name, or "ddp" for the engine's DDP.
void run_fsdp_bench(const std::string& model, const std::string& strategy, harness::Record& rec) {
  rec.kind = "benchmark";
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);  // Note [MPI polling in the DDP bench]
  auto g = dist::new_group("mpi");
  const int world = g->size();
  Workload w = make_workload(model, world, g->rank());
  int64_t params = 0;
  for (const Tensor& p : w.model->parameters()) params += p.numel();

  const bool is_ddp = strategy == "ddp";
  std::shared_ptr<dist::DistributedDataParallel> ddp;
  std::shared_ptr<dist::FSDPModule> root;
  std::vector<nn::Module*> units;  // FSDP: the unit modules, for the memory step's hooks
  dist::FSDPOptions fo;
  if (is_ddp) {
    dist::DDPOptions dopt;
    dopt.gradient_as_bucket_view = ddp_bench_bucket_view();
    ddp = std::make_shared<dist::DistributedDataParallel>(w.model, g, dopt);
  } else {
    fo.strategy = dist::parse_sharding_strategy(strategy);
    if (fo.strategy == dist::ShardingStrategy::HybridShard) fo.shard_group_size = 2;
    root = dist::fully_shard_tree(w.model, g, dist::wrap_module_types(w.unit_types), fo);
    for (auto& [name, m] : w.model->named_modules())
      if (dist::fsdp_unit(*m)) units.push_back(m);
  }
  nn::Module& net = is_ddp ? static_cast<nn::Module&>(*ddp) : *w.model;
  optim::AdamW::Options o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  optim::AdamW opt(w.model->parameters(), o);  // FSDP: the shards

  struct Phases {
    double fwd = 0, bwd = 0, wait_fwd = 0, wait_bwd = 0, opt = 0, cpu = 0, main_cpu = 0, busy = 0;
    int steps = 0;
  } ph;
  double last_loss = 0;
  MemorySampler* mem = nullptr;  // set during the memory step
  auto sample = [&] {
    if (mem) mem->sample();
  };
  auto comm_wait = [&] { return is_ddp ? ddp->last_stats().comm_wait_s : root->stats().comm_wait_s; };
  auto step = [&] {
    const auto t0 = Clock::now();
    opt.zero_grad(true);
    sample();
    Tensor loss = w.loss(net, w.x, w.y);
    const double wait_fwd = is_ddp ? 0.0 : comm_wait();  // FSDP's stats restart at the root's forward
    sample();
    const auto t1 = Clock::now();
    loss.backward();
    const auto t2 = Clock::now();
    sample();
    opt.step();
    const auto t3 = Clock::now();
    sample();
    const double wait_bwd = comm_wait() - wait_fwd;
    ph.fwd += secs(t0, t1) - wait_fwd;
    ph.wait_fwd += wait_fwd;
    ph.bwd += secs(t1, t2) - wait_bwd;
    ph.wait_bwd += wait_bwd;
    ph.opt += secs(t2, t3);
    ++ph.steps;
    last_loss = loss.item_double();
  };
  // One repetition of n steps: the slowest rank's mean step. The world group's collectives of
  // those steps (after the barrier, before the reduction) add to ph.busy.
  auto timed = [&](int n) {
    g->barrier()->wait();
    const uint64_t first = g->recorder().entries().back().seq + 1;
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), m0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; ++i) step();
    const double s = secs(t0, Clock::now()) / n;
    ph.cpu += cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    ph.main_cpu += cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - m0;
    ph.busy += dist::comm_seconds(*g, first, g->recorder().entries().back().seq);
    return reduce_value(*g, s, dist::ReduceOp::Max);
  };
  for (int i = 0; i < kWarmup; ++i) step();
  const double target = core::env_double("TRAINBENCH_FSDP_BENCH_S", 2.0, 0, 3600);
  const double probe = timed(1);
  const int n = std::clamp(int(std::ceil(target / std::max(probe, 1e-9))), kMinSteps, kMaxSteps);
  const int per_rep = std::max(1, (n + kRepetitions - 1) / kRepetitions);
  ph = {};
  std::vector<double> reps;
  for (int r = 0; r < kRepetitions; ++r) reps.push_back(timed(per_rep));
  const Phases timed_ph = ph;
  const dist::FSDPStats fstats = is_ddp ? dist::FSDPStats{} : root->stats();
  const dist::DDPStats dstats = is_ddp ? ddp->last_stats() : dist::DDPStats{};

  // The memory step (Note [FSDP bench memory]).
  MemorySampler ms;
  std::vector<nn::RemovableHandle> hooks;
  for (nn::Module* u : units) {
    hooks.push_back(u->register_forward_pre_hook([&](nn::Module&, const nn::TensorList&) {
      sample();
      return std::optional<nn::TensorList>();
    }));
    hooks.push_back(u->register_forward_hook([&](nn::Module&, const nn::TensorList&, const Tensor& out) {
      if (out.defined() && out.requires_grad())
        out.register_hook([&](const Tensor&) {
          sample();
          return Tensor();
        });
      return std::optional<Tensor>();
    }));
  }
  g->barrier()->wait();
  memory::cpu_allocator().reset_peak();
  mem = &ms;
  step();
  mem = nullptr;
  const int64_t peak_allocated = memory::cpu_allocator().stats().peak_allocated_bytes;
  for (nn::RemovableHandle& h : hooks) h.remove();

  const double step_s = median(reps);
  const double step_min = *std::min_element(reps.begin(), reps.end());
  const double step_max = *std::max_element(reps.begin(), reps.end());
  const double nsteps = double(world) * timed_ph.steps;
  auto mean = [&](double v) { return reduce_value(*g, v, dist::ReduceOp::Sum) / nsteps; };
  const double fwd = mean(timed_ph.fwd), bwd = mean(timed_ph.bwd), wait_fwd = mean(timed_ph.wait_fwd);
  const double wait_bwd = mean(timed_ph.wait_bwd), opt_s = mean(timed_ph.opt);
  const double cpu = mean(timed_ph.cpu), main_cpu = mean(timed_ph.main_cpu), busy = mean(timed_ph.busy);
  const double wait = wait_fwd + wait_bwd;
  auto max_bytes = [&](int64_t v) { return reduce_value(*g, double(v), dist::ReduceOp::Max); };
  const int64_t batch = w.per_rank * world;
  rec.metrics = {{"samples_per_s", double(batch) / step_s},
                 {"samples_per_s_min", double(batch) / step_max},
                 {"samples_per_s_max", double(batch) / step_min},
                 {"step_ms", step_s * 1e3},
                 {"step_min_ms", step_min * 1e3},
                 {"step_max_ms", step_max * 1e3},
                 {"forward_ms", fwd * 1e3},
                 {"backward_ms", bwd * 1e3},
                 {"comm_wait_ms", wait * 1e3},
                 {"comm_wait_forward_ms", wait_fwd * 1e3},
                 {"comm_wait_backward_ms", wait_bwd * 1e3},
                 {"optimizer_ms", opt_s * 1e3},
                 {"comm_exposed_fraction", wait / step_s},
                 {"cpu_ms", cpu * 1e3},
                 {"main_thread_cpu_ms", main_cpu * 1e3},
                 {"bytes_per_step", double(is_ddp ? dstats.bytes : fstats.bytes)},
                 {"batch", double(batch)},
                 {"per_rank_batch", double(w.per_rank)},
                 {"parameters", double(params)},
                 {"repetitions", kRepetitions},
                 {"steps_per_repetition", per_rep},
                 {"steps", kRepetitions * per_rep},
                 {"world", world},
                 {"threads", num_threads()},
                 {"strategy", strategy},
                 {"adamw", "fused"}};
  rec.series = {{"engine_time_s", reps}};  // seconds per step of each repetition (`trainbench compare`)
  // HybridShard's reduce-scatters and all-reduces run on groups split from the world group, whose
  // flight recorders the bench cannot reach: its busy time would leave them out, so it is not given.
  if (is_ddp || fo.strategy != dist::ShardingStrategy::HybridShard) {
    rec.metrics["comm_busy_ms"] = busy * 1e3;
    rec.metrics["comm_hidden_fraction"] = dist::hidden_fraction(wait, busy);
  }
  if (is_ddp) {
    rec.metrics["all_reduces"] = double(dstats.buckets);
    rec.metrics["gradient_as_bucket_view"] = ddp_bench_bucket_view() ? 1.0 : 0.0;
  } else {
    rec.metrics["all_gathers"] = double(fstats.all_gathers);
    rec.metrics["reduce_scatters"] = double(fstats.reduce_scatters);
    rec.metrics["all_reduces"] = double(fstats.all_reduces);
    rec.metrics["units"] = double(units.size());
    if (fo.strategy == dist::ShardingStrategy::HybridShard) rec.metrics["shard_group_size"] = fo.shard_group_size;
  }
  for (int t = 0; t < memory::kNumTags; ++t)
    rec.metrics[std::string("peak_") + memory::tag_name(memory::Tag(t)) + "_bytes"] = max_bytes(ms.peak[t]);
  rec.metrics["peak_allocated_bytes"] = max_bytes(peak_allocated);
  rec.metrics["peak_rss_bytes"] = max_bytes(ms.rss);
  if (world == 1) {  // Notes [Two batches at world 1] and [One thread at world 1] (suites/ddp/ddp_bench.cpp)
    add_world1_metrics(rec, w.x, w.y, w.per_rank, [&](int64_t batch) {
      for (int i = 0; i < kWarmup; ++i) step();
      const double probe_at = timed(1);
      const int n_at = std::clamp(int(std::ceil(target / std::max(probe_at, 1e-9))), kMinSteps, kMaxSteps);
      ph = {};
      const double step_at = timed(n_at);
      return SmallBatchStep{batch, step_at, ph.fwd / n_at, ph.bwd / n_at, ph.opt / n_at, ph.main_cpu / n_at};
    });
  }
  if (!std::isfinite(last_loss)) {
    rec.status = harness::Status::Fail;
    rec.message = "the loss went non-finite (" + std::to_string(last_loss) + ")";
  }
  g->synchronize();
}

}  // namespace

std::vector<std::string> fsdp_bench_strategies(int world) {
  std::vector<std::string> s = {"full_shard", "shard_grad_op", "no_shard"};
  if (world == 4) s.push_back("hybrid_shard");
  return s;
}

std::vector<std::string> fsdp_bench_models() {
  std::vector<std::string> models;
  std::istringstream in(core::env_string("TRAINBENCH_FSDP_MODELS").value_or("mlp,gpt"));
  for (std::string m; std::getline(in, m, ',');) {
    if (m.empty()) continue;
    if (m != "mlp" && m != "gpt")
      throw std::invalid_argument("TRAINBENCH_FSDP_MODELS: unknown model '" + m + "' (expected mlp and/or gpt)");
    models.push_back(m);
  }
  return models;
}

std::vector<harness::TestCase> fsdp_rank_benches(int world) {
  std::vector<harness::TestCase> b;
  for (const std::string& model : fsdp_bench_models()) {
    std::vector<std::pair<std::string, std::string>> cases;  // (strategy, impl)
    for (const std::string& s : fsdp_bench_strategies(world)) cases.emplace_back(s, "engine");
    cases.emplace_back("ddp", "engine-ddp");
    for (const auto& [strategy, impl] : cases) {
      const std::string name = "fsdp/" + model + "/" + strategy + "/w" + std::to_string(world) + "/" + impl;
      b.push_back(recorded_case(
          "fsdp", name, [model, s = strategy](harness::Record& r) { run_fsdp_bench(model, s, r); },
          /*with_seed=*/false));
    }
  }
  return b;
}

}  // namespace tb::suites
