// The watchdog: one thread per process group that notices a call in flight longer than the
// group's timeout, writes the flight recorder as JSON to <run_dir>/flight_recorder_rank<R>.json,
// prints one line naming the rank that never arrived (read from the progress board) and ends the
// process with exit code 3. No test and no harness run may hang (Note [Watchdog]).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/core/dtype.h"

namespace tb::dist {

class FlightRecorder;

// Exit status of a process ended by the watchdog.
inline constexpr int kWatchdogExitCode = 3;

enum class OpCode : uint8_t { None, AllReduce, Broadcast, AllGather, ReduceScatter, Barrier, Send, Recv };
const char* op_code_name(OpCode op);

// What a rank is doing, packed into one 64-bit word so that it is published with one atomic
// store: op (8 bits), dtype (8), reduction or root/peer (16), element count (32, saturated).
uint64_t pack_call(OpCode op, core::DType dtype, int arg, int64_t numel);
struct CallKey {
  OpCode op = OpCode::None;
  core::DType dtype = core::DType::Float32;
  int arg = 0;
  int64_t numel = 0;
};
CallKey unpack_call(uint64_t packed);

// Note [Progress board]
// Ranks cannot tell each other anything through a backend that is stuck, so each group keeps a
// small shared file, <dir>/progress_<job>_<backend>_<n>.bin (n: the process's count of groups made
// on that backend, the same on every rank because every rank creates its groups in the same order;
// job: the launcher's job id, so a board of an earlier job is never read), mmap'd by every rank of
// the group on this host. Each rank owns one 128-byte slot and writes it with atomic stores when a
// call is issued, when it starts and when it ends: a few nanoseconds, nothing on the wire. On a
// timeout the watchdog reads everyone's slot and says which rank never arrived at the collective.
// Collectives are numbered on their own (collective_seq): send/recv involve only two ranks, so
// the group's issue order (Work::seq) can differ between ranks while collectives still line up.
// A rank on another host (slot written from another hostname, or never written because the run
// dir is not shared) is reported as "progress unknown".
class ProgressBoard {
 public:
  struct Slot {  // a plain copy of a rank's slot
    bool joined = false;          // the rank created the group (magic written)
    bool same_host = false;
    std::string host;
    int64_t pid = 0;
    uint64_t coll_issued = 0, coll_entered = 0, coll_completed = 0, coll_entered_call = 0;
    uint64_t p2p_entered = 0, p2p_completed = 0, p2p_entered_call = 0;  // group seq of the last send/recv
  };
  // Creates or opens the board file and writes this rank's identity into its slot. A failure to
  // create it (read-only directory) leaves the board disabled: diagnoses then say "unknown".
  ProgressBoard(const std::string& path, int rank, int size);
  ~ProgressBoard();
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  bool enabled() const { return base_ != nullptr; }
  const std::string& path() const { return path_; }
  void coll_issued(uint64_t cseq);
  void coll_entered(uint64_t cseq, uint64_t call);
  void coll_completed(uint64_t cseq);
  void p2p_entered(uint64_t seq, uint64_t call);
  void p2p_completed(uint64_t seq);
  Slot read(int rank) const;
  void remove_file();  // at group destruction (the mapping stays valid for this process)

 private:
  std::string path_;
  int rank_, size_;
  unsigned char* base_ = nullptr;
  std::size_t bytes_ = 0;
  uint64_t* field(int rank, int i) const;
};

// What the group reports as its oldest unfinished call.
struct InFlight {
  uint64_t seq = 0, collective_seq = 0;   // collective_seq 0: a send/recv
  uint64_t call = 0;                      // pack_call
  int peer = -1;                          // send/recv: the other rank
  std::string what;                       // "all_reduce #7 (float32 [1024], mpi)"
  std::chrono::steady_clock::time_point since;
};

class Watchdog {
 public:
  // `probe` runs on the watchdog thread and returns the group's oldest call that has started and
  // not finished, if any. The watchdog checks every min(timeout / 10, 100 ms).
  Watchdog(std::function<std::optional<InFlight>()> probe, const FlightRecorder& recorder, const ProgressBoard& board,
           int rank, int size, std::chrono::milliseconds timeout, std::string run_dir);
  ~Watchdog();  // stops and joins the thread

  // The one-line diagnosis for `f` (what fire() prints, without the dump path); public for tests.
  std::string diagnose(const InFlight& f, double elapsed_s) const;

 private:
  std::function<std::optional<InFlight>()> probe_;
  const FlightRecorder& recorder_;
  const ProgressBoard& board_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::string run_dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  void loop();
  [[noreturn]] void fire(const InFlight& f, double elapsed_s);
};

}  // namespace tb::dist
