// Hosts of our own (issue 19): N "hosts" on this machine as Linux network namespaces, each with
// its own loopback, a veth link to one bridge, an address in a private range used only inside
// this machine, and its own hostname; links optionally shaped to a named profile (rate with tc,
// one-way delay with netem or, where the kernel lacks it, the delay line of delay_line.h). mpirun
// reaches the hosts through a launch agent (a script: `ip netns exec <host>` plus a UTS namespace
// with the host's name and a mount namespace whose /etc/hosts names every host), with MPI's TCP
// transport between hosts and shared memory only inside one. Everything made is recorded in a
// state folder before it is made, so a fixture whose owner died (a killed test) is torn down at the
// next up, down or status (Note [Hosts state]). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); without
// it `up` throws HostsUnavailable, which tests turn into a skip.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/launcher.h"

namespace tb::harness {

// A named link shape. Bandwidth is shaped with tbf (both directions of every host's link); delay
// with netem where the kernel has it (link_delay_supported()), else with the NFQUEUE delay line
// (harness/delay_line.h) where iptables and nfnetlink_queue are there, else not at all, which the
// fixture says (HostsFixture::latency_note).
struct LinkProfile {
  std::string name;      // "10g-50us"
  double rate_gbit = 0;  // per direction of each host's link; 0: not shaped
  double delay_us = 0;   // one way, host to host; 0: none added
  std::string what;      // one line for `hosts status` and the docs
};

// unshaped, 10g-50us, 1g-200us (docs/distributed.md "Hosts of our own").
const std::vector<LinkProfile>& link_profiles();
// Throws std::invalid_argument naming the valid profiles.
const LinkProfile& link_profile(const std::string& name);

// Open MPI's btl_tcp_rdma_pipeline_frag_size for a link of this profile: about 1 ms of its nominal
// rate, in whole 64 KiB, from 128 KiB up to Open MPI's default; 0 where the rate is not shaped (the
// default kept).
// Note [Long messages over a shaped link] in harness/hosts.cpp.
std::size_t tcp_fragment_bytes(const LinkProfile& p);

// Whether this kernel has the netem qdisc (probed once on a scratch veth pair per process).
bool link_delay_supported();

// How a fixture's one-way delay is made.
enum class LatencyShaping {
  None,       // not shaped (the profile asks for none, or neither way below works here)
  Netem,      // tc netem on each host's eth0
  DelayLine,  // the NFQUEUE delay line in each host, on what it sends out of eth0
};
// "none", "netem", "delay_line" (the `latency_shaping` metric, the state folder's info file).
const char* latency_shaping_name(LatencyShaping s);

// Thrown by HostsFixture::up when this machine or user cannot make namespaces (not root, no
// CAP_NET_ADMIN, no `ip`); what() says why. Other failures are std::runtime_error.
class HostsUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Empty when hosts can be made here, else why not (probes once per process by making and
// deleting a namespace).
std::string hosts_unavailable_reason();

struct HostsOptions {
  int hosts = 2;
  int ranks_per_host = 2;  // slots per host in the hostfile
  std::string profile = "unshaped";
  // False: owned by this process; a later up/down/status in any process tears it down once this
  // process is gone (even killed). True: `trainbench hosts up`; stays until `trainbench hosts down`.
  bool persistent = false;
};

struct Host {
  std::string name;     // hostname inside, namespace name and hostfile name: "tb0h1"
  std::string address;  // "10.213.0.2"
  std::string link;     // the bridge-side end of its veth pair (inside, the other end is eth0)
};

// Measured over the links of a fixture (measure_link): a TCP probe between hosts 1 and 2.
struct LinkMeasurement {
  double bandwidth_gbit = 0;  // one TCP stream, 64 MiB one way
  double rtt_us = 0;          // median round trip of a 1-byte ping-pong (TCP_NODELAY)
  double latency_us = 0;      // rtt / 2
};

class HostsFixture {
 public:
  // Makes the hosts; throws HostsUnavailable or std::runtime_error (after removing what it made).
  static HostsFixture up(const HostsOptions& o);
  HostsFixture(HostsFixture&&) noexcept;
  HostsFixture& operator=(HostsFixture&&) noexcept;
  ~HostsFixture();  // down()
  // Kills every process inside the hosts, removes namespaces, links, bridge and the state folder.
  void down();
  // Leaves the hosts up when this object goes (a persistent fixture: `trainbench hosts up`).
  void detach();

  int id() const;  // the fixture's index: bridge tb<id>br, subnet 10.213.<id>.0/24
  const std::vector<Host>& hosts() const;
  int ranks_per_host() const;
  const LinkProfile& profile() const;
  bool latency_shaped() const;  // the profile asks for delay and it is applied (netem or the delay line)
  LatencyShaping latency_shaping() const;
  // How the latency is shaped, or why not: "netem on each host's eth0", "the NFQUEUE delay line in
  // each host (...)", "not shaped: ...", "no delay asked".
  const std::string& latency_note() const;
  // The delay lines' processes (one per host; empty unless latency_shaping() is DelayLine).
  std::vector<int> delay_line_pids() const;
  std::string subnet() const;  // "10.213.0.0/24"
  std::string bridge() const;  // "tb0br"
  const std::filesystem::path& state_dir() const;
  std::string hostfile() const;  // "<name> slots=<ranks_per_host>" per host
  std::string agent() const;     // mpirun's plm_rsh_agent: `agent HOST COMMAND...`
  // mpirun places ranks by slot: ranks 0..K-1 on the first host, K..2K-1 on the second, ...
  const Host& host_of(int rank) const;
  // The environment that makes a launch use these hosts: Open MPI's agent, the TCP btl
  // restricted to the hosts' subnet (shared memory inside a host), no binding, yielding when
  // idle (every host shares this machine's cores), Gloo's interface (eth0 inside a host), and on a
  // shaped link the TCP btl's fragment size (tcp_fragment_bytes, unless already set).
  std::map<std::string, std::string> launch_env() const;
  // Sets spec.hostfile and adds launch_env() to spec.env.
  void apply(LaunchSpec& spec) const;
  // argv prefix that runs a program inside host `h` (0-based): the agent's namespaces.
  std::vector<std::string> exec_prefix(int h) const;
  // Sets host h's link (both ends) down or up: the host drops off the network.
  void set_link(int h, bool up) const;
  // "host tb0h2 (ranks 2, 3); host tb0h3 (rank 4)": the given ranks grouped by host.
  std::string describe_hosts(const std::vector<int>& ranks) const;
  // Note [Which host failed]: from a failed launch across these hosts, the hosts that were lost
  // (every rank of theirs gone or cut off, none heard from afterwards), each with its ranks and
  // the evidence, then the launch's own diagnosis. Empty evidence says so.
  std::string diagnose(const LaunchResult& res) const;
  // A TCP probe from host `from` to host `to` (0-based); see measure_link below.
  LinkMeasurement measure_link(int from = 0, int to = 1) const;

 private:
  struct State;
  explicit HostsFixture(std::unique_ptr<State> s);
  // Where netem is missing: the delay lines and their rules, `record` noting each before it is made.
  static void start_delay_lines(State& s, const std::function<void(const std::string&, const std::string&)>& record);
  std::unique_ptr<State> s_;
};

// Note [Hosts state]: the fixtures recorded under the state root ($TRAINBENCH_HOSTS_DIR, default
// /run/trainbench-hosts), for `trainbench hosts status`.
struct FixtureRecord {
  int id = -1;
  int owner_pid = 0;  // 0: persistent
  bool owner_alive = false;
  std::string profile;
  std::vector<Host> hosts;
  int ranks_per_host = 0;
  std::filesystem::path dir;
  std::string measured;  // the last `hosts status --measure` line, if any
  LatencyShaping latency_shaping = LatencyShaping::None;
  std::string latency_note;
  std::vector<int> delay_line_pids;  // those still running, one per host with a delay line
};

// A TCP probe between two hosts, in forked children inside their namespaces: the median round
// trip of 2000 one-byte ping-pongs and one stream of 64 MiB. Throws std::runtime_error if it fails.
LinkMeasurement measure_link(const Host& from, const Host& to);

std::filesystem::path hosts_state_root();
std::vector<FixtureRecord> list_fixtures();
// Tears down every recorded fixture whose owner is dead (and, with `persistent_too`, those made
// by `trainbench hosts up`, all of them or with `only` those of its ids; not one still being made);
// returns how many were removed, and counts in `failed` those with an object that would not go
// (kept recorded). Lines about each go to `log`.
int reap_fixtures(bool persistent_too, std::ostream* log, int* failed = nullptr,
                  const std::vector<int>* only = nullptr);

}  // namespace tb::harness
