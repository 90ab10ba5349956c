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
#include <vector>

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

// Note [Call fingerprints]
// What every rank must agree on before a collective enters the backend: the op, dtype and
// reduction or root (`call`, pack_call with a zero count), the element count in full (`numel`:
// all_reduce and broadcast the tensor's, all_gather the input's, reduce_scatter the whole
// input's) and, for reduce_scatter, a hash of the chunk sizes (`aux`, 62 bits; 0 otherwise).
// A backend given different counts on different ranks writes past buffers (MPI) or aborts in its
// transport thread (Gloo), so ProcessGroup compares the fingerprints first (Note [Checking the
// calls] in process_group.cpp).
struct Fingerprint {
  uint64_t call = 0;
  int64_t numel = 0;
  uint64_t aux = 0;
  bool operator==(const Fingerprint&) const = default;
};
// "all_reduce (float32, 4096 elements, sum)", "broadcast (int64, 7 elements, root 1)", "barrier".
std::string describe_call(const Fingerprint& f);
// The error text when rank fingerprints differ for collective #cseq (fps[r]: rank r's), grouping
// ranks that agree: "collective #5 differs between ranks: rank 0: all_reduce (float32, 4096
// elements, sum); rank 1: all_reduce (float32, 4093 elements, sum); ...".
std::string mismatch_diagnosis(uint64_t cseq, const std::vector<Fingerprint>& fps);

// True unless `pid` is gone or a zombie (a process that ended but is not reaped yet).
bool process_alive(int64_t pid);

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
// Each slot also holds the rank's state (Active; Left: it destroyed the group; Exiting: its
// process is ending -- exit() or a return from main -- with the group still alive, set by an
// atexit hook; Failed: its watchdog is ending it after a diagnosis of its own) and the fingerprints of its last two collectives (Note [Call fingerprints]).
class ProgressBoard {
 public:
  enum class State : uint64_t { Active = 0, Left = 1, Exiting = 2, Failed = 3 /* its watchdog ended it */ };
  struct Slot {           // a plain copy of a rank's slot
    bool joined = false;  // the rank created the group (magic written)
    bool same_host = false;
    std::string host;
    int64_t pid = 0;
    State state = State::Active;
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
  void set_state(State s) const;       // writes this rank's slot (shared memory, not this object)
  static void set_state_all(State s);  // every live board of this process
  // Publishes this rank's fingerprint of collective `cseq` (a ring of two per rank: a rank can be
  // at most one collective ahead of a rank still comparing, since it compares too).
  // `issued`: when this rank issued it (CallClock ticks; Note [Stragglers] in process_group.cpp).
  void post_fingerprint(uint64_t cseq, const Fingerprint& f, uint64_t issued = 0);
  // Rank `rank`'s fingerprint of `cseq`: 1 and `out` (and `issued`, if given) set, 0 when it has
  // not posted it yet, -1 when it has already overwritten it.
  int fingerprint(int rank, uint64_t cseq, Fingerprint& out, uint64_t* issued = nullptr) const;
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
  uint64_t seq = 0, collective_seq = 0;  // collective_seq 0: a send/recv
  uint64_t call = 0;                     // pack_call
  int peer = -1;                         // send/recv: the other rank
  std::string what;                      // "all_reduce #7 (float32 [1024], mpi)"
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
  // Note [Dead ranks]: the diagnosis when a rank on this host that `f` (or, with `any`, any call)
  // needs has ended (its pid gone or a zombie, or its atexit hook ran) or destroyed the group
  // before reaching it; nullopt when none has.
  std::optional<std::string> dead_peer(const std::optional<InFlight>& f, bool any = false) const;
  // Before a dead-peer dump: waits briefly for the other peers to settle (Note [Settle before a
  // dead-peer dump] in watchdog.cpp).
  void settle(const InFlight& f) const;
  // Writes the dump, prints "trainbench: watchdog: <line>; dump: <path>" and ends the process
  // with kWatchdogExitCode (used for hangs, dead peers and backend failures caused by them).
  [[noreturn]] void fire_line(const std::string& line, const InFlight* f);
  // For the SIGTERM check (Note [Dead ranks]): this group's oldest unfinished call.
  std::optional<InFlight> probe() const { return probe_(); }

 private:
  std::function<std::optional<InFlight>()> probe_;
  const FlightRecorder& recorder_;
  const ProgressBoard& board_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  std::string run_dir_;
  int stop_fd_ = -1;  // eventfd: the destructor's wake-up
  std::thread thread_;
  void loop();
  [[noreturn]] void fire(const InFlight& f, double elapsed_s);
};

}  // namespace tb::dist
