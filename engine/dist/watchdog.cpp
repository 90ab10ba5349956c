#include "engine/dist/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/dist/dump_analysis.h"
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

constexpr uint64_t kMagic = 0x3364726f62627474ull;  // "ttbbord3" (little-endian): slot layout version 3
constexpr int kSlotWords = 32;                      // 256 bytes: four cache lines
enum Field {
  kMagicF,
  kPid,
  kCollIssued,
  kCollEntered,
  kCollEnteredCall,
  kCollCompleted,
  kP2pEntered,
  kP2pEnteredCall,
  kP2pCompleted,
  kState,
  kFp /* two fingerprints of kFpWords: seq, call, numel, aux, issued */ = 10,
  kHost = kFp + 10 /* 7 words of hostname */,
  kEnd = kHost + 7
};
constexpr int kFpWords = 5;
static_assert(kEnd <= kSlotWords);
constexpr int kHostBytes = (kEnd - kHost) * 8;

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
std::string describe_full(uint64_t packed) { return describe_call({packed, unpack_call(packed).numel, 0}); }

// Boards of this process's live groups, for the atexit hook (leaked: the hook may run after
// static destructors).
std::mutex& boards_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<ProgressBoard*>& boards() {
  static auto* v = new std::vector<ProgressBoard*>;
  return *v;
}
std::atomic<bool> g_exiting{false};  // this process is in exit() with groups alive
void mark_exiting() {
  g_exiting.store(true);
  ProgressBoard::set_state_all(ProgressBoard::State::Exiting);
}

}  // namespace

std::string describe_call(const Fingerprint& f) {
  const CallKey k = unpack_call(f.call);
  std::ostringstream os;
  os << op_code_name(k.op);
  if (k.op == OpCode::None || k.op == OpCode::Barrier) return os.str();
  os << " (" << core::name(k.dtype) << ", " << f.numel << (f.numel == 1 ? " element" : " elements");
  if (k.op == OpCode::AllReduce || k.op == OpCode::ReduceScatter) os << ", " << reduce_op_name(ReduceOp(k.arg));
  if (k.op == OpCode::Broadcast) os << ", root " << k.arg;
  if (k.op == OpCode::Send || k.op == OpCode::Recv) os << ", peer " << k.arg;
  if (k.op == OpCode::ReduceScatter && f.aux) os << ", chunk split " << std::hex << (f.aux & 0xFFFFFFFF) << std::dec;
  os << ")";
  return os.str();
}

std::string mismatch_diagnosis(uint64_t cseq, const std::vector<Fingerprint>& fps) {
  // Ranks with equal fingerprints in one group, groups in the order of their lowest rank.
  std::vector<std::pair<Fingerprint, std::vector<int>>> groups;
  for (int r = 0; r < int(fps.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == fps[r]; });
    if (it == groups.end()) groups.push_back({fps[r], {r}});
    else it->second.push_back(r);
  }
  // The split hash is shown only when it is what differs.
  bool split_differs = false;
  for (const auto& g : groups)
    split_differs |= g.first.aux != groups[0].first.aux && g.first.call == groups[0].first.call &&
                     g.first.numel == groups[0].first.numel;
  std::ostringstream os;
  os << "collective #" << cseq << " differs between ranks: ";
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& rs = groups[i].second;
    os << (i ? "; " : "") << (rs.size() == 1 ? "rank " : "ranks ");
    for (std::size_t j = 0; j < rs.size(); ++j) os << (j ? ", " : "") << rs[j];
    Fingerprint f = groups[i].first;
    if (!split_differs) f.aux = 0;
    os << ": " << describe_call(f);
  }
  os << ". No rank entered the backend with it; every rank must issue the same collectives in the same order "
        "with the same op, dtype, element count, reduction and root";
  return os.str();
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return true;  // unknown: never call a rank dead on no evidence
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return ::kill(pid_t(pid), 0) == 0 || errno != ESRCH;  // no /proc: kill(0) (zombies count as alive)
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

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
  static std::once_flag hook;
  std::call_once(hook, [] { std::atexit(mark_exiting); });
  std::lock_guard lock(boards_mu());
  boards().push_back(this);
}

ProgressBoard::~ProgressBoard() {
  if (!base_) return;
  {
    std::lock_guard lock(boards_mu());
    std::erase(boards(), this);
  }
  ::munmap(base_, bytes_);
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
void ProgressBoard::set_state_all(State st) {
  std::lock_guard lock(boards_mu());
  for (ProgressBoard* b : boards()) b->set_state(st);
}
void ProgressBoard::set_state(State st) const {
  // Left is final: a group destroyed before exit() is not "exiting with the group alive".
  if (base_ &&
      std::atomic_ref<uint64_t>(*field(rank_, kState)).load(std::memory_order_relaxed) != uint64_t(State::Left))
    std::atomic_ref<uint64_t>(*field(rank_, kState)).store(uint64_t(st), std::memory_order_release);
}
void ProgressBoard::post_fingerprint(uint64_t cseq, const Fingerprint& f, uint64_t issued) {
  if (!base_) return;
  const int e = kFp + int(cseq % 2) * kFpWords;
  TB_BOARD_STORE(e + 1, f.call);
  TB_BOARD_STORE(e + 2, uint64_t(f.numel));
  TB_BOARD_STORE(e + 3, f.aux);
  TB_BOARD_STORE(e + 4, issued);
  TB_BOARD_STORE(e, cseq);  // last: a reader that sees cseq sees the words before it
}
#undef TB_BOARD_STORE

int ProgressBoard::fingerprint(int rank, uint64_t cseq, Fingerprint& out, uint64_t* issued) const {
  if (!base_ || rank < 0 || rank >= size_) return 0;
  const auto load = [&](int f) { return std::atomic_ref<uint64_t>(*field(rank, f)).load(std::memory_order_acquire); };
  const int e = kFp + int(cseq % 2) * kFpWords;
  const uint64_t s = load(e);
  if (s < cseq) return load(kFp + int((cseq + 1) % 2) * kFpWords) > cseq ? -1 : 0;
  if (s > cseq) return -1;
  out.call = load(e + 1);
  out.numel = int64_t(load(e + 2));
  out.aux = load(e + 3);
  if (issued) *issued = load(e + 4);
  return load(e) == cseq ? 1 : -1;
}
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
  s.state = State(load(kState));
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
//
// Note [Dead ranks]
// A rank that ends abruptly (exit() without destroying its group, _exit, a crash, SIGKILL) would
// otherwise leave the others in the backend until the timeout (MPI), or fail them with a bare
// transport error (Gloo's "Connection closed by peer"), or be cut short by mpirun's SIGTERM with
// nothing said. The progress board says which ranks of this host are gone: a slot's pid no longer
// running (or a zombie), or its state Exiting (an atexit hook marks every live group's slot, so a
// rank in exit() that then blocks in MPI_Finalize counts too), or Left (it destroyed the group).
// Each period, while a call is in flight, the watchdog looks for a rank that the call needs and
// that is gone before completing it; the process group asks the same after a backend failure and
// while it waits for the peers' fingerprints. Then the rank writes its dump and ends like a hang,
// naming the dead rank, its pid, its last collective and the collective it never reached. When
// several are gone, it names one that never reached the call (the call cannot complete without
// it; a rank that died inside the call may have died of that), then one that died inside it,
// then one that its own watchdog ended (which said why itself). A slot read as active whose pid
// is gone is read again: a rank writes its last state before it ends. mpirun
// answers a dead rank by sending SIGTERM to the others, possibly before a watchdog's next
// period: a SIGTERM handler (installed while any watchdog lives) wakes the watchdog threads through
// a pipe, and if any rank of any group is gone they diagnose; otherwise the previous disposition
// is restored and the signal raised again. Ranks on other hosts are not judged (no pid to check):
// their death still ends in the timeout's diagnosis or the backend's error.
namespace {

int g_signal_pipe[2] = {-1, -1};
struct sigaction g_old_term {};

extern "C" void on_sigterm(int) {
  const int saved = errno;
  const char b = 1;
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

std::mutex& watchdogs_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<Watchdog*>& watchdogs() {
  static auto* v = new std::vector<Watchdog*>;
  return *v;
}

bool g_installed = false;  // our handler is SIGTERM's disposition (under watchdogs_mu)

// Installed while at least one watchdog lives (a process whose groups are all gone must die of
// SIGTERM as before: nobody would read the pipe).
void install_locked() {
  if (g_installed) return;
  if (g_signal_pipe[0] < 0 && ::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (::sigaction(SIGTERM, &sa, &g_old_term) == 0) g_installed = true;
}

// Restores the old disposition; true if a SIGTERM caught meanwhile is still to be delivered.
bool uninstall_locked() {
  if (!g_installed) return false;
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_installed = false;
  char b;
  bool pending = false;
  while (::read(g_signal_pipe[0], &b, 1) == 1) pending = true;
  return pending;
}

// On the watchdog thread that read the SIGTERM byte: a dead rank in any group ends the process
// with its diagnosis; otherwise the signal does what it did before we caught it.
void handle_sigterm() {
  {
    std::lock_guard lock(watchdogs_mu());
    if (!g_exiting.load())  // a rank that is exiting itself is the one the others name
      for (Watchdog* w : watchdogs())
        if (std::optional<std::string> line = w->dead_peer(w->probe(), /*any=*/true)) {
          const std::optional<InFlight> f = w->probe();
          w->fire_line(*line + " (the launcher is ending this rank)", f ? &*f : nullptr);
        }
    uninstall_locked();
  }
  ::raise(SIGTERM);
}

}  // namespace

Watchdog::Watchdog(std::function<std::optional<InFlight>()> probe, const FlightRecorder& recorder,
                   const ProgressBoard& board, int rank, int size, std::chrono::milliseconds timeout,
                   std::string run_dir)
    : probe_(std::move(probe)),
      recorder_(recorder),
      board_(board),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      run_dir_(std::move(run_dir)) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  {
    std::lock_guard lock(watchdogs_mu());
    install_locked();
    watchdogs().push_back(this);
  }
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(watchdogs_mu());
    std::erase(watchdogs(), this);
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  ::close(stop_fd_);
  bool pending;
  {
    std::lock_guard lock(watchdogs_mu());
    pending = watchdogs().empty() && uninstall_locked();
  }
  if (pending) ::raise(SIGTERM);  // caught while the last watchdog went away
}

// Note [Settle before a dead-peer dump]
// A peer that left its group before this rank's collective ends the wait at once, but the other
// peers may be a few milliseconds from leaving too (every rank but one finished its loop: one
// extra collective). Dumping at the first departure would record them as active, and the
// analysis could not tell "left after its last call" from "frozen". So before a dead-peer dump
// the watchdog waits, at most min(1 s, timeout / 4), until every peer that has not reached the
// collective has left, exited, failed or died; a peer still active then (frozen, or computing)
// is dumped as it is.
void Watchdog::settle(const InFlight& f) const {
  if (f.collective_seq == 0 || !board_.enabled()) return;
  const auto unsettled = [&] {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const ProgressBoard::Slot s = board_.read(q);
      if (!s.joined || !s.same_host || s.state != ProgressBoard::State::Active) continue;
      if (s.coll_entered >= f.collective_seq || !process_alive(s.pid)) continue;
      return true;
    }
    return false;
  };
  const auto deadline = std::chrono::steady_clock::now() +
                        std::min<std::chrono::milliseconds>(std::chrono::seconds(1), timeout_ / 4);
  while (unsettled() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void Watchdog::loop() {
  const auto period = std::clamp<std::chrono::milliseconds>(timeout_ / 10, std::chrono::milliseconds(1),
                                                            std::chrono::milliseconds(100));
  for (;;) {
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    const int n = ::poll(fds, g_signal_pipe[0] >= 0 ? 2 : 1, int(period.count()));
    if (n > 0 && (fds[0].revents & POLLIN)) return;
    if (n > 0 && (fds[1].revents & POLLIN)) {
      char b;
      if (::read(g_signal_pipe[0], &b, 1) == 1) handle_sigterm();  // one thread takes the byte
    }
    if (std::optional<InFlight> f = probe_()) {
      if (std::optional<std::string> line = dead_peer(f)) {
        settle(*f);
        fire_line(*line, &*f);
      }
      const auto elapsed = std::chrono::steady_clock::now() - f->since;
      if (elapsed > timeout_) fire(*f, std::chrono::duration<double>(elapsed).count());
    }
  }
}

std::optional<std::string> Watchdog::dead_peer(const std::optional<InFlight>& f, bool any) const {
  if (!board_.enabled() || size_ == 1 || (!f && !any)) return std::nullopt;
  const auto last_coll = [](const ProgressBoard::Slot& s) {
    if (s.coll_entered == 0) return std::string("none yet");
    std::ostringstream o;
    o << "#" << s.coll_entered << " " << describe(s.coll_entered_call)
      << (s.coll_completed >= s.coll_entered ? ", completed" : ", in flight");
    return o.str();
  };
  // Which dead rank to name when several are gone (Note [Dead ranks]): first one that never
  // reached the collective (it blocks the call for certain; one that died inside it may have
  // died of the first), then one that died inside it; a rank whose own watchdog ended it
  // (Failed) has said why itself, so it comes last.
  enum class Pass { NeverReached, During, EndedByItsWatchdog };
  const auto needed = [&](int q, const ProgressBoard::Slot& s) {
    if (!f) return s.state != ProgressBoard::State::Left;
    if (f->collective_seq == 0) return q == f->peer;
    return s.coll_completed < f->collective_seq &&
           (s.state != ProgressBoard::State::Left || s.coll_entered < f->collective_seq);
  };
  for (const Pass pass : {Pass::NeverReached, Pass::During, Pass::EndedByItsWatchdog})
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      ProgressBoard::Slot s = board_.read(q);
      // Cheap board checks first; the /proc read only for a rank that matters.
      if (!s.joined || !s.same_host || !needed(q, s)) continue;
      if (s.state == ProgressBoard::State::Active) {
        if (process_alive(s.pid)) continue;
        // Gone: read the slot again. A rank writes its last state before it ends, so only a read
        // after its death is final; the read above may predate its watchdog marking it Failed
        // (a survivor descheduled between the two blamed a rank that had named the real one).
        s = board_.read(q);
        if (!needed(q, s)) continue;
      }
      const bool left = s.state == ProgressBoard::State::Left;
      const bool exiting = s.state == ProgressBoard::State::Exiting;
      const bool failed = s.state == ProgressBoard::State::Failed;
      const bool reached = f && f->collective_seq != 0 && s.coll_entered >= f->collective_seq;
      if (pass != (failed ? Pass::EndedByItsWatchdog : reached ? Pass::During : Pass::NeverReached)) continue;
      std::ostringstream os;
      os << "rank " << rank_ << ": rank " << q << " (pid " << s.pid << ") ";
      if (failed) {
        os << "was ended by its own watchdog (its line and dump say why)";
        if (f) os << "; this rank was in " << f->what;
        return os.str();
      }
      if (left) os << "destroyed its process group";
      else if (exiting) os << "is exiting (exit() or a return from main without destroying its process group)";
      else os << "ended (killed, crashed or _exit without destroying its process group)";
      if (!f) {
        os << " while this rank computed; its last collective: " << last_coll(s);
      } else if (f->collective_seq == 0) {
        os << "; this rank's " << f->what << " needs it (its last send/recv: ";
        if (s.p2p_entered == 0) os << "none";
        else os << "#" << s.p2p_entered << " " << describe_full(s.p2p_entered_call);
        os << ")";
      } else if (s.coll_entered < f->collective_seq) {
        os << " before reaching " << f->what << " (its last collective: " << last_coll(s) << ")";
      } else {
        os << " during " << f->what << " (it entered #" << s.coll_entered << " and did not complete it)";
      }
      return os.str();
    }
  return std::nullopt;
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
      o << "rank " << f.peer << "'s progress is unknown ("
        << (s.joined ? "on host " + s.host : "no progress board entry") << ")";
    } else {
      o << "rank " << f.peer << " has no matching call in flight (its last send/recv: ";
      if (s.p2p_entered == 0) o << "none";
      else
        o << "#" << s.p2p_entered << " " << describe_full(s.p2p_entered_call)
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
        o << "rank " << q
          << "'s progress is unknown (no progress board entry: another host without a shared run "
             "dir, or it never created the group)";
      } else if (!s.same_host) {
        o << "rank " << q << "'s progress is unknown (on host " << s.host << ")";
      } else {
        switch (peer_position(S, s.coll_entered, unpack_call(s.coll_entered_call).op == unpack_call(f.call).op,
                              s.coll_entered_call == f.call)) {
          case PeerPosition::NotArrived:
            o << "rank " << q << " never arrived at #" << S << " (its last collective: " << last_coll(s) << ")";
            break;
          case PeerPosition::OtherOp:
            o << "rank " << q << " is at #" << S << " " << describe_full(s.coll_entered_call) << ", not "
              << describe_full(f.call) << " (mismatched collectives)";
            break;
          case PeerPosition::OtherArguments:
            o << "rank " << q << " is at #" << S << " " << describe_full(s.coll_entered_call) << ", this rank at "
              << describe_full(f.call) << " (mismatched arguments)";
            break;
          case PeerPosition::Arrived: arrived.push_back(q); continue;
          case PeerPosition::Past:
            o << "rank " << q << " is past #" << S << " (at #" << s.coll_entered << " " << describe(s.coll_entered_call)
              << ")";
            break;
        }
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

void Watchdog::fire(const InFlight& f, double elapsed_s) { fire_line(diagnose(f, elapsed_s), &f); }

void Watchdog::fire_line(const std::string& line, const InFlight* f) {
  static std::atomic<bool> fired{false};
  if (fired.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // another group's watchdog is ending us
  }
  ProgressBoard::set_state_all(ProgressBoard::State::Failed);
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
      board.push_back({{"rank", q},
                       {"joined", s.joined},
                       {"host", s.host},
                       {"pid", s.pid},
                       {"state", s.state == ProgressBoard::State::Active    ? "active"
                                 : s.state == ProgressBoard::State::Left    ? "left"
                                 : s.state == ProgressBoard::State::Exiting ? "exiting"
                                                                            : "failed"},
                       {"alive", s.same_host ? nlohmann::json(process_alive(s.pid)) : nlohmann::json()},
                       {"collective_issued", s.coll_issued},
                       {"collective_entered", s.coll_entered},
                       {"collective_entered_op", describe_full(s.coll_entered_call)},
                       {"collective_completed", s.coll_completed},
                       {"p2p_entered", s.p2p_entered},
                       {"p2p_entered_op", describe_full(s.p2p_entered_call)},
                       {"p2p_completed", s.p2p_completed}});
    }
    j["diagnosis"] = line;
    j["timeout_s"] = std::chrono::duration<double>(timeout_).count();
    if (f) {
      const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - f->since).count();
      j["stuck"] = {{"seq", f->seq},
                    {"collective_seq", f->collective_seq},
                    {"what", f->what},
                    {"elapsed_s", elapsed_s}};
    }
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
