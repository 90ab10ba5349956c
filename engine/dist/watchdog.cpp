#include "engine/dist/watchdog.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/dist/flight_recorder.h"
#include "engine/dist/process_group.h"

namespace tb::dist {

const char* op_code_name(OpCode op) {
  switch (op) {
    case OpCode::None: return "none";
    case OpCode::AllReduce: return "all_reduce";
    case OpCode::Broadcast: return "broadcast";
    case OpCode::AllGather: return "all_gather";
    case OpCode::ReduceScatter: return "reduce_scatter";
    case OpCode::Barrier: return "barrier";
    case OpCode::Send: return "send";
    case OpCode::Recv: return "recv";
  }
  return "?";
}

uint64_t pack_call(OpCode op, core::DType dtype, int arg, int64_t numel) {
  const uint64_t n = uint64_t(std::clamp<int64_t>(numel, 0, 0xFFFFFFFF));
  return uint64_t(op) | uint64_t(dtype) << 8 | uint64_t(uint16_t(arg)) << 16 | n << 32;
}

CallKey unpack_call(uint64_t p) {
  return {OpCode(p & 0xFF), core::DType((p >> 8) & 0xFF), int(int16_t(uint16_t((p >> 16) & 0xFFFF))), int64_t(p >> 32)};
}

namespace {

constexpr uint64_t kMagic = 0x3164726f62627474ull;  // "ttbboard1" (little-endian, truncated)
constexpr int kSlotWords = 16;                        // 128 bytes: two cache lines
enum Field { kMagicF, kPid, kCollIssued, kCollEntered, kCollEnteredCall, kCollCompleted, kP2pEntered,
             kP2pEnteredCall, kP2pCompleted, kHost /* 7 words of hostname */ };
constexpr int kHostBytes = (kSlotWords - kHost) * 8;

std::string this_host() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return std::string(buf).substr(0, kHostBytes - 1);
}

std::string describe(uint64_t packed) {
  const CallKey k = unpack_call(packed);
  std::ostringstream os;
  os << op_code_name(k.op);
  return os.str();
}

// "all_reduce (float32, 1024 elements, sum)": the full key, for mismatch reports.
std::string describe_full(uint64_t packed) {
  const CallKey k = unpack_call(packed);
  std::ostringstream os;
  os << op_code_name(k.op);
  if (k.op == OpCode::None || k.op == OpCode::Barrier) return os.str();
  os << " (" << core::name(k.dtype) << ", " << k.numel << " elements";
  if (k.op == OpCode::AllReduce || k.op == OpCode::ReduceScatter) os << ", " << reduce_op_name(ReduceOp(k.arg));
  if (k.op == OpCode::Broadcast) os << ", root " << k.arg;
  if (k.op == OpCode::Send || k.op == OpCode::Recv) os << ", peer " << k.arg;
  os << ")";
  return os.str();
}

}  // namespace

// ---- progress board ----

ProgressBoard::ProgressBoard(const std::string& path, int rank, int size) : path_(path), rank_(rank), size_(size) {
  bytes_ = std::size_t(size) * kSlotWords * 8;
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // Every rank sizes the file the same; ftruncate to the same length is idempotent and the
  // fresh bytes read as zero, so the order in which ranks arrive does not matter.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (std::size_t(st.st_size) < bytes_ && ::ftruncate(fd, off_t(bytes_)) != 0)) {
    ::close(fd);
    return;
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return;
  base_ = static_cast<unsigned char*>(p);
  for (int i = 1; i < kSlotWords; ++i) std::atomic_ref<uint64_t>(*field(rank, i)).store(0, std::memory_order_relaxed);
  const std::string host = this_host();
  std::memcpy(field(rank, kHost), host.data(), host.size());
  std::atomic_ref<uint64_t>(*field(rank, kPid)).store(uint64_t(::getpid()), std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(*field(rank, kMagicF)).store(kMagic, std::memory_order_release);
}

ProgressBoard::~ProgressBoard() {
  if (base_) ::munmap(base_, bytes_);
}

uint64_t* ProgressBoard::field(int rank, int i) const {
  return reinterpret_cast<uint64_t*>(base_ + (std::size_t(rank) * kSlotWords + i) * 8);
}

#define TB_BOARD_STORE(F, V) \
  if (base_) std::atomic_ref<uint64_t>(*field(rank_, F)).store(V, std::memory_order_release)
void ProgressBoard::coll_issued(uint64_t cseq) { TB_BOARD_STORE(kCollIssued, cseq); }
void ProgressBoard::coll_entered(uint64_t cseq, uint64_t call) {
  TB_BOARD_STORE(kCollEnteredCall, call);
  TB_BOARD_STORE(kCollEntered, cseq);
}
void ProgressBoard::coll_completed(uint64_t cseq) { TB_BOARD_STORE(kCollCompleted, cseq); }
void ProgressBoard::p2p_entered(uint64_t seq, uint64_t call) {
  TB_BOARD_STORE(kP2pEnteredCall, call);
  TB_BOARD_STORE(kP2pEntered, seq);
}
void ProgressBoard::p2p_completed(uint64_t seq) { TB_BOARD_STORE(kP2pCompleted, seq); }
#undef TB_BOARD_STORE

ProgressBoard::Slot ProgressBoard::read(int rank) const {
  Slot s;
  if (!base_ || rank < 0 || rank >= size_) return s;
  const auto load = [&](int f) { return std::atomic_ref<uint64_t>(*field(rank, f)).load(std::memory_order_acquire); };
  s.joined = load(kMagicF) == kMagic;
  if (!s.joined) return s;
  char host[kHostBytes + 1] = {};
  std::memcpy(host, field(rank, kHost), kHostBytes);
  s.host = host;
  s.same_host = s.host == this_host();
  s.pid = int64_t(load(kPid));
  s.coll_issued = load(kCollIssued);
  s.coll_entered = load(kCollEntered);
  s.coll_entered_call = load(kCollEnteredCall);
  s.coll_completed = load(kCollCompleted);
  s.p2p_entered = load(kP2pEntered);
  s.p2p_entered_call = load(kP2pEnteredCall);
  s.p2p_completed = load(kP2pCompleted);
  return s;
}

void ProgressBoard::remove_file() {
  if (base_) ::unlink(path_.c_str());
}

// ---- watchdog ----

// Note [Watchdog]
// The watchdog thread wakes every min(timeout / 10, 100 ms) and asks its group for the oldest
// call that has started and not finished. Past the timeout it cannot cancel the call (MPI and
// Gloo have no way to abandon a blocking collective), so it reports and ends the process: the
// dump, one line on stderr, _exit(3) (no destructors: they would wait on the stuck call). mpirun
// then ends the other ranks; a rank whose own watchdog fires first prints its own line.
Watchdog::Watchdog(std::function<std::optional<InFlight>()> probe, const FlightRecorder& recorder,
                   const ProgressBoard& board, int rank, int size, std::chrono::milliseconds timeout,
                   std::string run_dir)
    : probe_(std::move(probe)), recorder_(recorder), board_(board), rank_(rank), size_(size), timeout_(timeout),
      run_dir_(std::move(run_dir)) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::loop() {
  const auto period = std::clamp<std::chrono::milliseconds>(timeout_ / 10, std::chrono::milliseconds(1),
                                                            std::chrono::milliseconds(100));
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (stop_) break;
    lock.unlock();
    if (std::optional<InFlight> f = probe_()) {
      const auto elapsed = std::chrono::steady_clock::now() - f->since;
      if (elapsed > timeout_) fire(*f, std::chrono::duration<double>(elapsed).count());
    }
    lock.lock();
  }
}

std::string Watchdog::diagnose(const InFlight& f, double elapsed_s) const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "rank " << rank_ << ": " << f.what << " did not complete in " << elapsed_s << " s: ";
  const auto last_coll = [](const ProgressBoard::Slot& s) {
    if (s.coll_entered == 0) return std::string("none yet");
    std::ostringstream o;
    o << "#" << s.coll_entered << " " << describe(s.coll_entered_call)
      << (s.coll_completed >= s.coll_entered ? ", completed" : ", in flight");
    return o.str();
  };
  std::vector<std::string> parts;
  if (!board_.enabled()) {
    parts.push_back("the other ranks' progress is unknown (no progress board at " + board_.path() + ")");
  } else if (f.collective_seq == 0) {
    // send/recv: only the peer matters.
    const ProgressBoard::Slot s = board_.read(f.peer);
    std::ostringstream o;
    if (!s.joined || !s.same_host) {
      o << "rank " << f.peer << "'s progress is unknown (" << (s.joined ? "on host " + s.host : "no progress board entry")
        << ")";
    } else {
      o << "rank " << f.peer << " has no matching call in flight (its last send/recv: ";
      if (s.p2p_entered == 0) o << "none";
      else o << "#" << s.p2p_entered << " " << describe_full(s.p2p_entered_call)
             << (s.p2p_completed >= s.p2p_entered ? ", completed" : ", in flight");
      o << "; its last collective: " << last_coll(s) << ")";
    }
    parts.push_back(o.str());
  } else {
    const uint64_t S = f.collective_seq;
    std::vector<int> arrived;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const ProgressBoard::Slot s = board_.read(q);
      std::ostringstream o;
      if (!s.joined) {
        o << "rank " << q << "'s progress is unknown (no progress board entry: another host without a shared run "
                             "dir, or it never created the group)";
      } else if (!s.same_host) {
        o << "rank " << q << "'s progress is unknown (on host " << s.host << ")";
      } else if (s.coll_entered < S) {
        o << "rank " << q << " never arrived at #" << S << " (its last collective: " << last_coll(s) << ")";
      } else if (s.coll_entered == S && unpack_call(s.coll_entered_call).op != unpack_call(f.call).op) {
        o << "rank " << q << " is at #" << S << " " << describe_full(s.coll_entered_call) << ", not "
          << describe_full(f.call) << " (mismatched collectives)";
      } else if (s.coll_entered == S && s.coll_entered_call != f.call) {
        o << "rank " << q << " is at #" << S << " " << describe_full(s.coll_entered_call) << ", this rank at "
          << describe_full(f.call) << " (mismatched arguments)";
      } else if (s.coll_entered == S) {
        arrived.push_back(q);
        continue;
      } else {
        o << "rank " << q << " is past #" << S << " (at #" << s.coll_entered << " " << describe(s.coll_entered_call)
          << ")";
      }
      parts.push_back(o.str());
    }
    if (parts.empty()) {
      parts.push_back(size_ == 1 ? std::string("this is the only rank (the backend itself is stuck)")
                                 : "every rank arrived at #" + std::to_string(S) + " (the backend itself is stuck)");
    }
  }
  for (std::size_t i = 0; i < parts.size(); ++i) os << (i ? "; " : "") << parts[i];
  return os.str();
}

void Watchdog::fire(const InFlight& f, double elapsed_s) {
  static std::atomic<bool> fired{false};
  if (fired.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // another group's watchdog is ending us
  }
  const std::string line = diagnose(f, elapsed_s);
  std::filesystem::path dir = run_dir_.empty() ? std::filesystem::path(".") : std::filesystem::path(run_dir_);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path dump = dir / ("flight_recorder_rank" + std::to_string(rank_) + ".json");
  std::string where = dump.string();
  try {
    nlohmann::json j = recorder_.to_json();
    nlohmann::json board = nlohmann::json::array();
    for (int q = 0; q < size_; ++q) {
      const ProgressBoard::Slot s = board_.read(q);
      board.push_back({{"rank", q}, {"joined", s.joined}, {"host", s.host}, {"pid", s.pid},
                       {"collective_issued", s.coll_issued}, {"collective_entered", s.coll_entered},
                       {"collective_entered_op", describe_full(s.coll_entered_call)},
                       {"collective_completed", s.coll_completed}, {"p2p_entered", s.p2p_entered},
                       {"p2p_entered_op", describe_full(s.p2p_entered_call)}, {"p2p_completed", s.p2p_completed}});
    }
    j["diagnosis"] = line;
    j["timeout_s"] = std::chrono::duration<double>(timeout_).count();
    j["stuck"] = {{"seq", f.seq}, {"collective_seq", f.collective_seq}, {"what", f.what}, {"elapsed_s", elapsed_s}};
    j["progress_board"] = {{"path", board_.path()}, {"slots", board}};
    std::ofstream out(dump);
    out << j.dump(2) << "\n";
    if (!out) where = "(could not write " + dump.string() + ")";
  } catch (const std::exception& e) {
    where = std::string("(dump failed: ") + e.what() + ")";
  }
  std::fprintf(stderr, "trainbench: watchdog: %s; dump: %s\n", line.c_str(), where.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(kWatchdogExitCode);
}

}  // namespace tb::dist
