#include "engine/dist/flight_recorder.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tb::dist {

// Note [Recorder cost]
// Every call is recorded, so recording sits on the 8-byte all_reduce's path (~0.5 us in raw MPI
// on one host). record() takes one uncontended lock and copies into a slot whose buffers are
// already the right size after the first lap of the ring; started/ended are relaxed atomic stores.
// Readers (dumps) take the lock and may see a call's times a moment stale, which a dump tolerates.

namespace {
using std::chrono::steady_clock;
// The calibration: one (ticks, time) pair at static initialisation and the rate, fixed by calibrate().
struct Calibration {
  uint64_t ticks0;
  steady_clock::time_point time0;
  std::atomic<double> ticks_per_ns{0};
  std::once_flag once;
};
Calibration& calibration() {
  static Calibration c{CallClock::now(), steady_clock::now()};
  return c;
}
[[maybe_unused]] const bool kOriginTaken = (calibration(), true);  // the origin as early as possible
}  // namespace

uint64_t CallClock::now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return uint64_t(steady_clock::now().time_since_epoch().count());
#endif
}

void CallClock::calibrate() {
  Calibration& c = calibration();
  std::call_once(c.once, [&] {
#if defined(__x86_64__)
    while (steady_clock::now() - c.time0 < std::chrono::milliseconds(2)) std::this_thread::yield();
    const uint64_t t1 = now();
    const auto time1 = steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(time1 - c.time0).count();
    c.ticks_per_ns.store(double(t1 - c.ticks0) / ns);
#else
    c.ticks_per_ns.store(1.0);
#endif
  });
}

steady_clock::time_point CallClock::to_time(uint64_t ticks) {
  calibrate();
  const Calibration& c = calibration();
  const double ns = (double(int64_t(ticks - c.ticks0))) / c.ticks_per_ns.load(std::memory_order_relaxed);
  return c.time0 + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double, std::nano>(ns));
}

uint64_t CallClock::ticks(std::chrono::nanoseconds d) {
  calibrate();
  return uint64_t(double(d.count()) * calibration().ticks_per_ns.load(std::memory_order_relaxed));
}

const char* call_state_name(CallState s) {
  switch (s) {
    case CallState::Queued: return "queued";
    case CallState::Started: return "started";
    case CallState::Completed: return "completed";
    case CallState::Failed: return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(std::size_t capacity, std::string backend, int rank, int size)
    : backend_(std::move(backend)),
      rank_(rank),
      size_(size),
      origin_(std::chrono::steady_clock::now()),
      wall_origin_(std::chrono::system_clock::now()),
      ring_(std::max<std::size_t>(capacity, 1)) {}

void FlightRecorder::started(uint64_t seq, uint64_t ticks) {
  RecorderSlot& r = ring_[seq % ring_.size()];
  if (r.seq.load(std::memory_order_relaxed) != seq) return;
  r.started.store(ticks, std::memory_order_relaxed);
  r.state.store(uint8_t(CallState::Started), std::memory_order_release);
}

void FlightRecorder::ended(uint64_t seq, uint64_t ticks, bool ok, const std::string& error) {
  RecorderSlot& r = ring_[seq % ring_.size()];
  if (r.seq.load(std::memory_order_relaxed) != seq) return;
  if (!ok) {
    std::lock_guard lock(mu_);
    if (r.seq.load(std::memory_order_relaxed) == seq) r.error = error;
  }
  r.ended.store(ticks, std::memory_order_relaxed);
  r.state.store(uint8_t(ok ? CallState::Completed : CallState::Failed), std::memory_order_release);
}

CallRecord FlightRecorder::copy(const RecorderSlot& r) const {
  CallRecord c;
  c.state = CallState(r.state.load(std::memory_order_acquire));
  c.seq = r.seq.load(std::memory_order_relaxed);
  c.collective_seq = r.collective_seq;
  c.op = r.op;
  c.detail = r.detail;
  c.error = r.error;
  c.label = r.label;
  c.dtype = r.dtype;
  c.shapes = r.shapes;
  c.enqueued = CallClock::to_time(r.enqueued);
  if (uint64_t s = r.started.load(std::memory_order_relaxed)) c.started = CallClock::to_time(s);
  if (uint64_t e = r.ended.load(std::memory_order_relaxed)) c.ended = CallClock::to_time(e);
  return c;
}

std::optional<CallRecord> FlightRecorder::get(uint64_t seq) const {
  std::lock_guard lock(mu_);
  const RecorderSlot& r = ring_[seq % ring_.size()];
  if (r.seq.load(std::memory_order_relaxed) != seq) return std::nullopt;
  return copy(r);
}

std::vector<CallRecord> FlightRecorder::entries() const {
  std::lock_guard lock(mu_);
  std::vector<CallRecord> out;
  const uint64_t n = ring_.size();
  const uint64_t first = newest_ >= n ? newest_ - n + 1 : 1;
  for (uint64_t s = first; s <= newest_; ++s) {
    const RecorderSlot& r = ring_[s % n];
    if (r.seq.load(std::memory_order_relaxed) == s) out.push_back(copy(r));
  }
  return out;
}

nlohmann::json FlightRecorder::to_json() const {
  const auto us = [&](steady_clock::time_point t) -> double {
    if (t == steady_clock::time_point{}) return -1;
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  };
  nlohmann::json list = nlohmann::json::array();
  uint64_t newest = 0;
  for (const CallRecord& r : entries()) {
    newest = r.seq;
    nlohmann::json shapes = nlohmann::json::array();
    for (const core::Shape& s : r.shapes) shapes.push_back(s);
    const double start = us(r.started), end = us(r.ended);
    list.push_back({{"seq", r.seq},
                    {"collective_seq", r.collective_seq},
                    {"op", r.op},
                    {"detail", r.detail},
                    {"dtype", core::name(r.dtype)},
                    {"shapes", shapes},
                    {"state", call_state_name(r.state)},
                    {"enqueued_us", us(r.enqueued)},
                    {"started_us", start},
                    {"ended_us", end},
                    {"duration_us", start >= 0 && end >= 0 ? end - start : -1},
                    {"error", r.error}});
    if (!r.label.empty()) list.back()["label"] = r.label;
  }
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(wall_origin_.time_since_epoch()).count();
  return {{"backend", backend_},
          {"rank", rank_},
          {"size", size_},
          {"capacity", ring_.size()},
          {"dropped", newest > list.size() ? newest - list.size() : 0},
          {"wall_clock_origin_unix_us", wall_us},
          {"entries", std::move(list)}};
}

}  // namespace tb::dist
