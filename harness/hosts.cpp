// Hosts as network namespaces: made and torn down with iproute2 and tc, recorded in a state folder.
#include "harness/hosts.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness/delay_line.h"
#include "harness/subprocess.h"

namespace tb::harness {

namespace fs = std::filesystem;

const std::vector<LinkProfile>& link_profiles() {
  static const std::vector<LinkProfile> p = {
      {"unshaped", 0, 0, "veth pairs through a bridge as the kernel runs them (no tc)"},
      {"10g-50us", 10, 50, "10 Gb/s per direction (tbf), 50 us one way (netem, else the NFQUEUE delay line)"},
      {"1g-200us", 1, 200, "1 Gb/s per direction (tbf), 200 us one way (netem, else the NFQUEUE delay line)"},
  };
  return p;
}

const char* latency_shaping_name(LatencyShaping s) {
  switch (s) {
    case LatencyShaping::Netem: return "netem";
    case LatencyShaping::DelayLine: return "delay_line";
    case LatencyShaping::None: break;
  }
  return "none";
}

const LinkProfile& link_profile(const std::string& name) {
  std::string names;
  for (const LinkProfile& p : link_profiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw std::invalid_argument("unknown link profile '" + name + "'; valid: " + names);
}

namespace {

constexpr int kMaxFixtures = 200;  // ids 0..199: subnets 10.213.<id>.0/24
constexpr int kMaxHosts = 64;

struct Ran {
  bool ok = false;
  std::string out;  // stdout and stderr
};

Ran run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  SubprocessSpec s;
  s.argv = argv;
  s.timeout = timeout;
  s.output = SubprocessSpec::Output::Merge;
  s.max_output = 1 << 16;
  const SubprocessResult r = run_subprocess(s);
  return {r.ok(), r.started() ? r.out : r.describe()};
}

// Runs a command that must succeed; throws with its output otherwise.
void must(const std::vector<std::string>& argv) {
  const Ran r = run(argv);
  if (!r.ok) throw std::runtime_error("hosts: `" + shell_join(argv) + "` failed: " + r.out);
}

// State files and /proc entries are small regular files. Anything else reads as empty, and at
// most 1 MiB is read (Note [Hostile state]: a FIFO named `owner` would block `hosts status` for
// ever, a `made` linked to /dev/zero would fill memory).
std::string read_file(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[4096];
    for (ssize_t n; out.size() < (1u << 20) && (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

// The start time of a process (field 22 of /proc/PID/stat), to tell a live owner from a new
// process that reuses its pid. Empty when the process does not exist.
std::string start_time(int pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream is(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && is >> field; ++i) {
  }
  return field;
}

// Note [Hosts state]
// Each fixture is a folder <root>/<id> (claimed by mkdir under an flock of <root>/lock), holding
//   owner     "PID STARTTIME" of the owning process, or "persistent" (`trainbench hosts up`, written
//             once every object is made: until then the making process owns it, so a `down` meanwhile
//             leaves it be, and an `up` killed half-way leaves a fixture of a dead owner)
//   made      one line per object, written BEFORE the object is made: "bridge tb0br",
//             "netns tb0h1", "link tb0h1", "delay_line tb0h1" (the host's delay line process),
//             "queue_rule tb0h1" (its iptables rule) (a kill between the line and the object
//             leaves a line for nothing, which tear-down tolerates; never an object without a line).
//             A line whose `add` failed is taken back: the name may be someone else's object.
//   info      "profile NAME\nranks_per_host K\nlatency_shaping none|netem|delay_line\n
//             latency_note TEXT\nhost NAME ADDRESS LINK\n..."
//   delay_line.<host>.pid  "PID STARTTIME" of the host's delay line, written once it is bound
//   delay_line.<host>.stats, delay_line.<host>.log  what it reports (DelayLineStats), its stderr
//   hosts, hostfile, agent, measured
// Tear-down removes the queue rules and stops the delay lines (a delay line killed before its pid
// file was written is still inside its host and dies with the next step), kills every process
// whose network namespace is one of the fixture's, deletes the namespaces (their veth ends go with
// them), the links and the bridge, then the folder -- only once none of them is left: an object
// that would not go keeps the folder (and `hosts down` fails), so nothing is forgotten. Any up,
// down or status first tears down fixtures whose owner is gone, so a test (or an `up`) killed by
// SIGKILL leaves its hosts only until the next use; so too the namespace and veth pair the
// availability probes make (tbprobe<pid>, tbq<pid>) of a process that died in them.
class RootLock {
 public:
  RootLock() {
    fs::create_directories(hosts_state_root());
    fd_ = ::open((hosts_state_root() / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~RootLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  RootLock(const RootLock&) = delete;
  RootLock& operator=(const RootLock&) = delete;

 private:
  int fd_ = -1;
};

std::string host_name(int id, int k) { return "tb" + std::to_string(id) + "h" + std::to_string(k); }
std::string bridge_name(int id) { return "tb" + std::to_string(id) + "br"; }
std::string subnet_prefix(int id) { return "10.213." + std::to_string(id) + "."; }

bool link_exists(const std::string& name) { return fs::exists("/sys/class/net/" + name); }
bool netns_exists(const std::string& name) { return fs::exists("/run/netns/" + name); }

// Pids of the processes inside network namespace `name` (by the inode of /run/netns/<name>).
std::vector<int> pids_in_netns(const std::string& name) {
  struct stat st {};
  if (::stat(("/run/netns/" + name).c_str(), &st) != 0) return {};
  const std::string want = "net:[" + std::to_string(st.st_ino) + "]";
  std::vector<int> pids;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string id = it->path().filename().string();
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code e2;
    const fs::path target = fs::read_symlink(it->path() / "ns" / "net", e2);
    if (!e2 && target.string() == want && std::atoi(id.c_str()) != int(::getpid()))
      pids.push_back(std::atoi(id.c_str()));
  }
  return pids;
}

void kill_netns_processes(const std::string& name) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const std::vector<int> pids = pids_in_netns(name);
    if (pids.empty() || std::chrono::steady_clock::now() > until) return;
    for (int p : pids) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Note [Hostile state]: the state root comes from the environment (TRAINBENCH_HOSTS_DIR) and
// everything here runs as root, so a folder counts as a fixture only if its name is a fixture id,
// tear-down acts only on names the fixture of that id makes (tb<id>h<k>, tb<id>br) and reads pid
// files only under those names, and it deletes only the files a fixture writes, then the folder
// if that left it empty. (Before, `TRAINBENCH_HOSTS_DIR=$HOME trainbench hosts status` deleted
// every subfolder older than a minute, taking each for a fixture whose owner never wrote, and a
// made file naming "link eth0" would have deleted the machine's own interface.)
std::optional<int> fixture_id(const fs::path& dir) {
  const std::string n = dir.filename().string();
  if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos ||
      (n.size() > 1 && n[0] == '0'))
    return std::nullopt;
  const int id = std::stoi(n);
  return id < kMaxFixtures ? std::optional<int>(id) : std::nullopt;
}

// A host's name in fixture `id` (tb<id>h<k>, k in 1..kMaxHosts), as host_name makes it.
bool is_host_name(int id, const std::string& name) {
  const std::string prefix = "tb" + std::to_string(id) + "h";
  if (!name.starts_with(prefix)) return false;
  const std::string k = name.substr(prefix.size());
  if (k.empty() || k.size() > 3 || k[0] == '0' || k.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoi(k) <= kMaxHosts;
}

bool is_fixture_object(int id, const std::string& kind, const std::string& name) {
  if (kind == "bridge") return name == bridge_name(id);
  if (kind == "netns" || kind == "link" || kind == "delay_line" || kind == "queue_rule") return is_host_name(id, name);
  return false;
}

// The files a fixture writes in its folder (Note [Hosts state]).
bool is_fixture_file(int id, const std::string& file) {
  for (const char* f : {"owner", "owner.tmp", "made", "info", "hosts", "hostfile", "agent", "measured"})
    if (file == f) return true;
  const std::string pre = "delay_line.";
  if (!file.starts_with(pre)) return false;
  for (const char* ext : {".pid", ".stats", ".stats.tmp", ".log"})
    if (file.ends_with(ext) && file.size() > pre.size() + std::strlen(ext) &&
        is_host_name(id, file.substr(pre.size(), file.size() - pre.size() - std::strlen(ext))))
      return true;
  return false;
}

// Removes what the folder records, then the folder. Tolerates objects already gone; false (the
// folder kept, for the next try) when one of its namespaces or links is still there after.
bool tear_down(const fs::path& dir, std::ostream* log) {
  const std::optional<int> id = fixture_id(dir);
  if (!id) return true;  // not a fixture's folder (Note [Hostile state])
  std::vector<std::pair<std::string, std::string>> made;
  {
    std::istringstream is(read_file(dir / "made"));
    for (std::string kind, name; is >> kind >> name;) {
      if (is_fixture_object(*id, kind, name)) made.emplace_back(kind, name);
      else if (log)
        *log << "hosts: fixture " << *id << ": ignored '" << kind << ' ' << name
             << "' in its made file (not an object this fixture makes)\n";
    }
  }
  for (const auto& [kind, name] : made) {  // the delay lines, rules first: packets then pass undelayed
    if (kind == "queue_rule" && netns_exists(name)) run(delay_line_rule(name, false));
    if (kind == "delay_line") {
      std::istringstream is(read_file(dir / ("delay_line." + name + ".pid")));
      int pid = 0;
      std::string start;
      if (is >> pid >> start && start_time(pid) == start) stop_delay_line(pid);
    }
  }
  for (const auto& [kind, name] : made)  // then: nothing may run inside while links go
    if (kind == "netns") kill_netns_processes(name);
  std::string left;  // objects still there after their delete, with what the delete said
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    const auto& [kind, name] = *it;
    const bool netns = kind == "netns", link = kind == "link" || kind == "bridge";
    if (!(netns ? netns_exists(name) : link && link_exists(name))) continue;
    Ran r = run(netns ? std::vector<std::string>{"ip", "netns", "delete", name}
                      : std::vector<std::string>{"ip", "link", "delete", name});
    if (netns ? netns_exists(name) : link_exists(name)) {
      while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
      left += (left.empty() ? "" : "; ") + kind + " " + name + (r.out.empty() ? "" : " (" + r.out + ")");
    }
  }
  if (!left.empty()) {
    if (log) *log << "hosts: fixture " << *id << ": could not remove " << left << "; kept " << dir.string() << "\n";
    return false;
  }
  std::error_code ec;
  std::vector<std::string> foreign;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (is_fixture_file(*id, f) && !it->is_directory()) {
      std::error_code e2;
      fs::remove(it->path(), e2);
    } else {
      foreign.push_back(f);
    }
  }
  if (!foreign.empty()) {
    if (log) {
      *log << "hosts: kept " << dir.string() << ": it holds files no fixture writes (";
      for (std::size_t i = 0; i < foreign.size() && i < 5; ++i) *log << (i ? ", " : "") << foreign[i];
      *log << (foreign.size() > 5 ? ", ...)\n" : ")\n");
    }
    return true;  // its objects are gone; the foreign files are not ours to delete
  }
  fs::remove(dir, ec);
  if (log) *log << "hosts: removed fixture " << dir.filename().string() << " (" << made.size() << " objects)\n";
  return true;
}

struct OwnerState {
  int pid = 0;  // 0: persistent
  bool alive = false;
  bool known = false;  // the owner file was written
};

OwnerState read_owner(const fs::path& dir) {
  OwnerState o;
  std::istringstream is(read_file(dir / "owner"));
  std::string first, start;
  if (!(is >> first)) return o;
  o.known = true;
  if (first == "persistent") {
    o.alive = true;
    return o;
  }
  o.pid = std::atoi(first.c_str());
  is >> start;
  o.alive = o.pid > 0 && start_time(o.pid) == start;
  return o;
}

bool pid_alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// The availability probes' namespace tbprobe<pid> and veth pair tbq<pid>/tbq<pid>p, left by a
// process killed between making and deleting them (Note [Hosts state]).
void reap_probes(std::ostream* log) {
  auto dead_owner = [](const std::string& name, const std::string& prefix, bool peer) -> bool {
    if (!name.starts_with(prefix)) return false;
    std::string digits = name.substr(prefix.size());
    if (peer && !digits.empty() && digits.back() == 'p') digits.pop_back();
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      return false;
    return !pid_alive(std::stoi(digits));
  };
  std::error_code ec;
  for (fs::directory_iterator it("/run/netns", ec), end; !ec && it != end; it.increment(ec))
    if (const std::string n = it->path().filename().string(); dead_owner(n, "tbprobe", false)) {
      run({"ip", "netns", "delete", n});
      if (log) *log << "hosts: removed namespace " << n << ", left by a probe whose process is gone\n";
    }
  for (fs::directory_iterator it("/sys/class/net", ec), end; !ec && it != end; it.increment(ec))
    if (const std::string n = it->path().filename().string(); dead_owner(n, "tbq", true) && link_exists(n)) {
      run({"ip", "link", "delete", n});  // its peer goes with it
      if (log) *log << "hosts: removed link " << n << ", left by a probe whose process is gone\n";
    }
}

// Under the root lock: tears down fixtures whose owner died (or persistent ones when asked: all of
// them, or with `only` those of its ids).
int reap_locked(bool persistent_too, std::ostream* log, int* failed = nullptr, const std::vector<int>* only = nullptr) {
  reap_probes(log);
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(hosts_state_root(), ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory() || it->is_symlink() || !fixture_id(it->path())) continue;  // Note [Hostile state]
    const OwnerState o = read_owner(it->path());
    const bool asked = persistent_too &&
                       (!only || std::find(only->begin(), only->end(), *fixture_id(it->path())) != only->end());
    bool stale = o.known ? (o.pid == 0 ? asked : !o.alive) : false;
    if (!o.known) {
      // Claimed but the owner file never came. A claim writes it under this lock, so an empty
      // folder is a claimer killed in between (stale now); one with files, a minute on.
      std::error_code e2, e3;
      const auto age = fs::file_time_type::clock::now() - fs::last_write_time(it->path(), e2);
      stale = (!e3 && fs::is_empty(it->path(), e3)) || (!e2 && age > std::chrono::minutes(1));
    }
    if (!stale) {
      if (log && asked && o.pid)
        *log << "hosts: fixture " << it->path().filename().string() << " belongs to process " << o.pid
             << " (being made, or a test's): left as it is\n";
      continue;
    }
    if (log && o.pid)
      *log << "hosts: fixture " << it->path().filename().string() << " belonged to process " << o.pid
           << ", which is gone: tearing it down\n";
    if (tear_down(it->path(), log)) ++removed;
    else if (failed) ++*failed;
  }
  return removed;
}

std::string agent_script(int id, const std::vector<std::string>& names, const fs::path& hosts_file) {
  std::string cases;
  for (const std::string& n : names) cases += (cases.empty() ? "" : "|") + n;
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# trainbench hosts fixture " << id << ": Open MPI's launch agent (plm_rsh_agent), used as ssh would be:\n"
    << "#   agent HOST COMMAND...  runs the shell command line COMMAND inside HOST: its network namespace,\n"
    << "# a UTS namespace named HOST and a mount namespace whose /etc/hosts names every host.\n"
    << "host=$1; shift\n"
    << "case \"$host\" in " << cases
    << ") ;; *) echo \"trainbench hosts agent: unknown host '$host'\" >&2; exit 255;; esac\n"
    << "exec ip netns exec \"$host\" unshare --uts --mount sh -c "
    << "'mount --bind \"$2\" /etc/hosts && hostname \"$0\" && exec sh -c \"$1\"' \"$host\" \"$*\" "
    << shell_quote(hosts_file.string()) << "\n";
  return s.str();
}

void write_file(const fs::path& p, const std::string& text, fs::perms perms = fs::perms::none) {
  std::ofstream(p) << text;
  if (perms != fs::perms::none) fs::permissions(p, perms);
}

std::string rate_arg(double gbit) {
  std::ostringstream s;
  s << int64_t(gbit * 1000) << "mbit";
  return s.str();
}

// tbf's bucket: at least 1 ms of traffic and 256 KiB (veth hands it GSO packets up to 64 KiB).
std::string burst_arg(double gbit) {
  const int64_t bytes = std::max<int64_t>(int64_t(gbit * 1e9 / 8 / 1000), 256 << 10);
  return std::to_string(bytes);
}

}  // namespace

fs::path hosts_state_root() {
  const char* d = std::getenv("TRAINBENCH_HOSTS_DIR");
  return d && *d ? fs::path(d) : fs::path("/run/trainbench-hosts");
}

std::string hosts_unavailable_reason() {
  static std::once_flag once;
  static std::string reason;
  std::call_once(once, [] {
    if (::geteuid() != 0) {
      reason = "hosts need root (network namespaces, veth links, a bridge): running as uid " +
               std::to_string(::geteuid());
      return;
    }
    const std::string probe = "tbprobe" + std::to_string(::getpid());
    Ran r = run({"ip", "netns", "add", probe});
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    if (!r.ok) {
      reason = "cannot create a network namespace (`ip netns add` failed: " + r.out +
               "); needs CAP_SYS_ADMIN, CAP_NET_ADMIN and iproute2";
      return;
    }
    const Ran u = run({"ip", "netns", "exec", probe, "unshare", "--uts", "--mount", "true"});
    run({"ip", "netns", "delete", probe});
    if (!u.ok)
      reason = "cannot enter a namespace with its own hostname (`unshare --uts --mount` failed: " + u.out + ")";
  });
  return reason;
}

bool link_delay_supported() {
  static std::once_flag once;
  static bool yes = false;
  std::call_once(once, [] {
    const std::string a = "tbq" + std::to_string(::getpid()), b = a + "p";
    if (!run({"ip", "link", "add", a, "type", "veth", "peer", "name", b}).ok) return;
    yes = run({"tc", "qdisc", "add", "dev", a, "root", "netem", "delay", "1ms"}).ok;
    run({"ip", "link", "delete", a});
  });
  return yes;
}

struct HostsFixture::State {
  int id = -1;
  int ranks_per_host = 2;
  LinkProfile profile;
  LatencyShaping latency = LatencyShaping::None;
  std::string latency_note;
  std::vector<int> delay_line_pids;
  std::vector<Host> hosts;
  fs::path dir;
  bool torn_down = false;
};

HostsFixture::HostsFixture(std::unique_ptr<State> s) : s_(std::move(s)) {}
HostsFixture::HostsFixture(HostsFixture&&) noexcept = default;
HostsFixture& HostsFixture::operator=(HostsFixture&& o) noexcept {
  if (this != &o) {
    down();
    s_ = std::move(o.s_);
  }
  return *this;
}
HostsFixture::~HostsFixture() { down(); }

void HostsFixture::detach() {
  if (s_) s_->torn_down = true;
}

void HostsFixture::down() {
  if (!s_ || s_->torn_down) return;
  s_->torn_down = true;
  RootLock lock;
  tear_down(s_->dir, nullptr);  // what would not go stays recorded: the next up, down or status retries
}

// Note [The delay line] (harness/delay_line.cpp): without netem, one delay line per host holds
// what the host sends out of eth0 (to the other hosts and the bridge; its own loopback is not
// queued), so host-to-host one way is the profile's delay, as netem on each host's eth0 gives. A
// process of its own (`trainbench hosts delay-line`, started with posix_spawn: a fork of this
// possibly multi-threaded process could only safely exec), entering the host's namespace itself.
// Where it cannot start (no nfnetlink_queue, no iptables, a program that is not trainbench) the
// first host says so and latency stays unshaped; a failure on a later host is an error.
void HostsFixture::start_delay_lines(State& s,
                                     const std::function<void(const std::string&, const std::string&)>& record) {
  const std::string exe = self_exe();
  std::string why;
  if (fs::path(exe).filename() != "trainbench")
    why = "the delay line runs as `trainbench hosts delay-line`, and this program (" + exe + ") is not trainbench";
  for (const Host& h : s.hosts) {
    if (!why.empty()) break;
    int pid = 0;
    try {
      record("delay_line", h.name);
      pid = start_delay_line(exe, h.name, std::chrono::nanoseconds(int64_t(s.profile.delay_us * 1000)),
                             s.dir / ("delay_line." + h.name + ".stats"), s.dir / ("delay_line." + h.name + ".log"));
      write_file(s.dir / ("delay_line." + h.name + ".pid"), std::to_string(pid) + " " + start_time(pid) + "\n");
      s.delay_line_pids.push_back(pid);
      record("queue_rule", h.name);
      const std::vector<std::string> rule = delay_line_rule(h.name, true);
      if (const Ran r = run(rule); !r.ok) throw std::runtime_error("`" + shell_join(rule) + "` failed: " + r.out);
    } catch (const std::runtime_error& e) {
      if (&h != &s.hosts.front()) throw;
      why = e.what();
      while (!why.empty() && why.back() == '\n') why.pop_back();
      if (pid > 0) stop_delay_line(pid);
      s.delay_line_pids.clear();
    }
  }
  if (why.empty()) {
    s.latency = LatencyShaping::DelayLine;
    s.latency_note = "the NFQUEUE delay line in each host, on what it sends out of eth0 (no netem here)";
  } else {
    s.latency_note = "not shaped: this kernel has no netem qdisc, and the NFQUEUE delay line cannot start: " + why;
  }
}

HostsFixture HostsFixture::up(const HostsOptions& o) {
  if (o.hosts < 1 || o.hosts > kMaxHosts)
    throw std::invalid_argument("hosts: the number of hosts must be 1.." + std::to_string(kMaxHosts) + " (got " +
                                std::to_string(o.hosts) + ")");
  if (o.ranks_per_host < 1 || o.ranks_per_host > 256)
    throw std::invalid_argument("hosts: ranks per host must be 1..256 (got " + std::to_string(o.ranks_per_host) + ")");
  const LinkProfile& profile = link_profile(o.profile);
  // mpirun splits OMPI_MCA_plm_rsh_agent (the agent's path in the state folder) at blanks.
  if (const std::string root = hosts_state_root().string();
      std::any_of(root.begin(), root.end(), [](unsigned char c) { return std::isspace(c); }))
    throw std::invalid_argument("hosts: the state folder '" + root +
                                "' has a blank in its path, which Open MPI's launch agent setting cannot hold; "
                                "set TRAINBENCH_HOSTS_DIR to a path without blanks");
  if (std::string why = hosts_unavailable_reason(); !why.empty()) throw HostsUnavailable(why);

  auto st = std::make_unique<State>();
  st->ranks_per_host = o.ranks_per_host;
  st->profile = profile;
  {
    RootLock lock;
    reap_locked(false, nullptr);
    const std::string addresses = run({"ip", "-o", "-4", "addr", "show"}).out;  // subnets in use here
    for (int id = 0; id < kMaxFixtures && st->id < 0; ++id) {
      const fs::path dir = hosts_state_root() / std::to_string(id);
      // Taken by another fixture, or its names or subnet used by something that is not ours.
      bool taken = fs::exists(dir) || link_exists(bridge_name(id)) ||
                   addresses.find(" " + subnet_prefix(id)) != std::string::npos;
      for (int k = 1; k <= o.hosts && !taken; ++k)
        taken = netns_exists(host_name(id, k)) || link_exists(host_name(id, k));
      if (taken) continue;
      fs::create_directory(dir);
      st->id = id;
      st->dir = dir;
    }
    if (st->id < 0)
      throw std::runtime_error("hosts: every fixture id 0.." + std::to_string(kMaxFixtures - 1) + " is taken");
    // This process owns it while it is made, persistent or not (Note [Hosts state]).
    write_file(st->dir / "owner", std::to_string(::getpid()) + " " + start_time(::getpid()) + "\n");
  }
  HostsFixture f(std::move(st));  // from here, a throw tears down what was made
  State& s = *f.s_;
  std::ofstream made(s.dir / "made", std::ios::app);
  auto record = [&](const std::string& kind, const std::string& name) {
    made << kind << ' ' << name << '\n' << std::flush;
  };
  // Records, then runs the `add`; where it fails (the name exists: a fixture of another state
  // folder, or not ours at all) the line is taken back, so tear-down leaves that object alone.
  auto make = [&](const std::string& kind, const std::string& name, const std::vector<std::string>& add) {
    made.flush();
    const auto before = fs::file_size(s.dir / "made");
    record(kind, name);
    if (const Ran r = run(add); !r.ok) {
      fs::resize_file(s.dir / "made", before);
      throw std::runtime_error("hosts: `" + shell_join(add) + "` failed: " + r.out);
    }
  };

  const std::string prefix = subnet_prefix(s.id);
  for (int k = 1; k <= o.hosts; ++k)
    s.hosts.push_back({host_name(s.id, k), prefix + std::to_string(k + 1), host_name(s.id, k)});
  std::vector<std::string> names;
  std::string etc_hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost\n" + prefix + "1\t" + bridge_name(s.id) + "\n";
  for (const Host& h : s.hosts) {
    names.push_back(h.name);
    etc_hosts += h.address + "\t" + h.name + "\n";
  }
  write_file(s.dir / "hosts", etc_hosts);
  std::string hostfile = "# trainbench hosts fixture " + std::to_string(s.id) + " (profile " + profile.name + ")\n";
  for (const Host& h : s.hosts) hostfile += h.name + " slots=" + std::to_string(o.ranks_per_host) + "\n";
  write_file(s.dir / "hostfile", hostfile);
  write_file(s.dir / "agent", agent_script(s.id, names, s.dir / "hosts"),
             fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                 fs::perms::others_exec);

  const std::string br = bridge_name(s.id);
  make("bridge", br, {"ip", "link", "add", br, "type", "bridge"});
  must({"ip", "addr", "add", prefix + "1/24", "dev", br});
  must({"ip", "link", "set", br, "up"});
  const bool netem = profile.delay_us > 0 && link_delay_supported();
  s.latency = netem ? LatencyShaping::Netem : LatencyShaping::None;
  s.latency_note = profile.delay_us <= 0 ? "no delay asked" : netem ? "netem on each host's eth0" : "";
  for (const Host& h : s.hosts) {
    make("netns", h.name, {"ip", "netns", "add", h.name});
    make("link", h.link, {"ip", "link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.name});
    must({"ip", "link", "set", h.link, "master", br, "up"});
    must({"ip", "-n", h.name, "link", "set", "lo", "up"});
    must({"ip", "-n", h.name, "addr", "add", h.address + "/24", "dev", "eth0"});
    must({"ip", "-n", h.name, "link", "set", "eth0", "up"});
    if (profile.rate_gbit > 0) {
      // Into the host (bridge side) and out of it (eth0 inside): full duplex at the rate.
      must({"tc", "qdisc", "add", "dev", h.link, "root", "tbf", "rate", rate_arg(profile.rate_gbit), "burst",
            burst_arg(profile.rate_gbit), "latency", "50ms"});
      if (netem) {
        must({"ip", "netns", "exec", h.name, "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem",
              "delay", std::to_string(int64_t(profile.delay_us)) + "us"});
        must({"ip",      "netns",
              "exec",    h.name,
              "tc",      "qdisc",
              "add",     "dev",
              "eth0",    "parent",
              "1:1",     "handle",
              "10:",     "tbf",
              "rate",    rate_arg(profile.rate_gbit),
              "burst",   burst_arg(profile.rate_gbit),
              "latency", "50ms"});
      } else {
        must({"ip", "netns", "exec", h.name, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
              rate_arg(profile.rate_gbit), "burst", burst_arg(profile.rate_gbit), "latency", "50ms"});
      }
    } else if (netem) {
      must({"ip", "netns", "exec", h.name, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
            std::to_string(int64_t(profile.delay_us)) + "us"});
    }
  }
  if (profile.delay_us > 0 && !netem) start_delay_lines(s, record);
  std::ostringstream info;
  info << "profile " << profile.name << "\nranks_per_host " << o.ranks_per_host << "\nlatency_shaping "
       << latency_shaping_name(s.latency) << "\nlatency_note " << s.latency_note << "\n";
  for (const Host& h : s.hosts) info << "host " << h.name << ' ' << h.address << ' ' << h.link << '\n';
  write_file(s.dir / "info", info.str());
  if (o.persistent) {  // made: from now on only `hosts down` removes it (renamed in: never half a word)
    write_file(s.dir / "owner.tmp", "persistent\n");
    fs::rename(s.dir / "owner.tmp", s.dir / "owner");
  }
  return f;
}

int HostsFixture::id() const { return s_->id; }
const std::vector<Host>& HostsFixture::hosts() const { return s_->hosts; }
int HostsFixture::ranks_per_host() const { return s_->ranks_per_host; }
const LinkProfile& HostsFixture::profile() const { return s_->profile; }
bool HostsFixture::latency_shaped() const { return s_->latency != LatencyShaping::None; }
LatencyShaping HostsFixture::latency_shaping() const { return s_->latency; }
const std::string& HostsFixture::latency_note() const { return s_->latency_note; }
std::vector<int> HostsFixture::delay_line_pids() const { return s_->delay_line_pids; }
std::string HostsFixture::subnet() const { return subnet_prefix(s_->id) + "0/24"; }
std::string HostsFixture::bridge() const { return bridge_name(s_->id); }
const fs::path& HostsFixture::state_dir() const { return s_->dir; }
std::string HostsFixture::hostfile() const { return (s_->dir / "hostfile").string(); }
std::string HostsFixture::agent() const { return (s_->dir / "agent").string(); }

const Host& HostsFixture::host_of(int rank) const {
  const int h = rank / s_->ranks_per_host;
  if (rank < 0 || h >= int(s_->hosts.size()))
    throw std::out_of_range("hosts: rank " + std::to_string(rank) + " is on no host of this fixture (" +
                            std::to_string(s_->hosts.size()) + " x " + std::to_string(s_->ranks_per_host) + " slots)");
  return s_->hosts[std::size_t(h)];
}

// Note [Long messages over a shaped link]
// Open MPI's TCP btl sends what is left of a long message, after its first 192 KiB, as one fragment
// (btl_tcp_rdma_pipeline_frag_size defaults to ~2 GiB). On the 1g-200us link the DDP benchmark's
// buckets, all-reduced while backward runs (the MLP at 2 hosts x 1: 4.2 and 3.2 MB, each rank sends
// its whole bucket to the other), took 53-70 ms instead of 37 in about half the steps: one or two
// half-transfers longer (~17 ms each), as if the two directions took turns; the step ran 85-89 ms
// against 77 with the buckets issued at the end of backward, where no step stalled (flight-recorder
// times per bucket, 2 runs of each). Fragments of 128 KiB took the stall away (79 ms; 512 KiB and 1
// MiB did not: 88-93) and left the lockstep sweep as it was (all_reduce of 4 MiB 34.2 against 34.5
// ms), but at 10 Gb/s they cost (MLP 29-34 ms against 25); fragments of ~1 ms of the link's rate
// cost nothing there (1.25 MiB: MLP 24.6-26.4 against 23.4-27.6 ms, GPT 280-282 against 285-293;
// the 2 x 2 sweep's all_reduce of 16 MiB 33-38 ms against 35-55, alternating).
// So a shaped link's launches send fragments of ~1 ms of its nominal rate, unless the variable is
// set already; unshaped links keep Open MPI's default. docs/distributed.md says how to set it on
// real hosts.
std::size_t tcp_fragment_bytes(const LinkProfile& p) {
  if (!(p.rate_gbit > 0)) return 0;
  // At most Open MPI's own default (one fragment per message): a rate of 1e300 or inf is no size_t.
  constexpr double kUnit = 64 * 1024, kMin = 128 * 1024, kMax = 2147482624.0;
  const double bytes_per_ms = p.rate_gbit * 1e9 / 8 / 1e3;
  return std::size_t(std::clamp(std::ceil(bytes_per_ms / kUnit) * kUnit, kMin, kMax));
}

std::map<std::string, std::string> HostsFixture::launch_env() const {
  std::map<std::string, std::string> env = {
      {"OMPI_MCA_plm_rsh_agent", agent()},
      // TCP between hosts, shared memory (vader) only between ranks of one host.
      {"OMPI_MCA_btl", "tcp,vader,self"},
      {"OMPI_MCA_btl_tcp_if_include", subnet()},
      {"OMPI_MCA_oob_tcp_if_include", subnet()},
      // Every host shares this machine's cores: no busy polling (as on one host), and no binding by
      // Open MPI, whose daemon on each host would bind from core 0 up; the harness gives the ranks
      // cores of their own across the hosts when they fit (TRAINBENCH_HOSTS_SHARE_CORES; Note [A
      // core of its own] in engine/dist/placement.cpp).
      {"OMPI_MCA_hwloc_base_binding_policy", "none"},
      {"OMPI_MCA_mpi_yield_when_idle", "1"},
      {"TRAINBENCH_HOSTS_SHARE_CORES", "1"},
      {"TRAINBENCH_GLOO_IFACE", "eth0"},
  };
  constexpr const char* kFragment = "OMPI_MCA_btl_tcp_rdma_pipeline_frag_size";
  if (const std::size_t bytes = tcp_fragment_bytes(profile()); bytes > 0 && !std::getenv(kFragment))
    env[kFragment] = std::to_string(bytes);  // Note [Long messages over a shaped link]
  return env;
}

void HostsFixture::apply(LaunchSpec& spec) const {
  spec.hostfile = hostfile();
  for (const auto& [k, v] : launch_env()) spec.env[k] = v;
}

std::vector<std::string> HostsFixture::exec_prefix(int h) const {
  const Host& host = s_->hosts.at(std::size_t(h));
  return {"ip",
          "netns",
          "exec",
          host.name,
          "unshare",
          "--uts",
          "--mount",
          "sh",
          "-c",
          "mount --bind " + shell_quote((s_->dir / "hosts").string()) + " /etc/hosts && hostname " + host.name +
              " && exec \"$@\"",
          "sh"};
}

void HostsFixture::set_link(int h, bool up) const {
  const Host& host = s_->hosts.at(std::size_t(h));
  must({"ip", "link", "set", host.link, up ? "up" : "down"});
  must({"ip", "-n", host.name, "link", "set", "eth0", up ? "up" : "down"});
}

std::string HostsFixture::describe_hosts(const std::vector<int>& ranks) const {
  std::map<std::string, std::vector<int>> by_host;
  for (int r : ranks) by_host[host_of(r).name].push_back(r);
  std::string out;
  for (const auto& [name, rs] : by_host) {
    std::string list;
    for (int r : rs) list += (list.empty() ? "" : ", ") + std::to_string(r);
    out += (out.empty() ? "" : "; ") + std::string("host ") + name + " (rank" + (rs.size() > 1 ? "s " : " ") + list +
           ")";
  }
  return out;
}

// Note [Which host failed]
// A host that fails takes all its ranks with it, and what the survivors can say is partial: their
// watchdogs name the ranks whose progress they cannot see ("rank 2's progress is unknown (on host
// tb0h2)", "rank 3 never arrived"), Gloo names the peer address whose connection broke, mpirun names
// one rank of the node it saw die ("process rank 2 ... on node tb0h2 exited on signal 9"). Each
// such line makes its rank (or every rank of the named address or node) a suspect; a rank whose
// own watchdog or error line came out is heard from. A host is lost when some rank of it is a
// suspect and none of its ranks was heard from; the diagnosis names it with all its ranks.
std::string HostsFixture::diagnose(const LaunchResult& res) const {
  const int ranks = int(res.rank_output.size());
  std::set<int> suspects, heard;
  std::map<int, std::string> evidence;  // rank -> first line that made it a suspect
  auto suspect = [&](int r, const std::string& line) {
    if (r < 0 || r >= ranks) return;
    suspects.insert(r);
    evidence.emplace(r, line);
  };
  auto host_index = [&](const std::string& key) {  // a host's name or address -> index, or -1
    for (std::size_t h = 0; h < s_->hosts.size(); ++h)
      if (s_->hosts[h].name == key || s_->hosts[h].address == key) return int(h);
    return -1;
  };
  auto suspect_host = [&](int h, const std::string& line) {
    for (int r = h * s_->ranks_per_host; h >= 0 && r < (h + 1) * s_->ranks_per_host; ++r) suspect(r, line);
  };
  static const std::regex unknown(R"(rank (\d+)'s progress is unknown)");
  static const std::regex never(R"(rank (\d+) never arrived)");
  static const std::regex died(R"(process rank (\d+) with PID \d+ on node ([\w.-]+) exited on signal)");
  static const std::regex lost_node(R"(lost communication with a remote daemon|Remote daemon: \S+ on node ([\w.-]+))");
  static const std::regex address(R"((10\.213\.\d+\.\d+))");
  static const std::regex watchdog(R"(trainbench: watchdog: rank (\d+):)");
  auto scan = [&](const std::string& text, int own_rank) {
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) {
      std::smatch m;
      if (std::regex_search(l, m, watchdog)) heard.insert(std::stoi(m[1]));
      for (const std::regex* re : {&unknown, &never})
        for (auto it = std::sregex_iterator(l.begin(), l.end(), *re); it != std::sregex_iterator(); ++it)
          suspect(std::stoi((*it)[1]), l);
      if (std::regex_search(l, m, died)) suspect_host(host_index(m[2]), l);
      if (std::regex_search(l, m, lost_node) && m[1].matched) suspect_host(host_index(m[1]), l);
      // A broken connection to a peer's address, in a rank's own error (Gloo's "... [10.213.0.3]:...").
      if (own_rank >= 0 && l.find("rror") != std::string::npos)
        for (auto it = std::sregex_iterator(l.begin(), l.end(), address); it != std::sregex_iterator(); ++it)
          if (const int h = host_index((*it)[1]); h >= 0 && &host_of(own_rank) != &s_->hosts[std::size_t(h)])
            suspect_host(h, l);
    }
  };
  for (int r = 0; r < ranks; ++r) scan(res.rank_output[std::size_t(r)], r);
  scan(res.launcher_output, -1);
  std::ostringstream os;
  int lost = 0;
  for (std::size_t h = 0; h < s_->hosts.size(); ++h) {
    std::vector<int> own;
    bool any_suspect = false, any_heard = false;
    for (int r = int(h) * s_->ranks_per_host; r < int(h + 1) * s_->ranks_per_host && r < ranks; ++r) {
      own.push_back(r);
      any_suspect = any_suspect || suspects.count(r);
      any_heard = any_heard || heard.count(r);
    }
    if (!any_suspect || any_heard) continue;
    os << (lost++ ? "\n" : "") << "lost " << describe_hosts(own) << " (" << s_->hosts[h].address << ")";
    for (int r : own)
      if (evidence.count(r)) {
        std::string line = evidence[r];
        if (line.size() > 240) line = line.substr(0, 237) + "...";
        os << ": " << line;
        break;
      }
  }
  if (!lost) os << "no host was lost as far as the output shows (no rank of one host both suspected and silent)";
  os << "\n" << res.diagnosis();
  return os.str();
}

namespace {

bool enter_netns(const std::string& name) {
  const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n) {
    const ssize_t k = ::write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= std::size_t(k);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n) {
    const ssize_t k = ::read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= std::size_t(k);
  }
  return true;
}

constexpr int kPingPongs = 2000;
constexpr std::size_t kBulkBytes = std::size_t(64) << 20;

// The probe's server, in a child inside the receiving host: tells the parent its port through
// `port_pipe`, echoes kPingPongs single bytes, reads kBulkBytes and answers one byte.
[[noreturn]] void probe_server(const std::string& ns, const std::string& address, int port_pipe) {
  int port = 0;
  int ls = -1;
  if (enter_netns(ns)) {
    ls = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (ls >= 0 && ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(ls, 1) == 0 &&
        ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  write_all(port_pipe, reinterpret_cast<const char*>(&port), sizeof port);
  ::close(port_pipe);
  if (!port) ::_exit(2);
  alarm(120);
  const int c = ::accept(ls, nullptr, nullptr);
  int one = 1;
  ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char b = 0;
  for (int i = 0; i < kPingPongs; ++i)
    if (!read_all(c, &b, 1) || !write_all(c, &b, 1)) ::_exit(3);
  std::vector<char> buf(1 << 20);
  for (std::size_t got = 0; got < kBulkBytes;) {
    const ssize_t k = ::read(c, buf.data(), std::min(buf.size(), kBulkBytes - got));
    if (k <= 0) ::_exit(4);
    got += std::size_t(k);
  }
  write_all(c, &b, 1);
  ::_exit(0);
}

}  // namespace

LinkMeasurement HostsFixture::measure_link(int from, int to) const {
  return tb::harness::measure_link(s_->hosts.at(std::size_t(from)), s_->hosts.at(std::size_t(to)));
}

LinkMeasurement measure_link(const Host& src, const Host& dst) {
  int port_pipe[2], result_pipe[2];
  if (::pipe(port_pipe) != 0 || ::pipe(result_pipe) != 0) throw std::runtime_error("hosts: probe: pipe failed");
  const pid_t server = ::fork();
  if (server == 0) {
    ::close(port_pipe[0]);
    probe_server(dst.name, dst.address, port_pipe[1]);
  }
  ::close(port_pipe[1]);
  int port = 0;
  read_all(port_pipe[0], reinterpret_cast<char*>(&port), sizeof port);
  ::close(port_pipe[0]);
  pid_t client = -1;
  if (port) {
    client = ::fork();
    if (client == 0) {  // the client, inside the sending host: ping-pongs, then the bulk transfer
      ::close(result_pipe[0]);
      alarm(120);
      double out[2] = {0, 0};
      if (enter_netns(src.name)) {
        const int c = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        ::inet_pton(AF_INET, dst.address.c_str(), &a.sin_addr);
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
          using Clock = std::chrono::steady_clock;
          std::vector<double> rtt;
          rtt.reserve(kPingPongs);
          char b = 1;
          bool ok = true;
          for (int i = 0; i < kPingPongs && ok; ++i) {
            const auto t0 = Clock::now();
            ok = write_all(c, &b, 1) && read_all(c, &b, 1);
            rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          }
          std::vector<char> buf(1 << 20, 'x');
          const auto t0 = Clock::now();
          for (std::size_t sent = 0; ok && sent < kBulkBytes; sent += buf.size())
            ok = write_all(c, buf.data(), std::min(buf.size(), kBulkBytes - sent));
          ok = ok && read_all(c, &b, 1);
          const double s = std::chrono::duration<double>(Clock::now() - t0).count();
          if (ok) {
            std::nth_element(rtt.begin(), rtt.begin() + long(rtt.size() / 2), rtt.end());
            out[0] = rtt[rtt.size() / 2];
            out[1] = double(kBulkBytes) * 8 / s / 1e9;
          }
        }
      }
      write_all(result_pipe[1], reinterpret_cast<const char*>(out), sizeof out);
      ::_exit(0);
    }
  }
  ::close(result_pipe[1]);
  double out[2] = {0, 0};
  const bool got = client > 0 && read_all(result_pipe[0], reinterpret_cast<char*>(out), sizeof out);
  ::close(result_pipe[0]);
  for (pid_t p : {server, client})
    if (p > 0) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
  if (!got || out[0] <= 0)
    throw std::runtime_error("hosts: the TCP probe from " + src.name + " to " + dst.name + " failed");
  return {out[1], out[0], out[0] / 2};
}

std::vector<FixtureRecord> list_fixtures() {
  std::vector<FixtureRecord> out;
  std::error_code ec;
  for (fs::directory_iterator it(hosts_state_root(), ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory() || it->is_symlink() || !fixture_id(it->path())) continue;  // Note [Hostile state]
    FixtureRecord r;
    r.dir = it->path();
    r.id = std::atoi(it->path().filename().c_str());
    const OwnerState o = read_owner(r.dir);
    r.owner_pid = o.pid;
    r.owner_alive = o.alive;
    std::istringstream is(read_file(r.dir / "info"));
    for (std::string key; is >> key;) {
      if (key == "profile") is >> r.profile;
      else if (key == "latency_shaping") {
        std::string v;
        is >> v;
        r.latency_shaping = v == "netem"        ? LatencyShaping::Netem
                            : v == "delay_line" ? LatencyShaping::DelayLine
                                                : LatencyShaping::None;
      } else if (key == "latency_note") {
        std::getline(is >> std::ws, r.latency_note);
      } else if (key == "ranks_per_host") is >> r.ranks_per_host;
      else if (key == "host") {
        Host h;
        is >> h.name >> h.address >> h.link;
        r.hosts.push_back(h);
      } else {
        std::string rest;
        std::getline(is, rest);
      }
    }
    for (const Host& h : r.hosts) {
      std::istringstream pid_file(read_file(r.dir / ("delay_line." + h.name + ".pid")));
      int pid = 0;
      std::string start;
      if (pid_file >> pid >> start && start_time(pid) == start) r.delay_line_pids.push_back(pid);
    }
    r.measured = read_file(r.dir / "measured");
    while (!r.measured.empty() && r.measured.back() == '\n') r.measured.pop_back();
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const FixtureRecord& a, const FixtureRecord& b) { return a.id < b.id; });
  return out;
}

int reap_fixtures(bool persistent_too, std::ostream* log, int* failed, const std::vector<int>* only) {
  if (!fs::exists(hosts_state_root())) return 0;
  RootLock lock;
  return reap_locked(persistent_too, log, failed, only);
}

}  // namespace tb::harness
