// The ddp suite's benchmarks, run inside every rank: records of kind "benchmark" named
// ddp/<model>/w<world>/engine, the engine's DDP on its default MPI backend training
//   mlp: MLP 784-1024-1024-10, global batch 256 (256 / world per rank), cross-entropy;
//   gpt: the GPT of suites/training's benchmark (vocabulary 1024, d 256, 4 layers, 8 heads,
//        T 128), global batch 16 sequences;
// with AdamW (lr 1e-3, weight decay 0.01) and DDP's defaults (25 MiB buckets, the first 1 MiB),
// and gradient_as_bucket_view (on; TRAINBENCH_DDP_BUCKET_VIEW=0 turns it off), as
// reference/dist/torch_ddp_bench.py does for PyTorch's DDP on Gloo (the torch-gloo peer, given
// the same gradient_as_bucket_view, and AdamW(fused=True) unless TRAINBENCH_DDP_TORCH_ADAMW
// names another of PyTorch's implementations: the engine's AdamW is one fused pass per
// parameter, PyTorch's default on CPU is several ops per parameter), with MPI asked to yield
// when idle (Note [MPI polling in the DDP bench]). TRAINBENCH_DDP_OVERLAP picks
// DDPOptions::overlap (always, the default; at_end; auto).
//
// Timing (the peer's protocol): 2 warm-up steps, one probe step, then
// clamp(ceil(target / probe), 3, 50) steps (target: TRAINBENCH_DDP_BENCH_S, default 2 s; the
// probe is the slowest rank's, so every rank runs the same count), between barriers. Metrics:
//   step_ms              the slowest rank's mean step; samples_per_s = global batch / step
//   forward_ms           zero_grad + forward + loss
//   backward_ms          backward minus comm_wait_ms (gradient computation and bucket copies)
//   comm_wait_ms         the end of backward blocked on the last all-reduces (DDPStats)
//   optimizer_ms         AdamW's step
//                        (these four are per-step means averaged over the ranks; the PyTorch
//                        peer reports its wait separately too, from DDP's runtime statistics)
//   comm_busy_ms         the all-reduces' run time (flight recorder), on the collective worker
//                        or, when issued at the end of backward, on the training thread
//   comm_hidden_fraction 1 - comm_wait / comm_busy: the share of communication that overlapped
//                        backward
//   comm_overlapped      1 when the buckets were issued during backward, 0 when at its end
//                        (DDPOptions::overlap: Note [Overlap needs a spare core])
//   bytes_per_step       gradient bytes all-reduced per step by each rank
//   cpu_ms               CPU time per step of a rank's process, all threads (compute, the
//                        collective worker, MPI polling); main_thread_cpu_ms: the training
//                        thread alone (per-step means averaged over the ranks). On a loaded
//                        machine these are steadier than step_ms.
//   small_batch, small_batch_{step,forward,backward,optimizer,main_thread_cpu}_ms
//                        world 1 only: the same step at a quarter of the batch (Note [Two
//                        batches at world 1])
//   one_thread_batch, one_thread_{step,forward,backward,optimizer}_ms,
//   one_thread_small_batch_{step,forward,backward,optimizer}_ms
//                        world 1 only: the step on one thread at half the batch and at
//                        small_batch (Note [One thread at world 1])
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <string>

#include "engine/core/env.h"
#include "engine/autograd/functions.h"
#include "engine/core/rng.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/flight_recorder.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/ddp/ddp_suite.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
// CPU seconds used so far by this process (every thread: compute, the collective worker, MPI's
// polling) or by the calling thread alone. Unlike wall time they barely move when other
// processes share the cores, so they show what a change costs on a loaded machine.
double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

constexpr int kWarmup = 2, kMinSteps = 3, kMaxSteps = 50;

// Note [Two batches at world 1]
// The scaling projection (reports/trainbench_reports/projection.py) builds each model's compute
// from its world-1 step, and a rank of a P-rank run trains 1/P of the global batch. A step is
// not all per-sample work: reading the weights in every matmul, the optimizer, FSDP's copies in
// and out of its flat buffers cost the same at any batch, and a small batch runs the kernels
// less efficiently. So the world-1 case also times the step at the per-rank batch of the largest
// world the suite runs (4 ranks: a quarter of the batch) on the same model and optimizer, and
// records its parts as small_batch_*; the projection fits fixed + per-sample time to the two
// batches, measured on one rank, apart from the multi-rank points it is checked against.
constexpr int64_t kSmallBatchDivisor = 4;

// Note [One thread at world 1]
// Ranks that share a host's cores run on fewer threads than the world-1 step: on these 2-core
// hosts every multi-rank point runs one thread per rank. Two threads are not twice one (OpenMP's
// fork and join, the serial parts of a step, small matrices): the GPT's world-1 step on 2 threads
// at a quarter of its batch was 1.72x its one-thread step, not 2x, so scaling the 2-thread step
// by the thread count overpredicts the compute of ranks on one core. So the world-1 case also
// times the step on one thread at half and a quarter of the batch (the per-rank batches of 2 and 4
// ranks), as one_thread_*; the projection fits fixed + per-sample time through them for a rank
// with one core or less, and places a rank with more between the two thread counts by Amdahl's
// law. (Alone this made the validation worse: the collectives' time was short by as much, until
// it was measured out of cache, Note [Collectives out of cache] in suites/comm/comm_bench.cpp;
// docs/distributed.md "Runs 13 and 14".)

struct Workload {
  std::shared_ptr<nn::Module> model;
  Tensor x, y;
  std::function<Tensor(nn::Module& ddp, const Tensor& x, const Tensor& y)> loss;
  int64_t global_batch = 0, per_rank = 0;
};

Workload make_workload(const std::string& name, int world, int rank) {
  Workload w;
  core::manual_seed(0);
  core::Generator gen(1000 + uint64_t(rank));  // each rank its own data, as DDP's would be
  if (name == "mlp") {
    w.global_batch = 256;
    w.per_rank = w.global_batch / world;
    w.model = std::make_shared<nn::MLP>(784, 1024, 10);
    w.x = randn({w.per_rank, 784}, DType::Float32, &gen);
    w.y = randint(0, 10, {w.per_rank}, DType::Int64, &gen);
    w.loss = [](nn::Module& m, const Tensor& x, const Tensor& y) { return tb::cross_entropy(m(x), y); };
  } else {
    nn::GPTConfig c;
    c.vocab = 1024, c.d_model = 256, c.n_layers = 4, c.n_heads = 8, c.max_seq = 128, c.dropout = 0;
    w.global_batch = 16;
    w.per_rank = w.global_batch / world;
    w.model = std::make_shared<nn::GPT>(c);
    w.x = randint(0, c.vocab, {w.per_rank, c.max_seq}, DType::Int64, &gen);
    w.y = randint(0, c.vocab, {w.per_rank, c.max_seq}, DType::Int64, &gen);
    w.loss = [](nn::Module& m, const Tensor& x, const Tensor& y) { return nn::GPT::loss(m.forward(x), y); };
  }
  return w;
}

double reduce_value(dist::ProcessGroup& g, double v, dist::ReduceOp op) {
  Tensor t = from_vector({v}, {1}, DType::Float64);
  g.all_reduce(t, op)->wait();
  return t.data_ptr<double>()[0];
}

// Note [MPI polling in the DDP bench]
// OpenMPI's blocking calls busy-poll unless mpi_yield_when_idle is set, which it sets itself only
// when a host has more ranks than slots. Two ranks on two cores look fully subscribed, but each
// rank also runs its group's collective worker (Note [Collective worker]): a bucket's all_reduce
// started during backward polls on that worker, taking the core from the rank's own backward
// (and the peer's), until the other rank reaches the same bucket. With other jobs on the cores it
// polled ~15 ms of CPU per 256-sample step (cpu_ms - main_thread_cpu_ms), against ~3-8 ms with
// yielding. So the bench asks MPI to yield, as an oversubscribed launch would; a value the user
// set wins. It takes effect when this bench initialises MPI, as it does in `bench --suite ddp`
// (the bench's first case); `cpu_ms` shows the polling either way.
void ask_mpi_to_yield() { setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0); }

// TRAINBENCH_DDP_OVERLAP = always (default, PyTorch's) | at_end | auto: DDPOptions::overlap, to
// compare when buckets are issued on a given host (Note [Overlap needs a spare core]).
dist::DDPOptions::Overlap overlap_from_env() {
  const std::string s = core::env_choice("TRAINBENCH_DDP_OVERLAP", "always", {"always", "at_end", "auto"});
  if (s == "always") return dist::DDPOptions::Overlap::Always;
  return s == "at_end" ? dist::DDPOptions::Overlap::AtEnd : dist::DDPOptions::Overlap::Auto;
}

void run_ddp_bench(const std::string& name, harness::Record& rec) {
  rec.kind = "benchmark";
  ask_mpi_to_yield();
  auto g = dist::new_group("mpi");
  const int world = g->size();
  Workload w = make_workload(name, world, g->rank());
  // .grad as views of the buckets: the averages are not copied back (Note [Gradients as bucket
  // views]); the optimizer reads them in the buckets.
  dist::DDPOptions dopt;
  dopt.gradient_as_bucket_view = ddp_bench_bucket_view();
  dopt.overlap = overlap_from_env();
  auto ddp = std::make_shared<dist::DistributedDataParallel>(w.model, g, dopt);
  optim::AdamW::Options o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  optim::AdamW opt(w.model->parameters(), o);

  struct Phases {
    double fwd = 0, bwd = 0, wait = 0, opt = 0, cpu = 0, main_cpu = 0;
  } ph;
  double last_loss = 0;
  auto step = [&] {
    const auto t0 = Clock::now();
    opt.zero_grad(true);
    Tensor loss = w.loss(*ddp, w.x, w.y);
    const auto t1 = Clock::now();
    loss.backward();
    const auto t2 = Clock::now();
    opt.step();
    const auto t3 = Clock::now();
    const double wait = ddp->last_stats().comm_wait_s;
    ph.fwd += secs(t0, t1);
    ph.bwd += secs(t1, t2) - wait;
    ph.wait += wait;
    ph.opt += secs(t2, t3);
    last_loss = loss.item_double();
  };
  // The slowest rank's mean step time over n steps.
  auto timed = [&](int n) {
    ph = {};
    g->barrier()->wait();
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), m0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < n; ++i) step();
    ph.cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    ph.main_cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - m0;
    return reduce_value(*g, secs(t0, Clock::now()) / n, dist::ReduceOp::Max);
  };
  for (int i = 0; i < kWarmup; ++i) step();
  const double target = core::env_double("TRAINBENCH_DDP_BENCH_S", 2.0, 0, 3600);
  const double probe = timed(1);
  const int steps = std::clamp(int(std::ceil(target / std::max(probe, 1e-9))), kMinSteps, kMaxSteps);
  const uint64_t seq_before = g->recorder().entries().back().seq;  // the barrier of timed()
  const double step_s = timed(steps);
  // The all-reduces of the timed steps: after the barrier, before the final max-reduction.
  const uint64_t seq_after = g->recorder().entries().back().seq;
  const double busy = dist::comm_seconds(*g, seq_before + 2, seq_after - 1) / steps;
  const double n = double(world) * steps;
  const double fwd = reduce_value(*g, ph.fwd, dist::ReduceOp::Sum) / n;
  const double bwd = reduce_value(*g, ph.bwd, dist::ReduceOp::Sum) / n;
  const double wait = reduce_value(*g, ph.wait, dist::ReduceOp::Sum) / n;
  const double opt_s = reduce_value(*g, ph.opt, dist::ReduceOp::Sum) / n;
  const double cpu = reduce_value(*g, ph.cpu, dist::ReduceOp::Sum) / n;
  const double main_cpu = reduce_value(*g, ph.main_cpu, dist::ReduceOp::Sum) / n;
  const double busy_mean = reduce_value(*g, busy, dist::ReduceOp::Sum) / world;
  int64_t params = 0;
  for (const Tensor& p : w.model->parameters()) params += p.numel();
  const int64_t batch = w.per_rank * world;
  rec.metrics = {{"samples_per_s", double(batch) / step_s},
                 {"step_ms", step_s * 1e3},
                 {"forward_ms", fwd * 1e3},
                 {"backward_ms", bwd * 1e3},
                 {"comm_wait_ms", wait * 1e3},
                 {"optimizer_ms", opt_s * 1e3},
                 {"comm_busy_ms", busy_mean * 1e3},
                 {"cpu_ms", cpu * 1e3},
                 {"main_thread_cpu_ms", main_cpu * 1e3},
                 {"comm_hidden_fraction", dist::hidden_fraction(wait, busy_mean)},
                 {"comm_overlapped", ddp->last_stats().overlapped ? 1.0 : 0.0},
                 {"bytes_per_step", double(ddp->last_stats().bytes)},
                 {"buckets", double(ddp->last_stats().buckets)},
                 {"batch", double(batch)},
                 {"per_rank_batch", double(w.per_rank)},
                 {"parameters", double(params)},
                 {"steps", steps},
                 {"world", world},
                 {"threads", num_threads()},
                 {"gradient_as_bucket_view", dopt.gradient_as_bucket_view ? 1.0 : 0.0},
                 {"adamw", "fused"}};  // one pass per parameter (optim/adam.cpp), as the peer's default
  if (world == 1) {                    // Notes [Two batches at world 1] and [One thread at world 1]
    add_world1_metrics(rec, w.x, w.y, w.per_rank, [&](int64_t batch) {
      for (int i = 0; i < kWarmup; ++i) step();
      const double probe_at = timed(1);
      const int n_at = std::clamp(int(std::ceil(target / std::max(probe_at, 1e-9))), kMinSteps, kMaxSteps);
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

void add_world1_metrics(harness::Record& rec, Tensor& x, Tensor& y, int64_t per_rank,
                        const std::function<SmallBatchStep(int64_t batch)>& time_at) {
  const Tensor x_all = x, y_all = y;
  auto at = [&](int64_t batch) {
    x = x_all.narrow(0, 0, batch).contiguous();
    y = y_all.narrow(0, 0, batch).contiguous();
    return time_at(batch);
  };
  const SmallBatchStep small = at(per_rank / kSmallBatchDivisor);
  rec.metrics["small_batch"] = double(small.batch);
  rec.metrics["small_batch_step_ms"] = small.step_s * 1e3;
  rec.metrics["small_batch_forward_ms"] = small.forward_s * 1e3;
  rec.metrics["small_batch_backward_ms"] = small.backward_s * 1e3;
  rec.metrics["small_batch_optimizer_ms"] = small.optimizer_s * 1e3;
  rec.metrics["small_batch_main_thread_cpu_ms"] = small.main_thread_cpu_s * 1e3;
  {
    // set_num_threads, not ThreadLimit: oneDNN's products take their thread count from OpenMP.
    struct OneThread {
      int all = num_threads();
      OneThread() { set_num_threads(1); }
      ~OneThread() { set_num_threads(all); }
    } one;
    // Half the batch (world 2's per-rank batch), then small_batch's.
    for (const auto& [name, divisor] :
         {std::pair{"one_thread", int64_t(2)}, std::pair{"one_thread_small_batch", kSmallBatchDivisor}}) {
      const SmallBatchStep s = at(per_rank / divisor);
      const std::string k = name;
      if (divisor == 2) rec.metrics["one_thread_batch"] = double(s.batch);
      rec.metrics[k + "_step_ms"] = s.step_s * 1e3;
      rec.metrics[k + "_forward_ms"] = s.forward_s * 1e3;
      rec.metrics[k + "_backward_ms"] = s.backward_s * 1e3;
      rec.metrics[k + "_optimizer_ms"] = s.optimizer_s * 1e3;
    }
  }
  x = x_all;
  y = y_all;
}

bool ddp_bench_bucket_view() { return core::env_bool("TRAINBENCH_DDP_BUCKET_VIEW", true); }

std::string ddp_bench_torch_adamw() {
  return core::env_choice("TRAINBENCH_DDP_TORCH_ADAMW", "fused", {"fused", "standard"});
}

std::vector<harness::TestCase> ddp_rank_benches(int world) {
  std::vector<harness::TestCase> b;
  for (const char* model : {"mlp", "gpt"}) {
    const std::string name = "ddp/" + std::string(model) + "/w" + std::to_string(world) + "/engine";
    b.push_back(recorded_case(
        "ddp", name, [m = std::string(model)](harness::Record& r) { run_ddp_bench(m, r); },
        /*with_seed=*/false));
  }
  return b;
}

}  // namespace tb::suites
