// The delay line: a constant one-way delay for the packets a network namespace sends, in user
// space, where the kernel has no netem qdisc (issue 19; harness/hosts.h's link profiles). An
// iptables rule in the namespace (`-A OUTPUT -o eth0 -j NFQUEUE --queue-num N --queue-bypass`)
// hands each outgoing packet to queue N; this process holds it and accepts it exactly `delay` after
// it arrived, in arrival order. It is what netem's `delay` does on the same side of the link, and
// not more: no jitter, loss or reordering. Runs as the hidden `trainbench hosts delay-line`,
// started and stopped by HostsFixture (Note [The delay line]).
#pragma once
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace tb::harness {

// The queue number in every host (queues, like the rules, belong to one network namespace).
constexpr int kDelayLineQueue = 0;

struct DelayLineOptions {
  std::string netns;  // enter /run/netns/<netns> first; empty: stay in this one
  int queue = 0;      // the NFQUEUE queue number (queues are per network namespace)
  std::chrono::nanoseconds delay{0};
  // Where to write the statistics below (atomically, at most once a second while packets pass,
  // and at exit); empty: nowhere.
  std::filesystem::path stats;
};

// What the delay line achieved, measured on its own clock: lateness is how long after its due time
// (arrival + delay) a packet was accepted; the wake-up after ppoll's timeout is most of it.
struct DelayLineStats {
  long long packets = 0;
  long long late_over_10us = 0;  // packets accepted more than 10 us after their due time
  double late_mean_us = 0;
  double late_max_us = 0;
  long long overruns = 0;    // ENOBUFS: the socket overflowed; fail-open accepted those undelayed
  std::string text() const;  // "packets N\nlate_mean_us X\n..." (the stats file)
  static DelayLineStats parse(const std::string& text);
};

// Binds the queue, then writes "ready\n" to `ready_fd` (or "error: WHY\n" and returns 1) and closes
// it, then delays packets until SIGTERM or SIGINT; returns 0 then. Needs CAP_NET_ADMIN.
int run_delay_line(const DelayLineOptions& o, int ready_fd);

// The fixture's side (harness/hosts.cpp). Starts `<trainbench> hosts delay-line` in network
// namespace `netns`, in a session of its own (it outlives `trainbench hosts up`), stdin on
// /dev/null, stdout and stderr into `log`. Returns its pid once it has bound the queue; throws
// std::runtime_error saying why otherwise (what it wrote, or how it ended).
int start_delay_line(const std::string& trainbench, const std::string& netns, std::chrono::nanoseconds delay,
                     const std::filesystem::path& stats, const std::filesystem::path& log);
// SIGTERM (it accepts what it holds, writes its statistics and exits), SIGKILL after 2 s; reaps it
// when it is our child. The caller has checked that `pid` is still the process it started.
void stop_delay_line(int pid);
// `ip netns exec NETNS iptables -w -A|-D OUTPUT -o eth0 -j NFQUEUE --queue-num Q --queue-bypass`:
// what the host sends to other hosts goes through the queue (its own loopback does not);
// --queue-bypass lets packets through while no delay line is bound.
std::vector<std::string> delay_line_rule(const std::string& netns, bool add);
// User plus system CPU seconds of process `pid` so far (/proc/PID/stat; 0 if it is gone).
double process_cpu_seconds(int pid);
// The sum over `pids` (a fixture's delay lines).
double process_cpu_seconds(const std::vector<int>& pids);
// Whether `pid` exists and has not exited (a zombie, waiting for its parent, has).
bool process_running(int pid);

}  // namespace tb::harness
