// The Slurm fixture: a folder with slurm.conf and a munge key, three kinds of daemon started as
// children of this process (each in its own process group, killed if we die), and their pids.
#include "harness/slurm_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "harness/subprocess.h"

extern char** environ;

namespace tb::harness {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The programs the fixture runs, and the Debian package of each.
constexpr const char* kPrograms[][2] = {{"munged", "munge"},       {"slurmctld", "slurmctld"},
                                        {"slurmd", "slurmd"},      {"srun", "slurm-client"},
                                        {"sinfo", "slurm-client"}, {"scancel", "slurm-client"}};

bool on_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((fs::path(d) / prog).c_str(), X_OK) == 0) return true;
  // Daemons live in /usr/sbin, which a non-login root shell may not have on PATH.
  return ::access(("/usr/sbin/" + prog).c_str(), X_OK) == 0;
}

std::string program_path(const std::string& prog) {
  return ::access(("/usr/sbin/" + prog).c_str(), X_OK) == 0 ? "/usr/sbin/" + prog : prog;
}

// A TCP port free on every address right now (the kernel's pick); a race with another process
// binding it before the daemon does shows as a start failure naming the port.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("slurm fixture: socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error(std::string("slurm fixture: no free port: ") + std::strerror(errno));
  return ntohs(a.sin_port);
}

std::string tail_of(const fs::path& file, std::size_t lines) {
  std::ifstream f(file);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "\n    " + all[i];
  return out;
}

// Note [slurmd in a namespace host]
// slurmd loads its cgroup plugin even with proctrack/linuxproc and task/none, and that plugin
// refuses to start without the machine's cgroup layout under /sys/fs/cgroup. `ip netns exec`
// mounts a fresh sysfs for the namespace, which has none, so slurmd's start in a namespace host
// (inside the host's own mount namespace) first mounts what the plugin checks for: cgroup2 where
// this machine has a unified hierarchy, else a tmpfs with the v1 "name=systemd" hierarchy (the one
// it stats). Nothing is created in these hierarchies: no cgroup plugin is configured.
// The same start mounts the node's own folder over TmpFS: Slurm's PMIx plugin makes
// <TmpFS>/spmix_appdir_<uid>_<job>.<step> on every node of a step, and the namespace hosts share
// this machine's filesystem, so one shared TmpFS made the second node's step fail ("File exists").
std::string cgroup_mounts() {
  struct statfs fs {};
  constexpr long kCgroup2Magic = 0x63677270;
  if (::statfs("/sys/fs/cgroup", &fs) == 0 && long(fs.f_type) == kCgroup2Magic)
    return "mount -t cgroup2 cgroup2 /sys/fs/cgroup";
  return "mount -t tmpfs tmpfs /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/systemd && "
         "mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd";
}

}  // namespace

std::string slurm_unavailable_reason() {
  std::string missing, packages;
  for (const auto& [prog, pkg] : kPrograms)
    if (!on_path(prog)) {
      missing += std::string(missing.empty() ? "" : ", ") + prog;
      if (packages.find(pkg) == std::string::npos) packages += std::string(packages.empty() ? "" : " ") + pkg;
    }
  if (!missing.empty())
    return "Slurm is not installed: no " + missing + " (Debian packages " + packages + "; ci/bootstrap installs them)";
  if (::geteuid() != 0) return "the Slurm fixture needs root (slurmd starts tasks as any user)";
  return {};
}

struct SlurmCluster::State {
  fs::path dir;
  SlurmOptions options;
  struct Daemon {
    std::string what;  // "munged", "slurmctld", "slurmd on tb0h1"
    int pid = 0;
    fs::path log;
  };
  std::vector<Daemon> daemons;
  bool down = false;

  fs::path conf() const { return dir / "slurm.conf"; }

  // fork + exec with stdout/stderr to `log`, in a new process group, killed when we die.
  void start(const std::string& what, const std::vector<std::string>& argv, const fs::path& log) {
    std::vector<std::string> env_store;
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "SLURM_CONF=", 11) != 0) env_store.emplace_back(*e);
    // Every process of the cluster (and every task of a step, through srun's environment) carries
    // it: down() finds them by it (processes_with_env).
    env_store.push_back("SLURM_CONF=" + conf().string());
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (std::string& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("slurm fixture: cannot open " + log.string() + ": " + std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(out);
      throw std::runtime_error(std::string("slurm fixture: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed test leaves no daemon behind
      if (::getppid() != parent) ::_exit(127);
      const int in = ::open("/dev/null", O_RDONLY);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execvpe(args[0], args.data(), envp.data());
      const std::string msg = std::string("cannot execute ") + args[0] + ": " + std::strerror(errno) + "\n";
      (void)!::write(2, msg.data(), msg.size());
      ::_exit(127);
    }
    ::close(out);
    daemons.push_back({what, int(pid), log});
  }

  // The last lines of every daemon's output and log file, for an error message.
  std::string logs() const {
    std::string out;
    for (const Daemon& d : daemons) out += "\n  " + d.what + " (" + d.log.string() + "):" + tail_of(d.log, 8);
    for (const char* f : {"ctld/slurmctld.log"})
      if (fs::exists(dir / f)) out += "\n  " + (dir / f).string() + ":" + tail_of(dir / f, 8);
    for (const SlurmNode& n : options.nodes) {
      const fs::path f = dir / "spool" / ("slurmd-" + n.name + ".log");
      if (fs::exists(f)) out += "\n  " + f.string() + ":" + tail_of(f, 8);
    }
    return out;
  }

  SubprocessResult client(std::vector<std::string> argv, std::chrono::milliseconds timeout) const {
    SubprocessSpec s;
    s.argv = std::move(argv);
    s.env["SLURM_CONF"] = conf().string();
    s.timeout = timeout;
    s.grace = std::chrono::milliseconds(500);
    s.output = SubprocessSpec::Output::Merge;
    return run_subprocess(s);
  }

  // A daemon that already exited (bad config, port taken), reaped: its description, else empty.
  std::string dead_daemon() {
    for (Daemon& d : daemons) {
      if (d.pid <= 0) continue;
      int status = 0;
      if (::waitpid(d.pid, &status, WNOHANG) == d.pid) {
        d.pid = -d.pid;
        return d.what + (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                           : " was killed by signal " + std::to_string(WTERMSIG(status)));
      }
    }
    return {};
  }

  void teardown() {
    if (down) return;
    down = true;
    bool any_alive = false;
    for (const Daemon& d : daemons) any_alive = any_alive || d.pid > 0;
    // Running jobs first, while slurmctld can still tell the slurmds to end their steps.
    if (any_alive) client({"scancel", "--quiet", "--user=" + std::to_string(::geteuid())}, std::chrono::seconds(5));
    const auto signal_daemons = [&](int sig) {
      for (const Daemon& d : daemons)
        if (d.pid > 0) ::kill(d.pid, sig);
    };
    signal_daemons(SIGTERM);
    const auto until = Clock::now() + std::chrono::seconds(5);
    for (;;) {
      bool alive = false;
      for (Daemon& d : daemons) {
        if (d.pid <= 0) continue;
        if (::waitpid(d.pid, nullptr, WNOHANG) == d.pid) d.pid = -d.pid;
        else alive = true;
      }
      if (!alive) break;
      if (Clock::now() >= until) {
        signal_daemons(SIGKILL);
        for (Daemon& d : daemons)
          if (d.pid > 0 && ::waitpid(d.pid, nullptr, 0) == d.pid) d.pid = -d.pid;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // slurmstepd (outside the daemons' groups: slurmd double-forks it) and the tasks of any step
    // carry the cluster's SLURM_CONF; nothing else does.
    const auto sweep_until = Clock::now() + std::chrono::seconds(5);
    for (std::vector<int> left;
         !(left = processes_with_env("SLURM_CONF", conf().string())).empty() && Clock::now() < sweep_until;) {
      for (int pid : left) ::kill(pid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // munge key, slurm.conf, an empty plugstack.conf (not the machine's /etc/slurm/plugstack.conf.d).
  void write_files(int ctld_port, int slurmd_port) {
    fs::create_directories(dir / "munge");
    fs::create_directories(dir / "ctld");
    fs::create_directories(dir / "spool");
    fs::create_directories(dir / "nodetmp");
    for (const SlurmNode& n : options.nodes) {
      fs::create_directories(dir / "spool" / n.name);
      fs::create_directories(dir / "tmp" / n.name);
    }
    // munged refuses a key others can read, and a socket folder others cannot enter.
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    {
      std::random_device rd;
      std::string key(128, '\0');
      for (char& c : key) c = char(rd());
      const fs::path k = dir / "munge" / "munge.key";
      std::ofstream(k, std::ios::binary) << key;
      fs::permissions(k, fs::perms::owner_read | fs::perms::owner_write);
    }
    std::ofstream(dir / "plugstack.conf") << "";
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof(host) - 1);
    const std::string d = dir.string();
    std::ofstream c(conf());
    c << "# Written by trainbench's Slurm fixture (harness/slurm_fixture.cpp); removed with it.\n"
      << "ClusterName=trainbench\n"
      << "SlurmctldHost=" << host << "(" << options.controller_address << ")\n"
      << "SlurmctldPort=" << ctld_port << "\nSlurmdPort=" << slurmd_port << "\n"
      << "SlurmUser=root\nSlurmdUser=root\n"
      << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << d << "/munge/socket\n"
      << "StateSaveLocation=" << d << "/ctld\n"
      << "SlurmctldPidFile=" << d << "/ctld/slurmctld.pid\nSlurmctldLogFile=" << d
      << "/ctld/slurmctld.log\n"
      // %n: the node name, so the slurmds of several nodes on this machine's filesystem keep apart.
      << "SlurmdSpoolDir=" << d << "/spool/%n\nSlurmdPidFile=" << d << "/spool/slurmd-%n.pid\n"
      << "SlurmdLogFile=" << d << "/spool/slurmd-%n.log\n"
      << "PlugStackConfig=" << d
      << "/plugstack.conf\n"
      // Node-local temporary files (Slurm's PMIx plugin puts its per-step client folder here):
      // one folder seen by every node would collide, so a namespace host mounts its own over it
      // (Note [slurmd in a namespace host]).
      << "TmpFS=" << d
      << "/nodetmp\n"
      // No cgroups: steps are tracked by the process tree; nothing is bound or confined.
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
      << "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
      << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      // The node's CPUs= as configured, not as probed: tests run 2 tasks per node on 1-2 cores.
      << "SlurmdParameters=config_overrides\n"
      << "MpiDefault=none\nReturnToService=2\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=2\nMinJobAge=2\n";
    for (const SlurmNode& n : options.nodes)
      c << "NodeName=" << n.name << " NodeAddr=" << n.address << " CPUs=" << options.cpus_per_node
        << " State=UNKNOWN\n";
    c << "PartitionName=trainbench Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n";
    if (!c.flush()) throw std::runtime_error("slurm fixture: cannot write " + conf().string());
  }

  // Every node idle in sinfo, or a daemon gone, or the start timeout.
  void wait_idle() {
    const auto until = Clock::now() + options.start_timeout;
    std::string last;
    for (;;) {
      if (const std::string dead = dead_daemon(); !dead.empty())
        throw std::runtime_error("slurm fixture: " + dead + " while starting" + logs());
      const SubprocessResult r = client({"sinfo", "-h", "-N", "-o", "%N %T"}, std::chrono::seconds(10));
      last = r.out;
      std::size_t idle = 0;
      std::istringstream is(r.out);
      for (std::string name, state; is >> name >> state;) idle += state == "idle";
      if (r.ok() && idle == options.nodes.size()) return;
      if (Clock::now() >= until)
        throw std::runtime_error("slurm fixture: the nodes were not idle within " +
                                 std::to_string(options.start_timeout.count()) + " s (sinfo: " + last + ")" + logs());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
};

SlurmOptions slurm_on_hosts(const HostsFixture& hosts) {
  SlurmOptions o;
  for (int h = 0; h < int(hosts.hosts().size()); ++h) {
    const Host& host = hosts.hosts()[std::size_t(h)];
    o.nodes.push_back({host.name, host.address, hosts.exec_prefix(h)});
  }
  // The bridge holds the subnet's first address ("10.213.<id>.0/24" -> "10.213.<id>.1").
  const std::string subnet = hosts.subnet();
  o.controller_address = subnet.substr(0, subnet.rfind('.') + 1) + "1";
  return o;
}

SlurmCluster SlurmCluster::up(const SlurmOptions& o) {
  if (const std::string why = slurm_unavailable_reason(); !why.empty()) throw SlurmUnavailable(why);
  auto s = std::make_unique<State>();
  s->options = o;
  int here = 0;
  for (const SlurmNode& n : s->options.nodes) here += n.exec_prefix.empty();
  if (here > 1)  // one slurmd per network namespace: they would share its port and hostname
    throw std::invalid_argument("slurm fixture: more than one node without an exec_prefix (this machine)");
  if (s->options.nodes.empty()) {
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof(host) - 1);
    s->options.nodes.push_back({host, "127.0.0.1", {}});
  }
  std::string tmpl = (fs::temp_directory_path() / "trainbench-slurm.XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error(std::string("slurm fixture: mkdtemp: ") + std::strerror(errno));
  s->dir = tmpl;
  SlurmCluster cluster(std::move(s));
  State& st = *cluster.s_;
  const std::string d = st.dir.string();
  st.write_files(free_port(), free_port());
  st.start("munged",
           {program_path("munged"), "--foreground", "--force", "--socket=" + d + "/munge/socket",
            "--key-file=" + d + "/munge/munge.key", "--pid-file=" + d + "/munge/munged.pid",
            "--seed-file=" + d + "/munge/munged.seed", "--log-file=" + d + "/munge/munged.log"},
           st.dir / "munge" / "munged.out");
  // slurmctld and slurmd authenticate through the socket from their first message on.
  for (const auto until = Clock::now() + std::chrono::seconds(10); !fs::exists(st.dir / "munge" / "socket");) {
    if (const std::string dead = st.dead_daemon(); !dead.empty() || Clock::now() >= until)
      throw std::runtime_error("slurm fixture: munged did not create its socket" +
                               (dead.empty() ? std::string(" within 10 s") : ": " + dead) + st.logs());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  st.start("slurmctld", {program_path("slurmctld"), "-D", "-i", "-f", st.conf().string()}, st.dir / "ctld" / "out");
  for (const SlurmNode& n : st.options.nodes) {
    std::vector<std::string> argv = n.exec_prefix;
    if (!argv.empty())  // Note [slurmd in a namespace host]
      argv.insert(argv.end(), {"sh", "-c",
                               cgroup_mounts() + " && mount --bind " + shell_quote((st.dir / "tmp" / n.name).string()) +
                                   " " + shell_quote((st.dir / "nodetmp").string()) + " && exec \"$@\"",
                               "sh"});
    argv.insert(argv.end(), {program_path("slurmd"), "-D", "-N", n.name, "-f", st.conf().string()});
    st.start("slurmd on " + n.name, argv, st.dir / "spool" / (n.name + ".out"));
  }
  st.wait_idle();
  return cluster;
}

SlurmCluster::SlurmCluster(std::unique_ptr<State> s) : s_(std::move(s)) {}
SlurmCluster::SlurmCluster(SlurmCluster&&) noexcept = default;
SlurmCluster& SlurmCluster::operator=(SlurmCluster&& other) noexcept {
  if (this != &other) {
    down();
    s_ = std::move(other.s_);
  }
  return *this;
}
SlurmCluster::~SlurmCluster() { down(); }

void SlurmCluster::down() {
  if (s_) s_->teardown();
}

const fs::path& SlurmCluster::dir() const { return s_->dir; }
fs::path SlurmCluster::conf() const { return s_->conf(); }
const std::vector<SlurmNode>& SlurmCluster::nodes() const { return s_->options.nodes; }
std::map<std::string, std::string> SlurmCluster::env() const {
  // Every node shares this machine's few cores: MPI ranks must not busy-poll (as mpirun's
  // single-host launches, harness/launcher.cpp).
  return {{"SLURM_CONF", conf().string()}, {"OMPI_MCA_mpi_yield_when_idle", "1"}};
}

void SlurmCluster::apply(LaunchSpec& spec, int nodes) const {
  spec.launcher = "srun";
  if (nodes > 0) spec.nodes = nodes;
  for (const auto& [k, v] : env()) spec.env[k] = v;
}

std::vector<int> SlurmCluster::daemon_pids() const {
  std::vector<int> pids;
  for (const State::Daemon& d : s_->daemons)
    if (d.pid > 0 && ::kill(d.pid, 0) == 0) pids.push_back(d.pid);
  return pids;
}

std::vector<int> SlurmCluster::processes() const { return processes_with_env("SLURM_CONF", conf().string()); }

}  // namespace tb::harness
