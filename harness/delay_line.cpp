// The NFQUEUE delay line (delay_line.h): one queue, one FIFO, precise waits.
//
// libnetfilter_queue (netfilter.org's own client of the nfnetlink_queue protocol, Debian's
// libnetfilter-queue-dev) binds the queue, sets its mode and flags and sends batch verdicts; the
// wire format and its attribute parsing stay its business rather than ours.
#include "harness/delay_line.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netfilter.h>  // NF_ACCEPT
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
}

namespace tb::harness {

std::string DelayLineStats::text() const {
  std::ostringstream os;
  os << "packets " << packets << "\nlate_mean_us " << late_mean_us << "\nlate_max_us " << late_max_us
     << "\nlate_over_10us " << late_over_10us << "\noverruns " << overruns << "\n";
  return os.str();
}

DelayLineStats DelayLineStats::parse(const std::string& text) {
  DelayLineStats s;
  std::istringstream is(text);
  for (std::string key; is >> key;) {
    if (key == "packets") is >> s.packets;
    else if (key == "late_mean_us") is >> s.late_mean_us;
    else if (key == "late_max_us") is >> s.late_max_us;
    else if (key == "late_over_10us") is >> s.late_over_10us;
    else if (key == "overruns") is >> s.overruns;
  }
  return s;
}

namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Note [The delay line]
// A packet is held from the moment this process reads it off the queue's socket (its arrival)
// until arrival + delay, then accepted. A constant delay keeps arrival order, so the held packets
// are a FIFO and the due ones are always a prefix of it: one batch verdict (accept every queued id
// up to the last due one) releases them, one system call however many are due. The kernel numbers
// a queue's packets in the order it queues them and the socket delivers them in that order, so no
// packet below that id is still unread. Waits are ppoll timeouts in nanoseconds with a timer
// slack of 1 ns (the default 50 us slack, or poll's milliseconds, would be the size of the delay
// itself); the time ppoll takes to wake past its timeout is the lateness the statistics report
// (~35 us median on these virtual machines, idle). Ending each wait early and spinning to the due
// time took ~10-50 us off the probe's one way but made MPI's small all_reduces 2-4x slower: on a
// shared 2-core machine a spinning delay line takes the core the polling ranks need. Nor can the
// wake-up that reads an arriving packet be avoided: the kernel stamps no queued packet here
// (neither at OUTPUT nor at PREROUTING), so the arrival is when this process reads it.
// Only packet metadata is copied to user space (NFQNL_COPY_META), whole GSO packets are queued
// (NFQA_CFG_F_GSO: no segmentation for our sake), and a full queue or socket lets packets through
// undelayed (NFQA_CFG_F_FAIL_OPEN) rather than dropping them; the rule's --queue-bypass does the
// same while no delay line is bound, so the link never blocks on this process.
struct Held {
  uint32_t id;
  int64_t due_ns;
};

struct Line {
  int64_t delay_ns = 0;
  std::deque<Held> fifo;
  DelayLineStats stats;
  double late_sum_us = 0;
};

int on_packet(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  Line& l = *static_cast<Line*>(data);
  if (const nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa))
    l.fifo.push_back({ntohl(ph->packet_id), now_ns() + l.delay_ns});
  return 0;
}

// Accepts every held packet that is due; returns false if the verdict could not be sent.
bool release_due(nfq_q_handle* qh, Line& l) {
  const int64_t now = now_ns();
  bool any = false;
  uint32_t last = 0;
  while (!l.fifo.empty() && l.fifo.front().due_ns <= now) {
    const double late_us = double(now - l.fifo.front().due_ns) / 1e3;
    l.late_sum_us += late_us;
    l.stats.late_max_us = std::max(l.stats.late_max_us, late_us);
    l.stats.late_over_10us += late_us > 10;
    ++l.stats.packets;
    last = l.fifo.front().id;
    any = true;
    l.fifo.pop_front();
  }
  if (l.stats.packets) l.stats.late_mean_us = l.late_sum_us / double(l.stats.packets);
  return !any || nfq_set_verdict_batch(qh, last, NF_ACCEPT) >= 0;
}

void write_stats(const Line& l, const std::filesystem::path& to) {
  if (to.empty()) return;
  const std::filesystem::path tmp = to.string() + ".tmp";
  std::ofstream(tmp) << l.stats.text();
  std::error_code ec;
  std::filesystem::rename(tmp, to, ec);
}

}  // namespace

int run_delay_line(const DelayLineOptions& o, int ready_fd) {
  auto tell = [&](const std::string& line) {
    if (ready_fd < 0) return;
    const std::string s = line + "\n";
    [[maybe_unused]] const ssize_t n = ::write(ready_fd, s.data(), s.size());
    ::close(ready_fd);
    ready_fd = -1;
  };
  auto fail = [&](const std::string& why) {
    tell("error: " + why);
    return 1;
  };
  if (!o.netns.empty()) {
    const int fd = ::open(("/run/netns/" + o.netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
      return fail("cannot enter network namespace " + o.netns + ": " + std::strerror(errno));
    ::close(fd);
  }
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  Line line;
  line.delay_ns = o.delay.count();
  nfq_handle* h = nfq_open();
  if (!h)
    return fail(std::string("cannot open an nfnetlink_queue socket (is the nfnetlink_queue module there?): ") +
                std::strerror(errno));
  nfq_q_handle* qh = nfq_create_queue(h, uint16_t(o.queue), &on_packet, &line);
  const uint32_t flags = NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN;
  std::string why;
  if (!qh) why = "cannot bind NFQUEUE queue " + std::to_string(o.queue) + ": " + std::strerror(errno);
  else if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0)
    why = std::string("the queue refuses NFQNL_COPY_META: ") + std::strerror(errno);
  else if (nfq_set_queue_flags(qh, flags, flags) < 0)
    why = std::string("the queue refuses the GSO and fail-open flags: ") + std::strerror(errno);
  if (!why.empty()) {
    if (qh) nfq_destroy_queue(qh);
    nfq_close(h);
    return fail(why);
  }
  // Room for every packet a 10 Gb/s link has in flight through the delay (and far more).
  nfq_set_queue_maxlen(qh, 8192);
  nfnl_rcvbufsiz(nfq_nfnlh(h), 8u << 20);
  const int fd = nfq_fd(h);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  // SIGTERM and SIGINT are blocked except inside ppoll, so a stop is seen between two waits.
  sigset_t stop_set, during_wait;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGTERM);
  sigaddset(&stop_set, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop_set, &during_wait);
  sigdelset(&during_wait, SIGTERM);
  sigdelset(&during_wait, SIGINT);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  tell("ready");

  alignas(8) char buf[16384];  // one metadata-only message is a few hundred bytes
  int64_t stats_written_ns = now_ns();
  long long stats_written_packets = 0;
  int rc = 0;
  while (!g_stop) {
    timespec wait{1, 0};  // idle: wake once a second to write the statistics
    if (!line.fifo.empty()) {
      const int64_t ns = std::max<int64_t>(0, line.fifo.front().due_ns - now_ns());
      wait = {time_t(ns / 1000000000), long(ns % 1000000000)};
    }
    pollfd p{fd, POLLIN, 0};
    if (::ppoll(&p, 1, &wait, &during_wait) < 0 && errno != EINTR) {
      rc = 1;
      break;
    }
    for (;;) {  // everything queued so far, each stamped as it is read
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        nfq_handle_packet(h, buf, int(n));
      } else if (n < 0 && errno == ENOBUFS) {
        ++line.stats.overruns;
      } else {
        break;
      }
    }
    if (!release_due(qh, line)) {
      rc = 1;
      break;
    }
    if (line.stats.packets != stats_written_packets && now_ns() - stats_written_ns > 1000000000) {
      write_stats(line, o.stats);
      stats_written_ns = now_ns();
      stats_written_packets = line.stats.packets;
    }
  }
  // Stopped: what is still held goes out now rather than being dropped with the queue.
  if (!line.fifo.empty()) nfq_set_verdict_batch(qh, line.fifo.back().id, NF_ACCEPT);
  write_stats(line, o.stats);
  nfq_destroy_queue(qh);
  nfq_close(h);
  return rc;
}

namespace {

// True once `pid` has exited: reaped here when it is our child, else gone or a zombie whose own
// parent will reap it.
bool ended(int pid) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return true;
  if (r == 0) return false;  // our child, still running
  return !process_running(pid);
}

}  // namespace

int start_delay_line(const std::string& trainbench, const std::string& netns, std::chrono::nanoseconds delay,
                     const std::filesystem::path& stats, const std::filesystem::path& log) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("delay line: pipe: ") + std::strerror(errno));
  constexpr int kReadyFd = 3;
  const int w = ::fcntl(p[1], F_DUPFD_CLOEXEC, 10);  // not 3 itself: dup2 onto 3 must clear CLOEXEC
  ::close(p[1]);
  const std::vector<std::string> args = {trainbench,
                                         "hosts",
                                         "delay-line",
                                         "--netns",
                                         netns,
                                         "--queue",
                                         std::to_string(kDelayLineQueue),
                                         "--delay-ns",
                                         std::to_string(delay.count()),
                                         "--stats",
                                         stats.string(),
                                         "--ready-fd",
                                         std::to_string(kReadyFd)};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_adddup2(&fa, w, kReadyFd);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defaults);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, trainbench.c_str(), &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(w);
  if (err != 0) {
    ::close(p[0]);
    throw std::runtime_error("cannot start the delay line (" + trainbench + "): " + std::strerror(err));
  }
  // Its first line: "ready" once the queue is bound, or "error: WHY". Binding takes milliseconds.
  std::string said;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (char c = 0; said.find('\n') == std::string::npos && std::chrono::steady_clock::now() < until;) {
    pollfd pf{p[0], POLLIN, 0};
    if (::poll(&pf, 1, 100) <= 0) continue;
    if (::read(p[0], &c, 1) != 1) break;  // EOF: it ended
    said += c;
  }
  ::close(p[0]);
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (said == "ready") return pid;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  if (said.rfind("error: ", 0) == 0) said = said.substr(7);
  throw std::runtime_error(said.empty() ? "the delay line (" + trainbench +
                                              " hosts delay-line) ended without binding its queue; see " + log.string()
                                        : said);
}

void stop_delay_line(int pid) {
  if (pid <= 1) return;
  ::kill(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!ended(pid)) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      for (int i = 0; i < 100 && !ended(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool process_running(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), {});
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

double process_cpu_seconds(const std::vector<int>& pids) {
  double s = 0;
  for (int pid : pids) s += process_cpu_seconds(pid);
  return s;
}

double process_cpu_seconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream is(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && is >> field; ++i)
    if (i == 14 || i == 15) ticks += std::atof(field.c_str());  // utime, stime
  return ticks / double(::sysconf(_SC_CLK_TCK));
}

std::vector<std::string> delay_line_rule(const std::string& netns, bool add) {
  return {"ip",
          "netns",
          "exec",
          netns,
          "iptables",
          "-w",
          add ? "-A" : "-D",
          "OUTPUT",
          "-o",
          "eth0",
          "-j",
          "NFQUEUE",
          "--queue-num",
          std::to_string(kDelayLineQueue),
          "--queue-bypass"};
}

}  // namespace tb::harness
