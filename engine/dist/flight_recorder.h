// The flight recorder: the last N calls of one process group (sequence number, op, shapes, dtype,
// backend, enqueue/start/end times, state) in a bounded ring buffer, dumped as JSON by the
// watchdog when a collective hangs, so the dump says what every rank was doing (PyTorch's
// TORCH_NCCL_TRACE_BUFFER_SIZE flight recorder, in spirit).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"

namespace tb::dist {

// Note [Call clock]
// The recorder stamps every call three times (issued, started, ended). steady_clock::now() costs
// ~60 ns on this VM, a third of an 8-byte all_reduce's whole budget, so the stamps are raw TSC
// ticks (~20 ns; the TSC is invariant on every x86-64 this runs on: constant_tsc, nonstop_tsc),
// turned into steady_clock times only when read, with a rate measured against steady_clock over
// at least 2 ms the first time a group starts. Elsewhere the ticks are steady_clock nanoseconds.
struct CallClock {
  static uint64_t now();
  static void calibrate();  // idempotent; blocks up to 2 ms the first time
  static std::chrono::steady_clock::time_point to_time(uint64_t ticks);
  static uint64_t ticks(std::chrono::nanoseconds d);  // a duration in ticks
};

enum class CallState : uint8_t { Queued, Started, Completed, Failed };
const char* call_state_name(CallState s);

struct CallRecord {
  uint64_t seq = 0;             // the group's issue order (Work::seq)
  uint64_t collective_seq = 0;  // among collectives only; 0 for send/recv (Note [Progress board])
  std::string op;               // "all_reduce", "recv", ...
  std::string detail;           // "sum", "root=1", "peer=0 tag=3", ...
  std::string label;            // the call site (call_site.h); "" when none was set
  core::DType dtype = core::DType::Float32;
  std::vector<core::Shape> shapes;  // inputs then outputs, as passed
  std::chrono::steady_clock::time_point enqueued, started, ended;
  CallState state = CallState::Queued;
  std::string error;  // the failure's message
};

// The ring's slot for one call. Written in place (its strings and shapes keep their capacity, so a
// warm recorder allocates nothing); the start/end times and the state are atomics so that the
// thread running the call updates them without the lock (Note [Recorder cost]).
struct RecorderSlot {
  std::atomic<uint64_t> seq{0};
  uint64_t collective_seq = 0;
  const char* op = "";  // a static name
  std::string detail, error, label;
  core::DType dtype = core::DType::Float32;
  std::vector<core::Shape> shapes;
  uint64_t enqueued = 0;                       // CallClock ticks
  std::atomic<uint64_t> started{0}, ended{0};  // CallClock ticks, 0: not yet
  std::atomic<uint8_t> state{0};               // CallState
};

class FlightRecorder {
 public:
  FlightRecorder(std::size_t capacity, std::string backend, int rank, int size);

  // Records call `seq`: `fill(RecorderSlot&)` writes op, detail, label, dtype, shapes (the slot's old
  // contents are cleared first, capacity kept). Under the recorder's lock.
  template <typename F>
  void record(uint64_t seq, uint64_t collective_seq, uint64_t enqueued, F&& fill) {
    std::lock_guard lock(mu_);
    RecorderSlot& r = ring_[seq % ring_.size()];
    r.seq.store(seq, std::memory_order_relaxed);
    r.collective_seq = collective_seq;
    r.detail.clear();
    r.error.clear();
    r.label.clear();
    r.enqueued = enqueued;
    r.started.store(0, std::memory_order_relaxed);
    r.ended.store(0, std::memory_order_relaxed);
    r.state.store(uint8_t(CallState::Queued), std::memory_order_relaxed);
    fill(r);
    if (seq > newest_) newest_ = seq;
  }
  // Lock-free; an entry that has already left the ring is ignored.
  void started(uint64_t seq, uint64_t ticks);
  // Lock-free when ok; a failure takes the lock to store its message.
  void ended(uint64_t seq, uint64_t ticks, bool ok, const std::string& error = {});

  std::size_t capacity() const { return ring_.size(); }
  // The entries still held, oldest first (copies; safe while calls continue).
  std::vector<CallRecord> entries() const;
  std::optional<CallRecord> get(uint64_t seq) const;  // nullopt once it has left the ring
  // {"backend", "rank", "size", "capacity", "dropped", "entries": [{seq, collective_seq, op,
  // detail, dtype, shapes, state, enqueued_us, started_us, ended_us, duration_us, error[, label]}]}
  // ("label" only when the call had one); times
  // in microseconds since the recorder was made (-1: not yet), plus "wall_clock_origin_unix_us"
  // (the system clock at that moment) to line dumps of several ranks up.
  nlohmann::json to_json() const;

 private:
  std::string backend_;
  int rank_, size_;
  std::chrono::steady_clock::time_point origin_;
  std::chrono::system_clock::time_point wall_origin_;
  mutable std::mutex mu_;
  std::vector<RecorderSlot> ring_;  // slot seq % capacity
  uint64_t newest_ = 0;             // highest seq recorded
  CallRecord copy(const RecorderSlot& r) const;
};

}  // namespace tb::dist
