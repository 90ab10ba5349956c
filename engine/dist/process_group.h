// The one collective-communication interface of the engine, after torch.distributed's
// ProcessGroup: rank, size and the collectives, each returning a Work that can be waited on with
// a timeout. Backends (mpi/, gloo/, nccl/) implement only the synchronous primitives at the bottom
// of this file; this class owns what every backend shares:
//   - argument checks (dtype, contiguity, sizes) with clear errors, before anything is enqueued,
//   - one worker thread per group that runs the primitives in issue order, so DDP can launch a
//     bucket's all_reduce and keep running backward; a caller that waits right away runs its
//     call itself, which keeps all_reduce(t)->wait() near raw MPI's latency (Note [Collective
//     worker] in process_group.cpp),
//   - the flight recorder entry of every call and the watchdog that turns a hang into a
//     diagnosis and a non-zero exit (flight_recorder.h, watchdog.h).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::dist {

enum class ReduceOp { Sum, Avg, Max, Min, Product };
const char* reduce_op_name(ReduceOp op);

// Raised by Work::wait when a collective fails or does not finish in time, and by argument checks.
class DistError : public core::Error {
 public:
  DistError(const std::string& op, const std::string& what) : core::Error(op, what) {}
};

class FlightRecorder;
class ProgressBoard;
class Watchdog;
class ProcessGroup;
struct InFlight;

// One issued call. Completed by the group's worker thread; waited on by anyone.
class Work {
 public:
  uint64_t seq() const { return seq_; }  // 1, 2, ... per group, in issue order
  const std::string& op() const { return *op_; }
  bool is_completed() const { return done_.load(std::memory_order_acquire); }
  // Blocks until done; rethrows the backend's failure. Throws DistError (naming the op, seq and
  // elapsed time) when `timeout` passes first; a zero timeout means the group's timeout.
  // A wait with the group's timeout may run the call on the waiting thread (Note [Collective worker]).
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Like wait without throwing on timeout: false if still running after `timeout`. (It rethrows
  // the backend's failure like wait.)
  bool wait_for(std::chrono::milliseconds timeout);

 private:
  friend class ProcessGroup;
  uint64_t seq_ = 0;
  const std::string* op_ = nullptr;  // one static string per op (no copy per call)
  std::chrono::milliseconds default_timeout_{0};
  ProcessGroup* group_ = nullptr;  // valid while !done_ (a group drains its calls before it dies)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::atomic<int> waiters_{0};  // threads blocked on cv_: finish() notifies only then
  std::exception_ptr error_;     // written before done_ is set
  void finish(std::exception_ptr e);
  bool block_until_done(std::chrono::milliseconds timeout);
};
using WorkPtr = std::shared_ptr<Work>;

struct Options {
  // How long a collective may take before the watchdog declares a hang (generous by default:
  // the first all_reduce of a big model on a loaded machine can take minutes). Overridden by
  // TRAINBENCH_DIST_TIMEOUT (seconds) in the environment.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // Note: the ProcessGroup constructor applies the two environment overrides (TRAINBENCH_DIST_TIMEOUT,
  // TRAINBENCH_DIST_DIR) to the Options it is given; options() returns the result.
  std::size_t recorder_capacity = 2048;  // flight recorder ring buffer entries
  // Where the watchdog writes its JSON dump and where ranks publish their progress for each
  // other's diagnoses (the launcher sets TRAINBENCH_DIST_DIR; empty: the current directory).
  std::string run_dir;
  bool watchdog = true;  // false only in tests of the watchdog's pieces
  // Tells apart the groups split from one group (split() sets it): part of the progress board's
  // file name, so subgroups with the same rank numbers never share a board. Empty for a world group.
  std::string name;
  // Note [Checking the calls] (process_group.cpp): before a collective enters the backend, the
  // ranks compare its op, dtype, element count, reduction and root. Auto: through the progress
  // board when every rank is on this host, else through a small all-reduce on the backend;
  // Exchange: always the all-reduce; Off: no check (a mismatch is then undefined behaviour in
  // the backend: heap corruption on MPI, an abort on Gloo). TRAINBENCH_DIST_CHECK=auto|exchange|off
  // overrides it. The ranks agree on the mode when the group starts: off if any rank says off,
  // else the exchange if any rank needs it.
  enum class Check { Auto, Exchange, Off };
  Check check = Check::Auto;
  // Debug level, after TORCH_DISTRIBUTED_DEBUG (TRAINBENCH_DIST_DEBUG=OFF|INFO|DETAIL overrides it;
  // Note [Debug levels] in process_group.cpp). Info: rank 0 logs each group's creation and DDP's
  // bucket assignment on stderr. Detail: also, before every collective, the ranks exchange its
  // full fingerprint (op, dtype, every shape, reduction or root, collective number, call-site
  // label) and a mismatch raises DistError on every rank showing each side's fingerprint. The
  // ranks agree when the group starts: Detail only if every rank asks for it.
  enum class Debug { Off, Info, Detail };
  Debug debug = Debug::Off;
  // A rank that issues a collective this much later than the last of the others is reported on
  // stderr as a straggler by the lowest-numbered rank that was on time (Note [Stragglers] in
  // process_group.cpp); training goes on. Negative: min(5 s, timeout / 2); zero: never.
  // TRAINBENCH_STRAGGLER_WARN (seconds) overrides it.
  std::chrono::milliseconds straggler_warn{-1};
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;  // "mpi", "gloo", "nccl"
  const Options& options() const { return options_; }
  // Whether DETAIL's fingerprint exchange runs before each collective (every rank asked for it).
  bool detail_checks() const { return detail_; }
  FlightRecorder& recorder() { return *recorder_; }

  // Dtypes: float32, float64, bfloat16, int64 (anything else: DistError). Tensors must be
  // contiguous CPU tensors; every rank must pass the same op, dtype, element count, reduction and
  // root: a collective whose ranks disagree throws DistError on every rank, naming the ranks,
  // the collective's number and each side's arguments, and nothing enters the backend (Note
  // [Checking the calls]). Outputs are written in place.
  WorkPtr all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
  WorkPtr broadcast(Tensor& t, int root);
  // `out` has size() * in.numel() elements: rank r's `in` lands at [r*n, (r+1)*n).
  WorkPtr all_gather(Tensor& out, const Tensor& in);
  // outs.size() == size(), each with in's numel.
  WorkPtr all_gather(std::vector<Tensor>& outs, const Tensor& in);
  // `in` has size() * out.numel() elements; rank r receives the reduction of chunk r.
  WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::Sum);
  // ins.size() == size(); the chunks may differ in length (ins[r].numel() == out.numel() on rank
  // r), which is how sizes that do not divide by the world size are scattered.
  WorkPtr reduce_scatter(Tensor& out, const std::vector<Tensor>& ins, ReduceOp op = ReduceOp::Sum);
  WorkPtr barrier();
  WorkPtr send(const Tensor& t, int dst, int tag = 0);
  WorkPtr recv(Tensor& t, int src, int tag = 0);

  // Splits the group: every rank calls it (a collective, after the calls issued before it) and
  // the ranks that pass the same `color` form a new group, ordered by their rank here (as
  // MPI_Comm_split and torch.distributed.new_subgroups). HYBRID_SHARD's shard and replica groups
  // are made this way. Backends that cannot split throw DistError naming themselves.
  virtual std::shared_ptr<ProcessGroup> split(int color);

  // Waits for every issued call (used before destruction and by tests).
  void synchronize();

 protected:
  ProcessGroup(int rank, int size, Options options);
  // Backends call this at the end of their constructor (the worker and the watchdog start only
  // once the backend is fully built) and shutdown() first thing in their destructor.
  void start();
  void shutdown();

  // The primitives: run one at a time, in issue order, on the worker thread or on a thread that
  // waits for the call (so per-thread state, e.g. a CUDA device, must be set inside them);
  // tensors already checked (contiguous CPU, supported dtype, consistent sizes). Throw on failure.
  // Avg is never passed: the base class reduces with Sum and divides (integers: truncating).
  virtual void run_all_reduce(Tensor& t, ReduceOp op) = 0;
  virtual void run_broadcast(Tensor& t, int root) = 0;
  virtual void run_all_gather(Tensor& out, const Tensor& in) = 0;  // out: size() * in
  virtual void run_reduce_scatter(Tensor& out, const Tensor& in,   // in: concatenated
                                  const std::vector<int64_t>& counts, ReduceOp op) = 0;
  virtual void run_barrier() = 0;
  virtual void run_send(const Tensor& t, int dst, int tag) = 0;
  virtual void run_recv(Tensor& t, int src, int tag) = 0;

 private:
  friend class Work;
  struct Task;  // one call: its Work, op, tensors (process_group.cpp)
  WorkPtr enqueue(std::shared_ptr<Task> task, const std::string& detail);
  void execute(Task& task);   // runs one call on the current thread (mu_ not held)
  void run_task(Task& task);  // the primitive(s) of one call
  void help(Work* w);         // runs queued calls up to w on the waiting thread
  void worker_loop();
  void await_peers(uint64_t cseq);             // Note [Waiting for the peers]
  void check_call(Task& task);                 // Note [Checking the calls]; throws DistError on a mismatch
  InFlight in_flight(const Task& task) const;  // the watchdog's description of a call
  void agree_on_check();                       // start(): every rank picks the same CheckMode
  void check_detail(Task& task, const std::string& board_mismatch);                     // Note [Debug levels]
  void report_straggler(const Task& task, const std::vector<uint64_t>& arrived) const;  // Note [Stragglers]

  int rank_, size_;
  Options options_;
  std::unique_ptr<FlightRecorder> recorder_;
  std::unique_ptr<ProgressBoard> board_;
  std::unique_ptr<Watchdog> watchdog_;
  std::mutex mu_;
  std::condition_variable cv_;  // wakes the worker
  std::deque<std::shared_ptr<Task>> queue_;
  std::shared_ptr<Task> running_;  // the call being executed (by the worker or a waiter)
  uint64_t next_seq_ = 1, next_collective_seq_ = 1;
  uint64_t last_enqueue_ = 0;     // CallClock ticks (flight_recorder.h)
  bool worker_asleep_ = false;    // blocked without a deadline: enqueue must notify
  bool worker_parked_ = false;    // blocked until the call a waiter runs ends: help notifies
  bool last_ran_inline_ = false;  // the last call ran on its waiting thread (a synchronous caller)
  bool stopping_ = false, started_ = false, shut_down_ = false;
  bool peers_local_ = false;  // every rank's board slot is on this host (worker only)
  enum CheckMode { kCheckOff, kCheckExchange, kCheckBoard };
  CheckMode check_mode_ = kCheckOff;  // agreed by every rank in start()
  bool detail_ = false;               // Options::Debug::Detail, agreed by every rank in start()
  uint64_t straggler_ticks_ = 0;      // Options::straggler_warn in CallClock ticks; 0: off
  std::thread worker_;
};

// Where this process sits in the job: the one reader of the launchers' environment (the engine
// builds its groups from it, the harness's ranks and DDP's thread split read it too). One
// precedence for every fact, first set wins (docs/env.md), integers parsed strictly:
//   rank / size / local rank: TRAINBENCH_RANK / _WORLD_SIZE / _LOCAL_RANK, OpenMPI's
//     OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK, Slurm's SLURM_PROCID / SLURM_NTASKS /
//     SLURM_LOCALID, torchrun's RANK / WORLD_SIZE / LOCAL_RANK; a single process (0 of 1) when none;
//   ranks on this host: OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, torchrun's
//     LOCAL_WORLD_SIZE;  hosts: SLURM_STEP_NUM_NODES;
//   job id: PMIX_NAMESPACE, OMPI_MCA_ess_base_jobid, slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>,
//     TORCHELASTIC_RUN_ID.
struct WorldInfo {
  int rank = 0, size = 1, local_rank = 0;
  int local_size = 0;  // this job's ranks on this host; 0 when no launcher says
  int nodes = 0;       // hosts the job spans; 0 when no launcher says
  std::string job_id;  // equal on every rank of one launch, different between launches; "" when none
  std::string source;  // which variables gave the rank
};
WorldInfo world_from_env();

// An id that differs between launches and is equal on all ranks of one launch, for rendezvous
// keys (gloo's store, nccl's unique-id file): `override_var` if set, else WorldInfo::job_id,
// else "local".
std::string launch_id_from_env(const char* override_var);

// A group on the named backend ("mpi", "gloo", "nccl") for the whole job (world_from_env).
// Throws DistError naming the backend when it is not built in or cannot start (e.g. nccl
// without a GPU: the message says so, and tests skip on it).
std::shared_ptr<ProcessGroup> new_group(const std::string& backend, Options options = {});

}  // namespace tb::dist
