#include "engine/dist/mpi/mpi_group.h"

// Only MPI's C API is used: skip OpenMPI's deprecated C++ bindings (they also warn under -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/env.h"
#include "engine/dist/watchdog.h"

namespace tb::dist::mpi {

// Note [MPI threads]
// MPI is initialised on the first group with MPI_Init_thread asking for MPI_THREAD_MULTIPLE
// (Debian's OpenMPI gives it). Calls into MPI come only from a group's worker thread or from a
// thread waiting on that group's call (Note [Collective worker]), one call at a time per group;
// groups on different communicators may call at once, which MULTIPLE allows. Where the library
// gives only MPI_THREAD_SERIALIZED, one process-wide mutex serialises every MPI call (groups then
// run one after another); below SERIALIZED the backend refuses to start. MPI_Finalize runs at
// process exit (atexit), and only if this backend initialised MPI; a group destroyed after that
// does not touch MPI again.
namespace {

struct Runtime {
  int provided = 0;
  bool we_initialized = false;
  bool serialize = false;
  std::mutex mu;            // held around MPI calls when serialize
  MPI_Op bf16_ops[4] = {};  // sum, max, min, product over bfloat16 (MPI_UINT16_T carrying the bits)
};

std::string mpi_error(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return std::string(buf, len);
}

void check(int rc, const char* op, const char* call) {
  if (rc != MPI_SUCCESS) throw DistError(op, std::string(call) + " failed: " + mpi_error(rc));
}

// bf16 reductions as torch does them: each step in float, rounded back to bf16 (nearest even).
template <typename F>
void bf16_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const core::BFloat16*>(in);
  auto* b = static_cast<core::BFloat16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = core::BFloat16(F{}(float(a[i]), float(b[i])));
}
struct Add {
  float operator()(float x, float y) const { return x + y; }
};
struct Mul {
  float operator()(float x, float y) const { return x * y; }
};
// Like torch's max/min on floats: NaN wins.
struct Max {
  float operator()(float x, float y) const { return (x != x || x > y) ? x : y; }
};
struct Min {
  float operator()(float x, float y) const { return (x != x || x < y) ? x : y; }
};

void finalize_at_exit() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

// Note [MPI rendezvous]
// MPI_Init waits (Open MPI's modex fence) until every rank of the job has called it, without a
// timeout: a rank that never gets there (stuck before creating its first group) would leave the
// others in MPI_Init, silent, until the launcher's outer timeout. So each rank marks its arrival
// in the run folder first (mpi_init_<job>_rank<R>), and when MPI_Init has not returned within the
// group's timeout it names the ranks without a mark ("rank R never joined", as opposed to a rank
// that joined and then stopped, which the watchdog reports) and ends as the watchdog does.
int init_watched(const Options& o, const WorldInfo& w, int* provided) {
  // The group's constructor applies these two variables to its options; MPI_Init comes before it.
  std::string dir = o.run_dir;
  if (const char* d = std::getenv("TRAINBENCH_DIST_DIR"); d && *d) dir = d;
  std::chrono::duration<double> timeout = o.timeout;
  if (const char* t = std::getenv("TRAINBENCH_DIST_TIMEOUT"); t && *t)
    timeout = std::chrono::duration<double>(core::parse_double("TRAINBENCH_DIST_TIMEOUT", t, 1e-3, 1e9));
  if (!o.watchdog || dir.empty() || w.size <= 1)
    return MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, provided);
  std::string job = w.job_id.empty() ? "local" : w.job_id;
  std::replace(job.begin(), job.end(), '/', '_');
  const auto mark = [&](int r) {
    return std::filesystem::path(dir) / ("mpi_init_" + job + "_rank" + std::to_string(r));
  };
  std::ofstream(mark(w.rank)) << ::getpid() << '\n';
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watch([&] {
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, timeout, [&] { return done; })) return;
    std::string missing;
    for (int q = 0; q < w.size; ++q)
      if (!std::filesystem::exists(mark(q)))
        missing += (missing.empty() ? "rank " : "; rank ") + std::to_string(q) + " never joined";
    if (missing.empty()) missing = "every rank reached MPI_Init (the MPI runtime itself is stuck)";
    else missing += " (it never reached MPI_Init: not started, or stuck before creating its first process group)";
    std::fprintf(stderr, "trainbench: watchdog: rank %d: MPI_Init did not complete in %.1f s: %s\n", w.rank,
                 timeout.count(), missing.c_str());
    std::fflush(stderr);
    std::_Exit(3);
  });
  const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, provided);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  watch.join();
  return rc;
}

Runtime& runtime(const Options& o = {}, const WorldInfo& w = world_from_env()) {
  static Runtime rt;
  static std::once_flag once;
  std::call_once(once, [&] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      check(init_watched(o, w, &rt.provided), "mpi", "MPI_Init_thread");
      rt.we_initialized = true;
      std::atexit(finalize_at_exit);
    } else {
      MPI_Query_thread(&rt.provided);
    }
    rt.serialize = rt.provided < MPI_THREAD_MULTIPLE;
    MPI_Op_create(&bf16_op<Add>, 1, &rt.bf16_ops[0]);
    MPI_Op_create(&bf16_op<Max>, 1, &rt.bf16_ops[1]);
    MPI_Op_create(&bf16_op<Min>, 1, &rt.bf16_ops[2]);
    MPI_Op_create(&bf16_op<Mul>, 1, &rt.bf16_ops[3]);
  });
  if (rt.provided < MPI_THREAD_SERIALIZED)
    throw DistError("mpi", "the MPI library gives thread level " + std::to_string(rt.provided) +
                               "; the mpi backend needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE");
  return rt;
}

// Holds the process-wide MPI lock where the library is only SERIALIZED.
struct Serial {
  std::optional<std::lock_guard<std::mutex>> lock;
  explicit Serial(Runtime& rt) {
    if (rt.serialize) lock.emplace(rt.mu);
  }
};

MPI_Datatype datatype(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::BFloat16: return MPI_UINT16_T;
    default: throw DistError("mpi", std::string("no MPI datatype for ") + core::name(t));
  }
}

int count(int64_t n, const char* op) {
  if (n > INT_MAX) throw DistError(op, std::to_string(n) + " elements: MPI counts stop at 2^31 - 1; split the tensor");
  return int(n);
}

class MpiGroup final : public ProcessGroup {
 public:
  // A group over `parent`'s ranks (MPI_COMM_WORLD, or a communicator split from a group's own).
  MpiGroup(int rank, int size, Options options, MPI_Comm parent = MPI_COMM_WORLD)
      : ProcessGroup(rank, size, std::move(options)), rt_(runtime()) {
    {
      Serial s(rt_);
      check(MPI_Comm_dup(parent, &comm_), "mpi", "MPI_Comm_dup");
      MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
      check(MPI_Comm_dup(parent, &head_comm_), "mpi", "MPI_Comm_dup");
      MPI_Comm_set_errhandler(head_comm_, MPI_ERRORS_RETURN);
      int flag = 0;
      void* ub = nullptr;
      MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
      tag_ub_ = flag ? *static_cast<int*>(ub) : 32767;
    }
    start();
  }
  ~MpiGroup() override {
    shutdown();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      Serial s(rt_);
      MPI_Comm_free(&comm_);
      MPI_Comm_free(&head_comm_);
    }
  }
  std::string backend() const override { return "mpi"; }

  // MPI_Comm_split of this group's communicator, after every call issued so far has finished
  // (MPI requires every rank to call it, in the same order as the collectives around it).
  std::shared_ptr<ProcessGroup> split(int color) override {
    synchronize();
    MPI_Comm sub = MPI_COMM_NULL;
    int r = 0, n = 1;
    {
      Serial s(rt_);
      check(MPI_Comm_split(comm_, color, rank(), &sub), "split", "MPI_Comm_split");
      MPI_Comm_rank(sub, &r);
      MPI_Comm_size(sub, &n);
    }
    Options o = options();
    o.name = (o.name.empty() ? "" : o.name + ".") + "split" + std::to_string(color);
    auto g = std::make_shared<MpiGroup>(r, n, std::move(o), sub);
    Serial s(rt_);
    MPI_Comm_free(&sub);  // the group holds its own duplicates
    return g;
  }

 protected:
  MPI_Op reduce(ReduceOp op, DType t) const {
    const int i = op == ReduceOp::Sum ? 0 : op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 3;
    if (op == ReduceOp::Avg) throw DistError("mpi", "avg reaches the backend");  // the base class divides
    if (t == DType::BFloat16) return rt_.bf16_ops[i];
    const MPI_Op ops[4] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
    return ops[i];
  }
  void run_all_reduce(Tensor& t, ReduceOp op) override {
    const int n = count(t.numel(), "all_reduce");
    Serial s(rt_);
    check(MPI_Allreduce(MPI_IN_PLACE, t.data(), n, datatype(t.dtype()), reduce(op, t.dtype()), comm_), "all_reduce",
          "MPI_Allreduce");
  }
  void run_broadcast(Tensor& t, int root) override {
    const int n = count(t.numel(), "broadcast");
    Serial s(rt_);
    check(MPI_Bcast(t.data(), n, datatype(t.dtype()), root, comm_), "broadcast", "MPI_Bcast");
  }
  void run_all_gather(Tensor& out, const Tensor& in) override {
    const int n = count(in.numel(), "all_gather");
    count(out.numel(), "all_gather");
    const MPI_Datatype dt = datatype(in.dtype());
    Serial s(rt_);
    check(MPI_Allgather(in.data(), n, dt, out.data(), n, dt, comm_), "all_gather", "MPI_Allgather");
  }
  void run_reduce_scatter(Tensor& out, const Tensor& in, const std::vector<int64_t>& counts, ReduceOp op) override {
    count(in.numel(), "reduce_scatter");
    std::vector<int> c(counts.begin(), counts.end());
    Serial s(rt_);
    check(MPI_Reduce_scatter(in.data(), out.data(), c.data(), datatype(in.dtype()), reduce(op, in.dtype()), comm_),
          "reduce_scatter", "MPI_Reduce_scatter");
  }
  void run_barrier() override {
    Serial s(rt_);
    check(MPI_Barrier(comm_), "barrier", "MPI_Barrier");
  }
  // Note [MPI send/recv header]
  // A recv whose dtype or count differs from the message is an error in MPI only when the bytes
  // do not fit (a float64 message read as twice as many float32 passes silently). So each send is
  // preceded by a 16-byte header (dtype, element count) on a communicator of its own (user tags
  // stay whole; MPI keeps each communicator's messages in order), and the receiver compares it
  // before posting the data recv; on a mismatch it drains the message and throws naming both
  // sides. The header is eager: a few hundred nanoseconds per send.
  void run_send(const Tensor& t, int dst, int tag) override {
    if (tag > tag_ub_)
      throw DistError("send", "tag " + std::to_string(tag) + " is above MPI_TAG_UB " + std::to_string(tag_ub_));
    const int n = count(t.numel(), "send");
    const int64_t header[2] = {int64_t(t.dtype()), t.numel()};
    Serial s(rt_);
    check(MPI_Send(header, 2, MPI_INT64_T, dst, tag, head_comm_), "send", "MPI_Send");
    check(MPI_Send(t.data(), n, datatype(t.dtype()), dst, tag, comm_), "send", "MPI_Send");
  }
  void run_recv(Tensor& t, int src, int tag) override {
    if (tag > tag_ub_)
      throw DistError("recv", "tag " + std::to_string(tag) + " is above MPI_TAG_UB " + std::to_string(tag_ub_));
    const int n = count(t.numel(), "recv");
    int64_t header[2] = {0, 0};
    MPI_Status st;
    int got = 0;
    {
      Serial s(rt_);
      check(MPI_Recv(header, 2, MPI_INT64_T, src, tag, head_comm_, MPI_STATUS_IGNORE), "recv", "MPI_Recv");
      if (header[0] != int64_t(t.dtype()) || header[1] != t.numel()) {
        // Drain the data message by its byte count, then report.
        MPI_Status probe;
        check(MPI_Probe(src, tag, comm_, &probe), "recv", "MPI_Probe");
        int bytes = 0;
        MPI_Get_count(&probe, MPI_BYTE, &bytes);
        std::vector<char> scratch(size_t(std::max(bytes, 1)));
        MPI_Recv(scratch.data(), bytes, MPI_BYTE, src, tag, comm_, MPI_STATUS_IGNORE);
        const bool known = header[0] >= 0 && header[0] <= int64_t(DType::Float64) && header[1] >= 0;
        const std::string theirs = known ? describe_call(
                                               {pack_call(OpCode::Send, DType(header[0]), rank(), 0), header[1], 0})
                                         : "an unreadable header";
        throw DistError("recv", "rank " + std::to_string(rank()) + "'s " +
                                    describe_call({pack_call(OpCode::Recv, t.dtype(), src, 0), t.numel(), 0}) +
                                    " tag " + std::to_string(tag) + " does not match rank " + std::to_string(src) +
                                    "'s " + theirs +
                                    "; nothing was written: send and recv must agree on dtype and element count");
      }
      check(MPI_Recv(t.data(), n, datatype(t.dtype()), src, tag, comm_, &st), "recv", "MPI_Recv");
      MPI_Get_count(&st, datatype(t.dtype()), &got);
    }
    if (got != n)
      throw DistError("recv", "received " + std::to_string(got) + " elements from rank " + std::to_string(src) +
                                  " into a tensor of " + std::to_string(n));
  }

 private:
  Runtime& rt_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm head_comm_ = MPI_COMM_NULL;  // send/recv headers (Note [MPI send/recv header])
  int tag_ub_ = 32767;
};

}  // namespace

int thread_level() { return runtime().provided; }

std::shared_ptr<ProcessGroup> make_group(const WorldInfo& world, Options options) {
  Runtime& rt = runtime(options, world);
  int rank = 0, size = 1;
  {
    Serial s(rt);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  // Every rank learns whether any rank's environment disagrees with MPI before any of them goes
  // on: a rank that threw alone left the others in the group's first collective (MPI_Comm_dup)
  // until the launch timeout (every rank handed one caller's TRAINBENCH_RANK=0: rank 1 threw,
  // rank 0 waited 30 minutes).
  const int mismatch = rank != world.rank || size != world.size ? 1 : 0;
  int mismatches = mismatch;
  {
    Serial s(rt);
    MPI_Allreduce(&mismatch, &mismatches, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  if (mismatch)
    throw DistError("mpi", "the environment (" + world.source + ") says rank " + std::to_string(world.rank) + " of " +
                               std::to_string(world.size) + " but MPI_COMM_WORLD has rank " + std::to_string(rank) +
                               " of " + std::to_string(size) + " (start the ranks with mpirun or srun)");
  if (mismatches)
    throw DistError("mpi", "rank " + std::to_string(rank) + ": the environment of " + std::to_string(mismatches) +
                               " other rank(s) disagrees with MPI_COMM_WORLD about where they sit (their errors say "
                               "how; start the ranks with mpirun or srun, without a TRAINBENCH_RANK of your own)");
  return std::make_shared<MpiGroup>(rank, size, std::move(options));
}

}  // namespace tb::dist::mpi
