// The rank side of the `comm` suite: engine (MPI backend), engine-gloo and raw MPI timings of
// the four collectives over the sweep, and all_reduce on an MPI group under
// TRAINBENCH_DIST_DEBUG=DETAIL (engine-detail). See comm_bench.h and Note [Comm iteration policy].
#include "suites/comm/comm_bench.h"

#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/core/env.h"
#include "engine/dist/mpi/mpi_group.h"
#include "engine/dist/process_group.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

constexpr int kWarmup = 2, kMinIters = 3, kMaxIters = 1000, kReps = 5;
const char* const kOps[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
const char* const kImpls[] = {"engine", "engine-cold", "engine-detail", "engine-gloo", "mpi"};
// engine-cold (Note [Collectives out of cache]): calls per repetition, and the largest message.
constexpr int kColdCallsPerRep = 2;
constexpr int64_t kColdMaxBytes = int64_t(64) << 20;

void mpi_check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    char buf[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, buf, &len);
    throw std::runtime_error(std::string(call) + " failed: " + std::string(buf, len));
  }
}

// Note [Collectives out of cache]
// The sweep calls a collective again on the same buffers as soon as the last call ended, so up to
// a few MiB per rank every call finds its buffers -- and MPI's shared-memory segments -- in the
// caches: 4 MiB all_reduced at 2 ranks took 0.24 ms there, 17 GB/s. In a training step the
// forward and backward between two collectives move far more than the last-level cache holds, and
// the collective reads and writes memory: on the 2-core EPYC (32 MiB L3) the same 4 MiB all_reduce
// after the caches were flushed took 0.71 ms at 2 ranks and 4.5 against 1.3 ms at 4 (1 MiB at 4
// ranks: 1.8 against 1.0 ms; 16 MiB, DRAM-bound either way: within 1.4x). So engine-cold times
// each call after the rank has written one byte per cache line of a buffer twice the L3 (16-256
// MiB) and the ranks have met in a barrier, from the call to its end: the collective alone, on cold
// buffers, the ranks lined up as far as the cores let them (4 ranks on 2 cores still leave the
// barrier a time slice apart: 8 bytes take about 1 ms there against 0.03 ms in lockstep, as a
// step's collectives do). kColdCallsPerRep calls per repetition (the flush costs milliseconds a
// call), messages up to kColdMaxBytes. The scaling projection predicts the measured steps from
// these fits (reports/trainbench_reports/projection.py).
class CacheFlusher {
 public:
  CacheFlusher() {
    const int64_t bytes = std::clamp<int64_t>(2 * last_level_cache_bytes(), int64_t(16) << 20, int64_t(256) << 20);
    buf_.assign(std::size_t(bytes), 0);
  }
  // The last-level cache this CPU shares (sysfs's cache instance: on a VM sysconf's figure can be
  // the whole host's, 320 MiB where the instance is 32), else sysconf's, else 32 MiB.
  static int64_t last_level_cache_bytes() {
    for (int i = 9; i >= 0; --i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream size(dir + "size");
      long long kib = 0;
      char unit = 0;
      // A size past 1 TiB is not a cache (and would overflow the shift): read on.
      if (size >> kib >> unit && kib > 0 && kib < (1LL << 30) && unit == 'K') return int64_t(kib) << 10;
    }
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? int64_t(l3) : int64_t(32) << 20;
  }
  int64_t bytes() const { return int64_t(buf_.size()); }
  void flush() {
    for (std::size_t i = 0; i < buf_.size(); i += 64) buf_[i] = static_cast<unsigned char>(buf_[i] + 1);
  }

 private:
  std::vector<unsigned char> buf_;
};

// What every case of one rank process shares: the groups, made on first use and kept for the
// whole sweep (a Gloo rendezvous per case would cost more than the small messages it times).
// Destroyed with the cases, which the harness does before MPI_Finalize runs at exit.
struct CommState {
  int world = 1;
  std::shared_ptr<dist::ProcessGroup> engine;
  std::shared_ptr<dist::ProcessGroup> detail;  // Options::Debug::Detail: each call's fingerprint exchanged first
  std::shared_ptr<dist::ProcessGroup> gloo;
  bool gloo_tried = false;
  std::string gloo_error;  // why engine-gloo records are skipped
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<CacheFlusher> flusher;  // engine-cold's, made on first use

  ~CommState() {
    gloo.reset();
    detail.reset();
    engine.reset();
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
  }

  dist::ProcessGroup& engine_group() {
    if (!engine) engine = dist::new_group("mpi");
    return *engine;
  }

  // A second MPI group whose every collective is checked as TRAINBENCH_DIST_DEBUG=DETAIL does
  // (unless the variable says otherwise: it overrides Options), beside `engine` in the same run.
  dist::ProcessGroup& detail_group() {
    if (!detail) {
      dist::Options o;
      o.debug = dist::Options::Debug::Detail;
      o.name = "detail";
      detail = dist::new_group("mpi", o);
    }
    return *detail;
  }

  // Every rank must agree on whether Gloo runs, or the ranks that have it would wait on the
  // others forever: each rank's outcome is reduced over the engine's MPI group.
  dist::ProcessGroup* gloo_group() {
    if (!gloo_tried) {
      gloo_tried = true;
      try {
        gloo = dist::new_group("gloo");
      } catch (const std::exception& e) {
        gloo_error = e.what();
      }
      Tensor ok = full({1}, gloo ? 1.0 : 0.0, DType::Float64);
      engine_group().all_reduce(ok, dist::ReduceOp::Min)->wait();
      if (ok.item_double() < 1) {
        if (gloo_error.empty()) gloo_error = "another rank could not start its gloo group";
        gloo.reset();
      }
    }
    return gloo.get();
  }

  MPI_Comm raw_comm() {
    if (comm == MPI_COMM_NULL) {
      dist::mpi::thread_level();  // initialises MPI as the backend does, finalised at exit
      mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    }
    return comm;
  }
};

// One implementation's way to call an op and to agree across ranks.
struct Runner {
  std::function<void()> call;  // one call, issued and completed
  std::function<void()> barrier;
  std::function<double(double)> max;  // the largest value over ranks
  std::function<double(double)> sum;  // the sum over ranks
  // Where set, `call` adds the seconds of the collective alone here, and timed() reports them
  // instead of the loop's (engine-cold: the cache flush and the barrier before each call left out),
  // and the process CPU seconds of the collective alone to in_call_cpu_s.
  double* in_call_s = nullptr;
  double* in_call_cpu_s = nullptr;
};

// CPU seconds of this process, all its threads (the engine's worker and MPI's among them).
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

Runner engine_runner(dist::ProcessGroup& pg, const std::string& op, Tensor& in, Tensor& out) {
  Runner r;
  dist::ProcessGroup* g = &pg;
  if (op == "all_reduce") r.call = [g, &in] { g->all_reduce(in)->wait(); };
  else if (op == "broadcast") r.call = [g, &in] { g->broadcast(in, 0)->wait(); };
  else if (op == "all_gather") r.call = [g, &in, &out] { g->all_gather(out, in)->wait(); };
  else r.call = [g, &in, &out] { g->reduce_scatter(out, in)->wait(); };
  r.barrier = [g] { g->barrier()->wait(); };
  auto reduce = [g](double v, dist::ReduceOp op) {
    Tensor t = full({1}, v, DType::Float64);
    g->all_reduce(t, op)->wait();
    return t.item_double();
  };
  r.max = [reduce](double v) { return reduce(v, dist::ReduceOp::Max); };
  r.sum = [reduce](double v) { return reduce(v, dist::ReduceOp::Sum); };
  return r;
}

// The same buffers through MPI directly: in place for all_reduce (as the engine and torch are),
// MPI_Reduce_scatter_block for equal chunks.
Runner mpi_runner(MPI_Comm comm, const std::string& op, Tensor& in, Tensor& out) {
  Runner r;
  float* a = in.data_ptr<float>();
  float* b = out.defined() ? out.data_ptr<float>() : nullptr;
  const int n = int(in.numel());
  const int m = out.defined() ? int(out.numel()) : 0;
  if (op == "all_reduce")
    r.call = [=] { mpi_check(MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce"); };
  else if (op == "broadcast") r.call = [=] { mpi_check(MPI_Bcast(a, n, MPI_FLOAT, 0, comm), "MPI_Bcast"); };
  else if (op == "all_gather")
    r.call = [=] { mpi_check(MPI_Allgather(a, n, MPI_FLOAT, b, n, MPI_FLOAT, comm), "MPI_Allgather"); };
  else
    r.call = [=] {
      mpi_check(MPI_Reduce_scatter_block(a, b, m, MPI_FLOAT, MPI_SUM, comm), "MPI_Reduce_scatter_block");
    };
  r.barrier = [comm] { mpi_check(MPI_Barrier(comm), "MPI_Barrier"); };
  auto reduce = [comm](double v, MPI_Op op) {
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, comm), "MPI_Allreduce");
    return v;
  };
  r.max = [reduce](double v) { return reduce(v, MPI_MAX); };
  r.sum = [reduce](double v) { return reduce(v, MPI_SUM); };
  return r;
}

struct Interval {
  double time_s = 0;  // per call, the largest over ranks
  double cpu_s = 0;   // process CPU per call, this rank's
};

// Per-call mean of `n` calls between a barrier and the clock.
Interval timed(const Runner& r, int n) {
  r.barrier();
  if (r.in_call_s) *r.in_call_s = 0;
  if (r.in_call_cpu_s) *r.in_call_cpu_s = 0;
  const double c0 = process_cpu_s();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) r.call();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
  const double cpu = (r.in_call_cpu_s ? *r.in_call_cpu_s : process_cpu_s() - c0) / n;
  return {r.max(r.in_call_s ? *r.in_call_s / n : dt), cpu};
}

struct Timing {
  double median = 0, min = 0, max = 0;
  int calls = 0;             // over all repetitions
  std::vector<double> reps;  // each repetition's time per call, in run order (`trainbench compare`)
  double cpu_s = 0;          // process CPU per call: each rank's median repetition, the ranks' mean
};

// kReps repetitions of ceil(iters / kReps) calls; the same values on every rank.
Timing timed_reps(const Runner& r, int iters, int world) {
  const int per = (iters + kReps - 1) / kReps;
  std::vector<double> t, cpu;
  for (int i = 0; i < kReps; ++i) {
    const Interval iv = timed(r, per);
    t.push_back(iv.time_s);
    cpu.push_back(iv.cpu_s);
  }
  std::vector<double> sorted = t;
  std::sort(sorted.begin(), sorted.end());
  std::sort(cpu.begin(), cpu.end());  // the median, as time_s: one repetition's stray wake-up weighs nothing
  return {sorted[kReps / 2], sorted.front(), sorted.back(), per * kReps, std::move(t), r.sum(cpu[kReps / 2]) / world};
}

// Every rank sends rank+1 (exact in float32), so the first call's output is known everywhere.
// Returns an empty string when right, else what went wrong.
std::string check_output(const std::string& op, const Tensor& in, const Tensor& out, int rank, int world) {
  const float sum = float(world) * float(world + 1) / 2;
  auto first_bad = [](const float* p, int64_t n, auto want) -> int64_t {
    for (int64_t i = 0; i < n; ++i)
      if (p[i] != want(i)) return i;
    return -1;
  };
  int64_t bad = -1;
  float got = 0, want = 0;
  if (op == "all_reduce" || op == "broadcast") {
    want = op == "all_reduce" ? sum : 1.0f;
    bad = first_bad(in.data_ptr<float>(), in.numel(), [&](int64_t) { return want; });
    if (bad >= 0) got = in.data_ptr<float>()[bad];
  } else if (op == "all_gather") {
    const int64_t chunk = in.numel();
    bad = first_bad(out.data_ptr<float>(), out.numel(), [&](int64_t i) { return float(i / chunk + 1); });
    if (bad >= 0) got = out.data_ptr<float>()[bad], want = float(bad / chunk + 1);
  } else {
    want = sum;
    bad = first_bad(out.data_ptr<float>(), out.numel(), [&](int64_t) { return sum; });
    if (bad >= 0) got = out.data_ptr<float>()[bad];
  }
  if (bad < 0) return "";
  return "rank " + std::to_string(rank) + ": " + op + " output element " + std::to_string(bad) + " is " +
         std::to_string(got) + ", expected " + std::to_string(want) + " (every rank sent rank+1)";
}

void run_point(CommState& st, const std::string& op, int64_t nominal, const std::string& impl, double target_s,
               harness::Record& rec) {
  rec.kind = "benchmark";
  const int world = st.world;
  dist::ProcessGroup* pg = nullptr;
  if (impl == "engine" || impl == "engine-cold") pg = &st.engine_group();
  if (impl == "engine-detail") {
    pg = &st.detail_group();
    rec.metrics["detail_checks"] = pg->detail_checks() ? 1 : 0;
  }
  if (impl == "engine-gloo") {
    pg = st.gloo_group();
    if (!pg) {
      rec.status = harness::Status::Skip;
      rec.message = "engine-gloo: " + st.gloo_error;
      return;
    }
  }
  const int rank = pg ? pg->rank() : dist::world_from_env().rank;
  const CommShape shape = comm_shape(op, nominal, world);
  // Inputs and outputs as nccl-tests lays them out: all_gather in = chunk, out = world chunks;
  // reduce_scatter the reverse; all_reduce and broadcast one buffer, in place.
  Tensor in, out;
  if (op == "all_gather") {
    in = full({shape.chunk}, double(rank + 1));
    out = empty({shape.chunk * world});
  } else if (op == "reduce_scatter") {
    in = full({shape.chunk * world}, double(rank + 1));
    out = empty({shape.chunk});
  } else {
    in = full({shape.chunk}, double(rank + 1));
  }
  Runner r = pg ? engine_runner(*pg, op, in, out) : mpi_runner(st.raw_comm(), op, in, out);
  const bool cold = impl == "engine-cold";
  double in_call = 0, in_call_cpu = 0;
  if (cold) {  // Note [Collectives out of cache]
    if (!st.flusher) st.flusher = std::make_unique<CacheFlusher>();
    r.in_call_s = &in_call;
    r.in_call_cpu_s = &in_call_cpu;
    r.call = [call = r.call, barrier = r.barrier, f = st.flusher.get(), &in_call, &in_call_cpu] {
      f->flush();
      barrier();
      const double c0 = process_cpu_s();
      const auto t0 = std::chrono::steady_clock::now();
      call();
      in_call += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      in_call_cpu += process_cpu_s() - c0;
    };
    rec.metrics["flush_bytes"] = double(st.flusher->bytes());
  }

  r.call();
  const std::string wrong = check_output(op, in, out, rank, world);
  zero_(in);  // later calls on zeros: no overflow, no denormals
  for (int i = 1; i < kWarmup; ++i) r.call();
  // engine-cold's count is fixed (each call costs a flush), so it needs no probe.
  const int iters = cold ? kColdCallsPerRep * kReps
                         : int(std::clamp(std::ceil(target_s / std::max(timed(r, 1).time_s, 1e-9)), double(kMinIters),
                                          double(kMaxIters)));
  const Timing t = timed_reps(r, iters, world);
  // Every rank finished the same calls before the verdict, so a wrong answer cannot desync them.
  check(wrong.empty(), wrong);

  const double algbw = double(shape.bytes) / t.median / 1e9;
  rec.metrics["time_s"] = t.median;
  rec.metrics["time_min_s"] = t.min;
  rec.metrics["time_max_s"] = t.max;
  rec.metrics["cpu_s"] = t.cpu_s;
  rec.metrics["algbw_gbps"] = algbw;
  rec.metrics["busbw_gbps"] = algbw * comm_bus_factor(op, world);
  rec.metrics["bytes"] = double(shape.bytes);
  rec.metrics["world"] = world;
  rec.metrics["iterations"] = t.calls;
  rec.metrics["repetitions"] = kReps;
  rec.metrics["threads"] = num_threads();
  // The engine's process groups against raw MPI, the reference these records are read beside.
  rec.series = {{impl == "mpi" ? "reference_time_s" : "engine_time_s", t.reps}};
}

}  // namespace

CommSweep comm_sweep_from_env() {
  CommSweep s;
  s.ops.assign(std::begin(kOps), std::end(kOps));
  int64_t max_bytes = int64_t(256) << 20;
  s.target_s = 0.2;
  if (core::env_choice("TRAINBENCH_COMM_SWEEP", "full", {"full", "quick"}) == "quick") {
    max_bytes = int64_t(4) << 20;
    s.target_s = 0.1;
  }
  max_bytes = core::env_bytes("TRAINBENCH_COMM_MAX_BYTES", max_bytes);
  s.target_s = core::env_double("TRAINBENCH_COMM_TARGET_S", s.target_s, 1e-3, 3600);
  // 8 B (one float per rank at world 2), then 16 B * 4^k: 1 KiB, 4 KiB ... 256 MiB land on it.
  if (max_bytes >= 8) s.sizes.push_back(8);
  for (int64_t b = 16; b <= max_bytes; b *= 4) s.sizes.push_back(b);
  return s;
}

double comm_bus_factor(const std::string& op, int world) {
  const double p = world;
  if (op == "all_reduce") return 2 * (p - 1) / p;
  if (op == "all_gather" || op == "reduce_scatter") return (p - 1) / p;
  return 1;
}

CommShape comm_shape(const std::string& op, int64_t nominal_bytes, int world) {
  if (op == "all_gather" || op == "reduce_scatter") {
    const int64_t chunk = std::max<int64_t>(1, nominal_bytes / (4 * int64_t(world)));
    return {chunk, chunk * world * 4};
  }
  const int64_t n = std::max<int64_t>(1, nominal_bytes / 4);
  return {n, n * 4};
}

std::string comm_case_name(const std::string& op, int64_t nominal_bytes, int world, const std::string& impl) {
  return op + "/float32/" + std::to_string(nominal_bytes) + "/w" + std::to_string(world) + "/" + impl;
}

std::vector<harness::TestCase> comm_rank_benches(int world) {
  const CommSweep sweep = comm_sweep_from_env();
  auto st = std::make_shared<CommState>();
  st->world = world;
  std::vector<harness::TestCase> cases;
  for (const std::string& op : sweep.ops)
    for (int64_t bytes : sweep.sizes)
      for (const char* impl : kImpls) {
        if (std::string(impl) == "engine-detail" && op != "all_reduce") continue;  // DETAIL's cost: one op suffices
        // Out of cache (Note [Collectives out of cache]): the ops of DDP and FSDP steps, up to kColdMaxBytes.
        if (std::string(impl) == "engine-cold" && (op == "broadcast" || bytes > kColdMaxBytes)) continue;
        const std::string name = comm_case_name(op, bytes, world, impl);
        const double target = sweep.target_s;
        cases.push_back(recorded_case(
            "comm", name,
            [st, op, bytes, impl = std::string(impl), target](harness::Record& r) {
              run_point(*st, op, bytes, impl, target, r);
            },
            /*with_seed=*/false));
      }
  return cases;
}

}  // namespace tb::suites
