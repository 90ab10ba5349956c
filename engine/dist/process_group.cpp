#include "engine/dist/process_group.h"
#include "engine/core/env.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "engine/core/profiler.h"
#include "engine/dist/call_site.h"
#include "engine/dist/flight_recorder.h"
#include "engine/dist/watchdog.h"

namespace tb::dist {

using Clock = std::chrono::steady_clock;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Product: return "product";
  }
  return "?";
}

// Note [Collective worker]
// Every call is checked on the calling thread, numbered, recorded, and queued; the group runs the
// queue strictly in issue order, one call at a time, so every rank runs its group's collectives in
// the same order whatever thread issued them (collectives on different groups may run at once).
// Who runs a call:
//   - the group's worker thread, so that a call nobody waits on yet (DDP's bucket all_reduce during
//     backward) makes progress while the caller computes;
//   - or the thread that waits on it: Work::wait with the group's timeout, finding its call (and
//     any before it) queued and nothing running, runs them itself. A handoff to another thread
//     costs a wake-up (5-20 us) and two threads busy on one core; all_reduce(t)->wait() on 8 bytes
//     takes ~0.5 us in raw MPI, which only running inline can stay near.
// Waking the worker costs a futex call and a context switch; done per call, it makes the 8-byte
// all_reduce 20x slower and, for large messages, the woken worker preempts the rank's MPI
// polling. So enqueue wakes the worker only when the call looks asynchronous: the previous call
// is still queued (a burst, like DDP's buckets), or the previous call was not run by its waiter,
// or the worker has slept for kDeepSleepAfter. Otherwise the worker polls every kPollPeriod and
// takes a call queued longer than kGrace (so it does not steal a call its caller is about to
// wait on); while a waiter runs a call inline it does not poll but parks until that call ends. A lone call issued after synchronous ones therefore starts within kPollPeriod, or at
// the next issue or wait, whichever comes first; calls issued back to back start at once.
// A wait with a timeout shorter than the group's never runs the call itself (it must be able to
// return when its timeout passes); nor does any wait when the watchdog is off (Options::watchdog),
// since nothing would then end a call that hangs on the waiting thread.
namespace {
constexpr auto kGrace = std::chrono::microseconds(20);
constexpr auto kPollPeriod = std::chrono::milliseconds(1);
constexpr auto kDeepSleepAfter = std::chrono::seconds(1);
constexpr auto kSpin = std::chrono::microseconds(10);      // Work::wait spins this long before blocking
constexpr auto kPeerPoll = std::chrono::microseconds(20);  // Note [Waiting for the peers]
constexpr auto kPeerWaitMax = std::chrono::milliseconds(250);

using core::env_or;

// The launcher's id for this job, so that progress boards of different jobs never meet.
std::string job_id() {
  std::string id = world_from_env().job_id;
  if (id.empty()) id = "ppid" + std::to_string(::getppid());  // ranks forked by one launcher
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  return id;
}

bool supported(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Int64;
}

void check_tensor(const char* op, const char* what, const Tensor& t) {
  if (!t.defined()) throw DistError(op, std::string(what) + " is an undefined tensor");
  if (t.device().type != core::DeviceType::CPU)
    throw DistError(op, std::string(what) + " is on " + t.device().str() + "; this group takes CPU tensors");
  if (!supported(t.dtype()))
    throw DistError(op, std::string(what) + " has dtype " + core::name(t.dtype()) +
                            "; supported: float32, float64, bfloat16, int64");
  if (!t.is_contiguous())
    throw DistError(op, std::string(what) + " " + core::to_string(t.sizes()) + " is not contiguous (strides " +
                            core::to_string(t.strides()) + "); pass t.contiguous()");
}

void check_same_dtype(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  if (a.dtype() != b.dtype())
    throw DistError(op,
                    std::string(an) + " is " + core::name(a.dtype()) + " but " + bn + " is " + core::name(b.dtype()));
}

// t /= n in place, for Avg: floats divide (bf16 through float, rounded back), integers truncate.
void divide_in_place(Tensor& t, int n) {
  const int64_t count = t.numel();
  core::dispatch(t.dtype(), [&]<typename T>() {
    T* p = static_cast<T*>(t.data());
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, core::Half>) {
      for (int64_t i = 0; i < count; ++i) p[i] = T(float(p[i]) / float(n));
    } else if constexpr (std::is_same_v<T, bool>) {
      throw DistError("all_reduce", "avg of bool");
    } else {
      for (int64_t i = 0; i < count; ++i) p[i] = T(p[i] / T(n));
    }
  });
}

[[maybe_unused]] std::string shape_list(const std::vector<core::Shape>& shapes) {
  std::string s;
  for (std::size_t i = 0; i < shapes.size() && i < 2; ++i) s += (i ? " -> " : "") + core::to_string(shapes[i]);
  if (shapes.size() > 2) s += " (+" + std::to_string(shapes.size() - 2) + " more)";
  return s;
}
}  // namespace

// ---- Work ----

// finish and block_until_done pair up like Dekker's flags (both seq_cst): either finish sees the
// waiter's count, or the waiter sees done_ before it sleeps. The lock around the notify keeps a
// waiter from missing it between its check and its sleep.
void Work::finish(std::exception_ptr e) {
  error_ = std::move(e);
  done_.store(true, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
  }
}

bool Work::block_until_done(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto spin_end = Clock::now() + kSpin;
  while (!done_.load(std::memory_order_acquire) && Clock::now() < spin_end) _mm_pause();
  if (done_.load(std::memory_order_acquire)) return true;
  std::unique_lock lock(mu_);
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  const bool ok = cv_.wait_until(lock, deadline, [&] { return done_.load(std::memory_order_seq_cst); });
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return ok;
}

bool Work::wait_for(std::chrono::milliseconds timeout) {
  if (!done_.load(std::memory_order_acquire)) {
    if (group_ && timeout >= default_timeout_ && group_->options_.watchdog) group_->help(this);
    if (!done_.load(std::memory_order_acquire) && !block_until_done(timeout)) return false;
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void Work::wait(std::chrono::milliseconds timeout) {
  const auto t = timeout.count() > 0 ? timeout : default_timeout_;
  // Run it here if we may (Note [Collective worker]); the clock is read only if we must block.
  if (!done_.load(std::memory_order_acquire) && group_ && t >= default_timeout_ && group_->options_.watchdog)
    group_->help(this);
  if (!done_.load(std::memory_order_acquire)) {
    const auto t0 = Clock::now();
    if (!block_until_done(t)) {
      std::ostringstream os;
      os.precision(3);
      os << "#" << seq_ << " did not complete within " << std::chrono::duration<double>(Clock::now() - t0).count()
         << " s (timeout " << std::chrono::duration<double>(t).count()
         << " s); it stays issued, and the watchdog ends the process if it never completes";
      throw DistError(*op_, os.str());
    }
  }
  if (error_) std::rethrow_exception(error_);
}

// ---- the group ----

// One call, allocated once: the Work handed out is an alias into it (so the caller's handle keeps
// the task alive, and a call costs one allocation).
struct ProcessGroup::Task {
  Work work;
  OpCode code = OpCode::None;
  ReduceOp rop = ReduceOp::Sum;
  int arg = 0, tag = 0;         // root, or peer for send/recv
  Tensor a, b;                  // the tensor / (out, in), as each op's enqueue says
  std::vector<Tensor> list;     // all_gather's outputs, reduce_scatter's inputs
  std::vector<int64_t> counts;  // reduce_scatter's chunk sizes
  int64_t numel = 0;            // for the progress board
  uint64_t seq = 0, cseq = 0, packed = 0;
  int peer = -1;
  bool mismatch = false;             // check_call refused it (no backend failure to explain)
  uint64_t enqueued = 0;             // CallClock ticks
  std::atomic<uint64_t> started{0};  // written by the running thread, read by the watchdog
  std::string label;                 // the call site, kept only while a profile runs (execute's event)
};

ProcessGroup::ProcessGroup(int rank, int size, Options options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  if (size < 1 || rank < 0 || rank >= size)
    throw DistError("process_group", "rank " + std::to_string(rank) + " of world size " + std::to_string(size));
  if (const std::string t = env_or("TRAINBENCH_DIST_TIMEOUT"); !t.empty()) {
    const double s = core::parse_double("TRAINBENCH_DIST_TIMEOUT", t, 1e-3, 1e9);  // seconds
    options_.timeout = std::chrono::milliseconds(std::max<int64_t>(1, int64_t(s * 1000)));
  }
  if (const std::string d = env_or("TRAINBENCH_DIST_DIR"); !d.empty()) options_.run_dir = d;
  if (const std::string c = env_or("TRAINBENCH_DIST_CHECK"); !c.empty()) {
    const std::string v = core::parse_choice("TRAINBENCH_DIST_CHECK", c, {"auto", "exchange", "off"});
    options_.check = v == "auto"       ? Options::Check::Auto
                     : v == "exchange" ? Options::Check::Exchange
                                       : Options::Check::Off;
  }
  if (const std::string d = env_or("TRAINBENCH_DIST_DEBUG"); !d.empty()) {
    std::string up = d;
    for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
    const std::string v = core::parse_choice("TRAINBENCH_DIST_DEBUG", up, {"OFF", "INFO", "DETAIL"});
    options_.debug = v == "OFF" ? Options::Debug::Off : v == "INFO" ? Options::Debug::Info : Options::Debug::Detail;
  }
  if (const std::string w = env_or("TRAINBENCH_STRAGGLER_WARN"); !w.empty()) {
    // Whole milliseconds, rounded up: a positive value under 1 ms truncated to 0, which means "never".
    const double s = core::parse_double("TRAINBENCH_STRAGGLER_WARN", w, 0, 1e9);
    options_.straggler_warn = std::chrono::milliseconds(int64_t(std::ceil(s * 1000)));
  }
  if (options_.timeout.count() <= 0) throw DistError("process_group", "Options::timeout must be positive");
  if (options_.straggler_warn.count() < 0)
    options_.straggler_warn = std::min<std::chrono::milliseconds>(std::chrono::seconds(5), options_.timeout / 2);
}

ProcessGroup::~ProcessGroup() {
  // Backends call shutdown() in their destructor, while the primitives can still run; this is the
  // safety net for one that did not (the queue must then be empty, or calls die with the backend).
  shutdown();
}

std::shared_ptr<ProcessGroup> ProcessGroup::split(int /*color*/) {
  throw DistError("split", "the " + backend() + " backend cannot split a group (the mpi backend can)");
}

void ProcessGroup::start() {
  if (started_) return;
  started_ = true;
  const std::string be = backend();
  recorder_ = std::make_unique<FlightRecorder>(options_.recorder_capacity, be, rank_, size_);
  int n;
  {
    static std::mutex mu;
    static std::map<std::string, int> made;  // groups made per backend, the same count on every rank
    std::lock_guard lock(mu);
    n = made[be + "/" + options_.name]++;
  }
  std::string dir = options_.run_dir;
  if (dir.empty())
    dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
  board_ = std::make_unique<ProgressBoard>((std::filesystem::path(dir) /
                                            ("trainbench_progress_" + job_id() + "_" + be +
                                             (options_.name.empty() ? "" : "_" + options_.name) + "_" +
                                             std::to_string(n) + ".bin"))
                                               .string(),
                                           rank_, size_);
  CallClock::calibrate();
  last_enqueue_ = CallClock::now();
  straggler_ticks_ = CallClock::ticks(options_.straggler_warn);
  agree_on_check();
  if (options_.debug != Options::Debug::Off && rank_ == 0) {
    std::fprintf(stderr,
                 "trainbench: dist: group %s on %s: %d ranks, check %s, debug %s, timeout %.1f s, straggler "
                 "warning %.1f s, progress board %s\n",
                 options_.name.empty() ? "world" : options_.name.c_str(), be.c_str(), size_,
                 check_mode_ == kCheckBoard      ? "board"
                 : check_mode_ == kCheckExchange ? "exchange"
                                                 : "off",
                 detail_ ? "DETAIL" : "INFO", std::chrono::duration<double>(options_.timeout).count(),
                 std::chrono::duration<double>(options_.straggler_warn).count(), board_->path().c_str());
    std::fflush(stderr);
  }
  worker_ = std::thread([this] { worker_loop(); });
  if (options_.watchdog) {
    auto probe = [this]() -> std::optional<InFlight> {
      std::shared_ptr<Task> t;
      {
        std::lock_guard lock(mu_);
        t = running_ ? running_ : (queue_.empty() ? nullptr : queue_.front());
      }
      if (!t) return std::nullopt;
      return in_flight(*t);
    };
    watchdog_ = std::make_unique<Watchdog>(probe, *recorder_, *board_, rank_, size_, options_.timeout,
                                           options_.run_dir);
  }
}

InFlight ProcessGroup::in_flight(const Task& t) const {
  InFlight f;
  f.seq = t.seq;
  f.collective_seq = t.cseq;
  f.call = t.packed;
  f.peer = t.peer;
  const uint64_t started = t.started.load(std::memory_order_relaxed);
  f.since = CallClock::to_time(started ? started : t.enqueued);
  std::ostringstream os;
  const CallKey k = unpack_call(t.packed);
  os << op_code_name(k.op) << " #" << (t.cseq ? t.cseq : t.seq);
  if (k.op == OpCode::Send) os << " to rank " << t.peer;
  if (k.op == OpCode::Recv) os << " from rank " << t.peer;
  os << " (";
  std::string detail, shapes, label;
  if (std::optional<CallRecord> r = recorder_->get(t.seq))
    detail = r->detail, shapes = shape_list(r->shapes), label = r->label;
  if (k.op != OpCode::Barrier) os << core::name(k.dtype) << " " << (shapes.empty() ? "?" : shapes) << ", ";
  if (!detail.empty()) os << detail << ", ";
  os << backend() << (t.cseq ? "" : ", seq " + std::to_string(t.seq));
  if (!label.empty()) os << ", label " << label;
  os << ")";
  f.what = os.str();
  return f;
}

// Every rank must choose the same way of checking (one of them is a collective on the backend):
// each proposes the most it can do -- the board only when every rank's slot is on this host,
// which the barrier makes sure every rank has written -- and the minimum wins.
void ProcessGroup::agree_on_check() {
  int mode = options_.check == Options::Check::Off        ? kCheckOff
             : options_.check == Options::Check::Exchange ? kCheckExchange
                                                          : kCheckBoard;
  int detail = options_.debug == Options::Debug::Detail ? 1 : 0;
  if (size_ > 1) {
    run_barrier();
    if (mode == kCheckBoard)
      for (int r = 0; r < size_; ++r) {
        const ProgressBoard::Slot s = board_->read(r);
        if (!board_->enabled() || !s.joined || !s.same_host) mode = kCheckExchange;
      }
    Tensor v = empty({4}, DType::Int64);
    int64_t* p = v.data_ptr<int64_t>();
    p[0] = mode, p[1] = -mode, p[2] = detail, p[3] = -detail;
    run_all_reduce(v, ReduceOp::Min);
    mode = int(p[0]);
    if (p[2] != -p[3] && rank_ == 0)
      std::fprintf(stderr,
                   "trainbench: dist: TRAINBENCH_DIST_DEBUG=DETAIL is set on some ranks only; DETAIL checks are off "
                   "for this group\n");
    detail = int(p[2]);
  }
  check_mode_ = CheckMode(mode);
  detail_ = detail != 0;
}

void ProcessGroup::shutdown() {
  if (shut_down_ || !started_) return;
  shut_down_ = true;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // The worker drains the queue first; a call that hangs meanwhile is the watchdog's.
  if (worker_.joinable()) worker_.join();
  watchdog_.reset();
  if (board_) {
    board_->set_state(ProgressBoard::State::Left);
    board_->remove_file();
  }
}

void ProcessGroup::synchronize() {
  std::shared_ptr<Task> last;
  {
    std::lock_guard lock(mu_);
    if (!queue_.empty()) last = queue_.back();
    else if (running_) last = running_;
  }
  if (!last) return;
  // A call's failure belongs to whoever holds its Work; synchronize only waits (and throws on timeout).
  try {
    last->work.wait();
  } catch (...) {
    if (!last->work.is_completed()) throw;
  }
}

WorkPtr ProcessGroup::enqueue(std::shared_ptr<Task> task, const std::string& detail) {
  Task& t = *task;
  const char* op = op_code_name(t.code);
  if (!started_) throw DistError(op, "the group's backend did not start it (ProcessGroup::start)");
  const bool p2p = t.code == OpCode::Send || t.code == OpCode::Recv;
  const DType dtype = t.a.defined() ? t.a.dtype() : DType::Float32;
  t.peer = p2p ? t.arg : -1;
  t.packed = pack_call(t.code, dtype,
                       t.code == OpCode::AllReduce || t.code == OpCode::ReduceScatter ? int(t.rop) : t.arg, t.numel);
  Work& w = t.work;
  static const std::string kNames[] = {"none",           "all_reduce", "broadcast", "all_gather",
                                       "reduce_scatter", "barrier",    "send",      "recv"};
  w.op_ = &kNames[int(t.code)];
  w.default_timeout_ = options_.timeout;
  w.group_ = this;
  const std::string_view label = CallSite::current();
  if (profiler::enabled()) t.label.assign(label);
  bool wake;
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw DistError(op, "the process group is shutting down");
    t.seq = w.seq_ = next_seq_++;
    t.cseq = p2p ? 0 : next_collective_seq_++;
    t.enqueued = last_enqueue_ = CallClock::now();
    recorder_->record(t.seq, t.cseq, t.enqueued, [&](RecorderSlot& r) {
      r.op = op;
      r.detail = detail;
      r.label.assign(label);
      r.dtype = dtype;
      // inputs then outputs
      std::size_t n = 0;
      const auto add = [&](const core::Shape& s) {
        if (r.shapes.size() <= n) r.shapes.emplace_back();
        r.shapes[n++] = s;
      };
      switch (t.code) {
        case OpCode::AllGather:
          add(t.b.sizes());
          if (t.list.empty()) add(t.a.sizes());
          for (const Tensor& x : t.list) add(x.sizes());
          break;
        case OpCode::ReduceScatter:
          if (t.list.empty()) add(t.b.sizes());
          for (const Tensor& x : t.list) add(x.sizes());
          add(t.a.sizes());
          break;
        case OpCode::Barrier: break;
        default: add(t.a.sizes());
      }
      r.shapes.resize(n);
    });
    if (!p2p) board_->coll_issued(t.cseq);
    wake = worker_asleep_ || !queue_.empty() || !last_ran_inline_;
    queue_.push_back(task);
  }
  if (wake) cv_.notify_all();
  return WorkPtr(std::move(task), &w);
}

void ProcessGroup::run_task(Task& t) {
  const auto reduced = [&](ReduceOp op) { return op == ReduceOp::Avg ? ReduceOp::Sum : op; };
  switch (t.code) {
    case OpCode::AllReduce:
      run_all_reduce(t.a, reduced(t.rop));
      if (t.rop == ReduceOp::Avg) divide_in_place(t.a, size_);
      break;
    case OpCode::Broadcast: run_broadcast(t.a, t.arg); break;
    case OpCode::AllGather:
      if (t.list.empty()) {
        run_all_gather(t.a, t.b);
      } else {
        Tensor flat = empty({int64_t(size_) * t.b.numel()}, t.b.dtype());
        run_all_gather(flat, t.b);
        const std::size_t bytes = std::size_t(t.b.numel()) * t.b.itemsize();
        const char* src = static_cast<const char*>(flat.data());
        for (int r = 0; r < size_; ++r)
          if (bytes) std::memcpy(t.list[r].data(), src + r * bytes, bytes);
      }
      break;
    case OpCode::ReduceScatter:
      if (t.list.empty()) {
        run_reduce_scatter(t.a, t.b, t.counts, reduced(t.rop));
      } else {
        Tensor flat = empty({t.numel}, t.a.dtype());
        char* dst = static_cast<char*>(flat.data());
        for (const Tensor& x : t.list) {
          const std::size_t bytes = std::size_t(x.numel()) * x.itemsize();
          if (bytes) std::memcpy(dst, x.data(), bytes);
          dst += bytes;
        }
        run_reduce_scatter(t.a, flat, t.counts, reduced(t.rop));
      }
      if (t.rop == ReduceOp::Avg) divide_in_place(t.a, size_);
      break;
    case OpCode::Barrier: run_barrier(); break;
    case OpCode::Send: run_send(t.a, t.arg, t.tag); break;
    case OpCode::Recv: run_recv(t.a, t.arg, t.tag); break;
    case OpCode::None: break;
  }
}

// Note [Checking the calls]
// Ranks that disagree about a collective -- another op, dtype, element count, reduction or root
// (Note [Call fingerprints] in watchdog.h) -- would hand the backend buffers of different sizes:
// MPI then writes past the smaller one (heap corruption), Gloo aborts from its transport thread.
// So before a collective enters the backend every rank compares its fingerprint with everyone's:
//   - board (every rank on this host): post the fingerprint on the progress board, wait until
//     every rank has posted collective n (spinning briefly, then yielding on MPI, then sleeping), and
//     compare. Nothing goes over the wire: a few atomic stores and loads, and the wait is the one
//     the collective would have spent waiting for the last rank anyway. The board keeps two
//     fingerprints per rank, enough because a rank can only post n + 2 after every rank posted
//     n + 1, i.e. finished comparing n. While waiting, a rank that is gone ends this one with the
//     diagnosis (Note [Dead ranks] in watchdog.cpp); one that never posts is the watchdog's.
//   - exchange (ranks on other hosts): one all-reduce (min) of six int64 on the backend, the
//     three fingerprint words and their negations, gives every rank the minimum and maximum of
//     each word; they differ exactly when some rank differs. Only then does an all-gather of the
//     fingerprints say who had what. It costs one small collective per call (a latency, not
//     bandwidth), cheaper than the all-gather every time and, unlike a hash, never fooled.
// Every rank sees the same fingerprints, so every rank throws the same DistError and skips the
// call: the group stays in step, and the caller may catch it and go on.
void ProcessGroup::check_call(Task& t) {
  if (check_mode_ == kCheckOff || (detail_ && check_mode_ == kCheckExchange)) {
    check_detail(t, {});  // DETAIL's exchange covers what the plain exchange would compare
    return;
  }
  Fingerprint mine;
  mine.call = t.packed & 0xFFFFFFFFull;  // op, dtype, reduction or root; the count in full below
  mine.numel = t.numel;
  if (t.code == OpCode::ReduceScatter) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the chunk sizes
    for (int64_t c : t.counts) h = (h ^ uint64_t(c)) * 1099511628211ull;
    mine.aux = h >> 2;  // 62 bits: negating it cannot overflow
  }
  std::vector<Fingerprint> fps(std::size_t(size_), mine);
  const char* op = op_code_name(t.code);
  if (check_mode_ == kCheckExchange) {
    Tensor v = empty({6}, DType::Int64);
    int64_t* p = v.data_ptr<int64_t>();
    p[0] = int64_t(mine.call), p[1] = mine.numel, p[2] = int64_t(mine.aux);
    for (int i = 0; i < 3; ++i) p[3 + i] = -p[i];
    run_all_reduce(v, ReduceOp::Min);
    if (p[0] == -p[3] && p[1] == -p[4] && p[2] == -p[5]) return;
    Tensor in = empty({3}, DType::Int64), all = empty({3 * int64_t(size_)}, DType::Int64);
    int64_t* q = in.data_ptr<int64_t>();
    q[0] = int64_t(mine.call), q[1] = mine.numel, q[2] = int64_t(mine.aux);
    run_all_gather(all, in);
    const int64_t* a = all.data_ptr<int64_t>();
    for (int r = 0; r < size_; ++r) fps[std::size_t(r)] = {uint64_t(a[3 * r]), a[3 * r + 1], uint64_t(a[3 * r + 2])};
    t.mismatch = true;
    throw DistError(op, mismatch_diagnosis(t.cseq, fps));
  }
  const uint64_t n = t.cseq;
  board_->post_fingerprint(n, mine, t.enqueued);
  std::vector<char> have(std::size_t(size_), 0);
  std::vector<uint64_t> arrived(std::size_t(size_), t.enqueued);  // when each rank issued it
  have[std::size_t(rank_)] = 1;
  int missing = size_ - 1;
  const auto t0 = Clock::now();
  auto next_look = t0 + std::chrono::milliseconds(10);
  // Yield only where the backend is fast enough for it to pay: MPI's small calls take ~1 us, so
  // a peer is usually about to post; Gloo's take hundreds of us over TCP, and yielding for ~2 ms
  // before sleeping held up the rank's own threads when it had one core (docs/distributed.md
  // "Where ranks run"): straight to sleeps after the pauses there.
  const uint32_t yield_rounds = backend() == "gloo" ? 64 : 2048;
  for (uint32_t round = 0;; ++round) {
    for (int q = 0; q < size_; ++q) {
      if (have[std::size_t(q)]) continue;
      const int got = board_->fingerprint(q, n, fps[std::size_t(q)], &arrived[std::size_t(q)]);
      if (got == 0) continue;
      if (got < 0) fps[std::size_t(q)] = mine, arrived[std::size_t(q)] = t.enqueued;  // cannot happen (see above)
      have[std::size_t(q)] = 1;
      --missing;
    }
    if (missing == 0) break;
    if (round < 64) {
      _mm_pause();
      continue;
    }
    if (round < yield_rounds) std::this_thread::yield();
    else std::this_thread::sleep_for(kPeerPoll);
    if ((round & 63) == 0 && Clock::now() >= next_look) {
      next_look = Clock::now() + std::chrono::milliseconds(10);
      if (watchdog_) {
        if (std::optional<std::string> line = watchdog_->dead_peer(in_flight(t))) {
          const InFlight f = in_flight(t);
          watchdog_->settle(f);  // Note [Settle before a dead-peer dump]
          watchdog_->fire_line(*line, &f);
        }
      } else if (Clock::now() - t0 > options_.timeout) {
        std::string who;
        for (int q = 0; q < size_; ++q)
          if (!have[std::size_t(q)]) who += (who.empty() ? "" : ", ") + std::to_string(q);
        throw DistError(op, "#" + std::to_string(n) + ": rank(s) " + who + " did not issue it within the timeout");
      }
    }
  }
  if (straggler_ticks_ > 0) report_straggler(t, arrived);
  std::string mismatch;
  for (int q = 0; q < size_ && mismatch.empty(); ++q)
    if (!(fps[std::size_t(q)] == mine)) mismatch = mismatch_diagnosis(n, fps);
  if (detail_) return check_detail(t, mismatch);  // the same verdict, told with shapes and labels
  if (!mismatch.empty()) {
    t.mismatch = true;
    throw DistError(op, mismatch);
  }
}

// Note [Stragglers]
// The board's fingerprints carry when each rank issued the collective (CallClock ticks, one
// clock for every process of this host), so once every rank has posted collective n each rank
// knows how far the last one to issue it was behind the others. A lag of at least
// Options::straggler_warn is reported on stderr, once: by the lowest-numbered rank other than the
// straggler. The lag is measured from the last of the others, so one slow rank among fast ones
// reads as its own delay. Only the board check sees it (ranks on other hosts share no clock).
void ProcessGroup::report_straggler(const Task& t, const std::vector<uint64_t>& arrived) const {
  int late = 0;
  for (int q = 1; q < size_; ++q)
    if (int64_t(arrived[std::size_t(q)] - arrived[std::size_t(late)]) > 0) late = q;
  const int reporter = late == 0 ? 1 : 0;
  if (rank_ != reporter) return;
  uint64_t others = arrived[std::size_t(reporter)];
  for (int q = 0; q < size_; ++q)
    if (q != late && int64_t(arrived[std::size_t(q)] - others) > 0) others = arrived[std::size_t(q)];
  const int64_t lag = int64_t(arrived[std::size_t(late)] - others);
  if (lag < int64_t(straggler_ticks_)) return;
  const double per_s = double(CallClock::ticks(std::chrono::seconds(1)));
  std::string label;
  if (std::optional<CallRecord> r = recorder_->get(t.seq)) label = r->label;
  std::fprintf(stderr,
               "trainbench: straggler: rank %d arrived %.1f s after the others at collective #%llu %s (label %s); "
               "threshold %.1f s, reported by rank %d\n",
               late, double(lag) / per_s, static_cast<unsigned long long>(t.cseq), op_code_name(t.code),
               label.empty() ? "none" : label.c_str(), std::chrono::duration<double>(options_.straggler_warn).count(),
               rank_);
  std::fflush(stderr);
}

// Note [Debug levels]
// TRAINBENCH_DIST_DEBUG, after PyTorch's TORCH_DISTRIBUTED_DEBUG. OFF: the fingerprint check of
// Note [Checking the calls] only. INFO: rank 0 logs each group (check mode, timeout, board) and
// DDP's buckets. DETAIL: before every collective the ranks all-gather a text fingerprint of it
// (op, collective number, dtype, every input shape -- not only the element count --, reduction
// or root, call-site label), 512 bytes per rank in a fixed-size buffer so that the exchange itself
// never mismatches, and compare them; ranks that differ get a DistError on every rank with each
// side's fingerprint, and nothing enters the backend. It costs one small all-gather per call (its
// price is measured by `trainbench bench --suite comm`, impl engine-detail) and runs after the
// board check, which still times the ranks (Note [Stragglers]) and whose verdict it refines.
namespace {
constexpr int kDetailBytes = 512;

std::string detail_fingerprint(OpCode code, uint64_t cseq, DType dtype, ReduceOp rop, int root,
                               const std::vector<const Tensor*>& inputs, const std::string& label) {
  std::ostringstream os;
  os << op_code_name(code) << " #" << cseq;
  if (code != OpCode::Barrier) {
    os << " " << core::name(dtype) << " shapes ";
    for (std::size_t i = 0; i < inputs.size(); ++i) os << (i ? ", " : "") << core::to_string(inputs[i]->sizes());
  }
  if (code == OpCode::AllReduce || code == OpCode::ReduceScatter) os << " " << reduce_op_name(rop);
  if (code == OpCode::Broadcast) os << " root " << root;
  os << " label " << (label.empty() ? "none" : "\"" + label + "\"");
  return os.str();
}
}  // namespace

void ProcessGroup::check_detail(Task& t, const std::string& board_mismatch) {
  // The shapes every rank must agree on: the inputs (and outputs where they do not depend on the
  // rank: a reduce_scatter over a list of chunks has this rank's chunk as output).
  std::vector<const Tensor*> shapes;
  switch (t.code) {
    case OpCode::AllGather:
      shapes.push_back(&t.b);
      if (t.list.empty()) shapes.push_back(&t.a);
      for (const Tensor& x : t.list) shapes.push_back(&x);
      break;
    case OpCode::ReduceScatter:
      if (t.list.empty()) shapes.push_back(&t.b), shapes.push_back(&t.a);
      for (const Tensor& x : t.list) shapes.push_back(&x);
      break;
    case OpCode::Barrier: break;
    default: shapes.push_back(&t.a);
  }
  std::string label;
  if (std::optional<CallRecord> r = recorder_->get(t.seq)) label = r->label;
  const std::string mine = detail_fingerprint(t.code, t.cseq, t.a.defined() ? t.a.dtype() : DType::Float32, t.rop,
                                              t.arg, shapes, label);
  Tensor in = empty({kDetailBytes / 8}, DType::Int64), all = empty({int64_t(size_) * kDetailBytes / 8}, DType::Int64);
  std::memset(in.data(), 0, kDetailBytes);
  std::memcpy(in.data(), mine.data(), std::min<std::size_t>(mine.size(), kDetailBytes - 1));
  run_all_gather(all, in);
  std::vector<std::string> fps(static_cast<std::size_t>(size_));
  const char* base = static_cast<const char*>(all.data());
  bool same = true;
  for (int r = 0; r < size_; ++r) {
    const char* p = base + std::size_t(r) * kDetailBytes;
    fps[std::size_t(r)].assign(p, strnlen(p, kDetailBytes));
    same = same && fps[std::size_t(r)] == fps[0];
  }
  const char* op = op_code_name(t.code);
  t.mismatch = same ? !board_mismatch.empty() : true;
  if (same) {
    if (!board_mismatch.empty()) throw DistError(op, board_mismatch);
    return;
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // ranks that agree, by lowest rank
  for (int r = 0; r < size_; ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == fps[std::size_t(r)]; });
    if (it == groups.end()) groups.push_back({fps[std::size_t(r)], {r}});
    else it->second.push_back(r);
  }
  std::ostringstream os;
  os << "TRAINBENCH_DIST_DEBUG=DETAIL: collective #" << t.cseq << " differs between ranks: ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& rs = groups[i].second;
    os << (i ? "; " : "") << (rs.size() == 1 ? "rank " : "ranks ");
    for (std::size_t j = 0; j < rs.size(); ++j) os << (j ? ", " : "") << rs[j];
    os << ": " << groups[i].first;
  }
  os << ". No rank entered the backend with it; every rank must issue the same collectives in the same order with "
        "the same op, dtype, shapes, reduction or root and call-site label";
  throw DistError(op, os.str());
}

void ProcessGroup::execute(Task& t) {
  const bool p2p = t.cseq == 0;
  std::exception_ptr err;
  {
    profiler::Scope prof(op_code_name(t.code), profiler::Category::Collective);  // the call's event in a profile
    if (prof.active()) {  // as the flight recorder's entry: call site, op, dtype, bytes, sequence numbers
      prof.label(t.label);
      prof.arg("op", op_code_name(t.code)), prof.arg("seq", int64_t(t.seq)),
          prof.arg("collective_seq", int64_t(t.cseq));
      if (t.a.defined())
        prof.arg("dtype", core::name(t.a.dtype())), prof.arg("bytes", t.numel * int64_t(t.a.itemsize()));
      prof.arg("world", size_);
    }
    const uint64_t started = CallClock::now();
    t.started.store(started, std::memory_order_relaxed);
    recorder_->started(t.seq, started);
    if (p2p) board_->p2p_entered(t.seq, t.packed);
    else board_->coll_entered(t.cseq, t.packed);
    std::string msg;
    try {
      if (!p2p && size_ > 1 && (check_mode_ != kCheckOff || detail_)) check_call(t);
      run_task(t);
    } catch (const std::exception& e) {
      err = std::current_exception();
      msg = e.what();
    } catch (...) {
      err = std::current_exception();
      msg = "unknown exception";
    }
    // A backend that fails because a peer died says so in its own words ("Connection closed by
    // peer"); the board says which rank, and the process ends like a hang (Note [Dead ranks]). The
    // peer's pid may take a moment to read as gone after its sockets close.
    if (err && !t.mismatch && watchdog_ && board_->enabled() && size_ > 1) {
      const auto until = Clock::now() + std::chrono::milliseconds(250);
      do {
        if (std::optional<std::string> line = watchdog_->dead_peer(in_flight(t))) {
          const InFlight f = in_flight(t);
          watchdog_->settle(f);  // Note [Settle before a dead-peer dump]
          watchdog_->fire_line(*line + "; the backend said: " + msg, &f);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } while (Clock::now() < until);
    }
    recorder_->ended(t.seq, CallClock::now(), !err, msg);
    if (p2p) board_->p2p_completed(t.seq);
    else board_->coll_completed(t.cseq);
    // Release the tensors now, not when the last Work handle goes.
    t.a = Tensor();
    t.b = Tensor();
    t.list.clear();
  }  // the call's profiler event closes before its Work completes: a caller that stops a Profile
     // right after wait() finds it (it was missing when the worker thread ran the call)
  t.work.finish(err);
}

void ProcessGroup::help(Work* w) {
  std::unique_lock lock(mu_);
  while (!w->done_.load(std::memory_order_acquire) && !running_ && !queue_.empty()) {
    running_ = std::move(queue_.front());  // moves, not copies: no reference-count traffic
    queue_.pop_front();
    Task& t = *running_;
    lock.unlock();
    execute(t);
    lock.lock();
    const std::shared_ptr<Task> done = std::move(running_);
    last_ran_inline_ = true;
    if (&t.work == w) break;
  }
  const bool wake = (!queue_.empty() || worker_parked_) && !running_;
  lock.unlock();
  if (wake) cv_.notify_all();
}

// Note [Waiting for the peers]
// A collective the worker starts before the other ranks have issued it (DDP's first bucket, while
// the peer is still in its backward) would sit in the backend's blocking call, which busy-polls
// (MPI's shared-memory transport) and takes a core from this rank's own computation and, on a
// shared host, from the very peer it waits for. So when every rank's progress-board slot is on
// this host, the worker first sleeps in kPeerPoll steps until every rank has issued the call
// (its coll_issued on the board), then enters the backend together with them. The wait is
// bounded (kPeerWaitMax): a rank later than that, or one that never issues the call, leaves the
// worker in the backend as before, so the watchdog's timeout and diagnosis are unchanged. Ranks
// on other hosts never join this host's board: then the worker does not wait. Calls run by
// their waiting thread (help) do not wait either: a synchronous caller has nothing to overlap.
void ProcessGroup::await_peers(uint64_t cseq) {
  if (size_ == 1 || !board_ || !board_->enabled()) return;
  if (!peers_local_) {
    for (int r = 0; r < size_; ++r) {
      const ProgressBoard::Slot s = board_->read(r);
      if (!s.joined || !s.same_host) return;
    }
    peers_local_ = true;
  }
  const auto deadline = Clock::now() + kPeerWaitMax;
  for (;;) {
    bool all = true;
    for (int r = 0; r < size_ && all; ++r)
      if (r != rank_ && board_->read(r).coll_issued < cseq) all = false;
    if (all || Clock::now() >= deadline) return;
    std::this_thread::sleep_for(kPeerPoll);
  }
}

void ProcessGroup::worker_loop() {
  profiler::set_thread_name("collectives");  // its lane in a profile's trace
  const uint64_t grace = CallClock::ticks(kGrace), deep_after = CallClock::ticks(kDeepSleepAfter);
  std::unique_lock lock(mu_);
  for (;;) {
    const uint64_t now = CallClock::now();
    if (!running_ && !queue_.empty()) {
      const uint64_t ready = queue_.front()->enqueued + grace;
      if (stopping_ || int64_t(now - ready) >= 0) {
        running_ = std::move(queue_.front());
        queue_.pop_front();
        Task& t = *running_;
        lock.unlock();
        if (t.cseq != 0) await_peers(t.cseq);
        execute(t);
        lock.lock();
        const std::shared_ptr<Task> done = std::move(running_);
        last_ran_inline_ = false;
      } else {
        cv_.wait_until(lock, CallClock::to_time(ready));
      }
      continue;
    }
    if (stopping_ && !running_) return;  // queue empty
    if (!running_ && int64_t(now - last_enqueue_) > int64_t(deep_after)) {
      worker_asleep_ = true;
      cv_.wait(lock);
      worker_asleep_ = false;
    } else if (running_) {
      // A waiter is running a call inline (help): nothing can start before it ends, and polling
      // meanwhile would preempt it every kPollPeriod -- with more ranks than cores (4 on 2), each
      // wake-up stalls the collective for every rank. help() notifies when it is done.
      worker_parked_ = true;
      cv_.wait(lock, [&] { return !running_ || stopping_; });
      worker_parked_ = false;
    } else {
      cv_.wait_for(lock, kPollPeriod);
    }
  }
}

// ---- the collectives: check, record, enqueue ----

WorkPtr ProcessGroup::all_reduce(Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", "the tensor", t);
  t.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::AllReduce;
  task->rop = op;
  task->a = t;
  task->numel = t.numel();
  return enqueue(std::move(task), reduce_op_name(op));
}

WorkPtr ProcessGroup::broadcast(Tensor& t, int root) {
  check_tensor("broadcast", "the tensor", t);
  if (root < 0 || root >= size_)
    throw DistError("broadcast",
                    "root " + std::to_string(root) + " is not a rank of this group of size " + std::to_string(size_));
  t.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::Broadcast;
  task->arg = root;
  task->a = t;
  task->numel = t.numel();
  return enqueue(std::move(task), "root=" + std::to_string(root));
}

WorkPtr ProcessGroup::all_gather(Tensor& out, const Tensor& in) {
  check_tensor("all_gather", "the input", in);
  check_tensor("all_gather", "the output", out);
  check_same_dtype("all_gather", out, "the output", in, "the input");
  if (out.numel() != int64_t(size_) * in.numel())
    throw DistError("all_gather", "the output " + core::to_string(out.sizes()) + " has " + std::to_string(out.numel()) +
                                      " elements; world size " + std::to_string(size_) + " x input " +
                                      core::to_string(in.sizes()) + " needs " +
                                      std::to_string(int64_t(size_) * in.numel()));
  if (out.numel() > 0 && in.numel() > 0 && out.shares_storage(in))
    throw DistError("all_gather", "the output and the input share storage");
  out.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::AllGather;
  task->a = out;
  task->b = in;
  task->numel = in.numel();
  return enqueue(std::move(task), "tensor");
}

WorkPtr ProcessGroup::all_gather(std::vector<Tensor>& outs, const Tensor& in) {
  check_tensor("all_gather", "the input", in);
  if (int(outs.size()) != size_)
    throw DistError("all_gather",
                    "got " + std::to_string(outs.size()) + " output tensors for world size " + std::to_string(size_));
  for (std::size_t r = 0; r < outs.size(); ++r) {
    const std::string name = "output " + std::to_string(r);
    check_tensor("all_gather", name.c_str(), outs[r]);
    check_same_dtype("all_gather", outs[r], name.c_str(), in, "the input");
    if (outs[r].numel() != in.numel())
      throw DistError("all_gather", name + " " + core::to_string(outs[r].sizes()) + " has " +
                                        std::to_string(outs[r].numel()) + " elements, the input " +
                                        core::to_string(in.sizes()) + " " + std::to_string(in.numel()));
  }
  for (Tensor& o : outs) o.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::AllGather;
  task->a = outs[0];  // for the dtype
  task->b = in;
  task->list = outs;
  task->numel = in.numel();
  return enqueue(std::move(task), "list");
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor("reduce_scatter", "the input", in);
  check_tensor("reduce_scatter", "the output", out);
  check_same_dtype("reduce_scatter", out, "the output", in, "the input");
  if (in.numel() != int64_t(size_) * out.numel())
    throw DistError("reduce_scatter", "the input " + core::to_string(in.sizes()) + " has " +
                                          std::to_string(in.numel()) + " elements; world size " +
                                          std::to_string(size_) + " x output " + core::to_string(out.sizes()) +
                                          " needs " + std::to_string(int64_t(size_) * out.numel()) +
                                          " (for chunks of different sizes pass a list of inputs)");
  if (out.numel() > 0 && out.shares_storage(in))
    throw DistError("reduce_scatter", "the output and the input share storage");
  out.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::ReduceScatter;
  task->rop = op;
  task->a = out;
  task->b = in;
  task->counts.assign(size_, out.numel());
  task->numel = in.numel();
  return enqueue(std::move(task), std::string(reduce_op_name(op)) + " tensor");
}

WorkPtr ProcessGroup::reduce_scatter(Tensor& out, const std::vector<Tensor>& ins, ReduceOp op) {
  check_tensor("reduce_scatter", "the output", out);
  if (int(ins.size()) != size_)
    throw DistError("reduce_scatter",
                    "got " + std::to_string(ins.size()) + " input tensors for world size " + std::to_string(size_));
  auto task = std::make_shared<Task>();
  for (std::size_t r = 0; r < ins.size(); ++r) {
    const std::string name = "input " + std::to_string(r);
    check_tensor("reduce_scatter", name.c_str(), ins[r]);
    check_same_dtype("reduce_scatter", out, "the output", ins[r], name.c_str());
    if (ins[r].numel() > 0 && out.numel() > 0 && out.shares_storage(ins[r]))
      throw DistError("reduce_scatter", "the output and " + name + " share storage");
    task->counts.push_back(ins[r].numel());
    task->numel += ins[r].numel();
  }
  if (ins[rank_].numel() != out.numel())
    throw DistError("reduce_scatter", "input " + std::to_string(rank_) + " (this rank's chunk) " +
                                          core::to_string(ins[rank_].sizes()) + " has " +
                                          std::to_string(ins[rank_].numel()) + " elements but the output " +
                                          core::to_string(out.sizes()) + " has " + std::to_string(out.numel()));
  out.bump_version();
  task->code = OpCode::ReduceScatter;
  task->rop = op;
  task->a = out;
  task->list = ins;
  return enqueue(std::move(task), std::string(reduce_op_name(op)) + " list");
}

WorkPtr ProcessGroup::barrier() {
  auto task = std::make_shared<Task>();
  task->code = OpCode::Barrier;
  return enqueue(std::move(task), "");
}

WorkPtr ProcessGroup::send(const Tensor& t, int dst, int tag) {
  check_tensor("send", "the tensor", t);
  if (tag < 0) throw DistError("send", "tag " + std::to_string(tag) + " is negative");
  if (dst < 0 || dst >= size_ || dst == rank_)
    throw DistError("send", "destination rank " + std::to_string(dst) + " is not another rank of this group (rank " +
                                std::to_string(rank_) + " of " + std::to_string(size_) + ")");
  auto task = std::make_shared<Task>();
  task->code = OpCode::Send;
  task->arg = dst;
  task->tag = tag;
  task->a = t;
  task->numel = t.numel();
  return enqueue(std::move(task), "peer=" + std::to_string(dst) + " tag=" + std::to_string(tag));
}

WorkPtr ProcessGroup::recv(Tensor& t, int src, int tag) {
  check_tensor("recv", "the tensor", t);
  if (tag < 0) throw DistError("recv", "tag " + std::to_string(tag) + " is negative");
  if (src < 0 || src >= size_ || src == rank_)
    throw DistError("recv", "source rank " + std::to_string(src) + " is not another rank of this group (rank " +
                                std::to_string(rank_) + " of " + std::to_string(size_) + ")");
  t.bump_version();
  auto task = std::make_shared<Task>();
  task->code = OpCode::Recv;
  task->arg = src;
  task->tag = tag;
  task->a = t;
  task->numel = t.numel();
  return enqueue(std::move(task), "peer=" + std::to_string(src) + " tag=" + std::to_string(tag));
}

// ---- where this process sits ----

WorldInfo world_from_env() {
  const auto num = [](const char* var, const std::string& s) { return int(core::parse_int64(var, s, 0, 1 << 24)); };
  struct Source {
    const char *rank, *size, *local;
  };
  const Source sources[] = {{"TRAINBENCH_RANK", "TRAINBENCH_WORLD_SIZE", "TRAINBENCH_LOCAL_RANK"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                            {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
                            {"RANK", "WORLD_SIZE", "LOCAL_RANK"}};
  WorldInfo w;
  for (const Source& s : sources) {
    const std::string r = env_or(s.rank), n = env_or(s.size);
    if (r.empty() && n.empty()) continue;
    if (r.empty() || n.empty())
      throw DistError("world_from_env", std::string(r.empty() ? s.rank : s.size) + " is not set but " +
                                            (r.empty() ? s.size : s.rank) + " is");
    w.rank = num(s.rank, r);
    w.size = num(s.size, n);
    const std::string l = env_or(s.local);
    w.local_rank = l.empty() ? 0 : num(s.local, l);
    w.source = std::string(s.rank) + "/" + s.size;
    if (w.size < 1 || w.rank >= w.size)
      throw DistError("world_from_env", w.source + " give rank " + r + " of world size " + n);
    break;
  }
  if (w.source.empty()) w.source = "none (a single process)";
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE"})
    if (const std::string v = env_or(var); !v.empty()) {
      w.local_size = int(core::parse_int64(var, v, 1, 1 << 24));
      break;
    }
  w.nodes = int(core::env_int64("SLURM_STEP_NUM_NODES", 0, 1, 1 << 24));
  w.job_id = env_or("PMIX_NAMESPACE", env_or("OMPI_MCA_ess_base_jobid"));
  if (w.job_id.empty() && !env_or("SLURM_JOB_ID").empty())
    w.job_id = "slurm-" + env_or("SLURM_JOB_ID") + "." + env_or("SLURM_STEP_ID", "0");
  if (const std::string run = env_or("TORCHELASTIC_RUN_ID"); w.job_id.empty() && run != "none") w.job_id = run;
  return w;
}

std::string launch_id_from_env(const char* override_var) {
  if (const std::string id = env_or(override_var); !id.empty()) return id;
  const std::string id = world_from_env().job_id;
  return id.empty() ? "local" : id;
}

}  // namespace tb::dist
