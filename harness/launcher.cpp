// mpirun as a child process: its combined output read through one pipe with poll(), split by
// rank from mpirun's --tag-output prefixes ("[job,rank]<stdout>:"), a deadline enforced by us.
#include "harness/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <ostream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace tb::harness {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("trainbench") : p.string();
}

std::vector<std::string> mpirun_command(const LaunchSpec& spec) {
  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(spec.ranks), "--tag-output"};
  // OpenMPI refuses to run as root without this; containers and CI machines often are root.
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  if (spec.hostfile.empty()) {
    // One host: more ranks than cores is normal in tests (4 ranks on 2 cores), and binding
    // oversubscribed ranks to cores would stack their OpenMP threads on the same core.
    cmd.insert(cmd.end(), {"--oversubscribe", "--bind-to", "none"});
    // Ranks sharing a few cores with each other (and with whatever else runs) must not busy-poll
    // away each other's timeslices: without this, 2 ranks on a loaded 2-core machine swing from
    // 0.5 us to 14 ms per 8-byte all_reduce, raw MPI included. Costs ~1-2 us of latency.
    if (!std::getenv("OMPI_MCA_mpi_yield_when_idle"))
      cmd.insert(cmd.end(), {"--mca", "mpi_yield_when_idle", "1"});
  } else {
    cmd.insert(cmd.end(), {"--hostfile", spec.hostfile});
  }
  // Every variable a rank needs, forwarded explicitly so remote hosts get it too.
  std::vector<std::string> names = {"TRAINBENCH_DIST_DIR"};
  for (const auto& [k, v] : spec.env) names.push_back(k);
  for (const char* inherited : {"TRAINBENCH_VENV", "TRAINBENCH_SEED", "TRAINBENCH_DIST_TIMEOUT",
                                "TRAINBENCH_MEMORY_LIMIT", "OMP_NUM_THREADS"})
    if (std::getenv(inherited) && !spec.env.count(inherited)) names.push_back(inherited);
  for (const std::string& n : names) cmd.insert(cmd.end(), {"-x", n});
  cmd.insert(cmd.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
  cmd.insert(cmd.end(), spec.argv.begin(), spec.argv.end());
  return cmd;
}

std::string LaunchResult::diagnosis(std::size_t lines) const {
  std::ostringstream os;
  if (timed_out)
    os << "the ranks did not finish within the launch timeout (" << seconds << " s) and were killed";
  else
    os << "mpirun exited with status " << exit_code << " after " << seconds << " s";
  for (std::size_t r = 0; r < rank_output.size(); ++r) {
    std::vector<std::string> all;
    std::istringstream is(rank_output[r]);
    for (std::string l; std::getline(is, l);) all.push_back(l);
    os << "\n  rank " << r << (all.empty() ? ": (no output)" : ":");
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
      os << "\n    " << all[i];
  }
  if (!launcher_output.empty()) {
    std::istringstream is(launcher_output);
    std::vector<std::string> all;
    for (std::string l; std::getline(is, l);) all.push_back(l);
    os << "\n  mpirun:";
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
      os << "\n    " << all[i];
  }
  return os.str();
}

namespace {

// Ranks started by `trainbench rank` write their pid here, so a timeout can kill them even when
// mpirun itself no longer responds.
void kill_rank_pids(const fs::path& run_dir, int ranks, int sig) {
  for (int r = 0; r < ranks; ++r) {
    std::ifstream f(run_dir / ("rank" + std::to_string(r) + ".pid"));
    long pid = 0;
    if (f >> pid && pid > 1) ::kill(pid_t(pid), sig);
  }
}

}  // namespace

LaunchResult launch(const LaunchSpec& spec) {
  if (spec.ranks < 1) throw std::invalid_argument("launch: ranks must be >= 1");
  if (spec.argv.empty()) throw std::invalid_argument("launch: no program given");
  fs::create_directories(spec.run_dir);
  const std::vector<std::string> cmd = mpirun_command(spec);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("launch: pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("launch: fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // mpirun and what it starts locally: one group to signal on timeout
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    setenv("TRAINBENCH_DIST_DIR", spec.run_dir.c_str(), 1);
    for (const auto& [k, v] : spec.env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : cmd) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    const std::string msg = std::string("launch: cannot run mpirun: ") + std::strerror(errno) +
                            " (install openmpi-bin; ci/bootstrap does)\n";
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(fds[1]);

  LaunchResult res;
  res.rank_output.resize(std::size_t(spec.ranks));
  std::vector<std::unique_ptr<std::ofstream>> logs;
  for (int r = 0; r < spec.ranks; ++r)
    logs.push_back(std::make_unique<std::ofstream>(spec.run_dir / ("rank" + std::to_string(r) + ".log")));
  static const std::regex tag(R"(^\[\d+,(\d+)\]<(stdout|stderr|stddiag)>:(.*)$)");
  // mpirun tags each chunk a rank writes, not each line: a line written in pieces (a progress
  // line before and after its case runs) carries tags in its middle too.
  static const std::regex inner_tag(R"(\[\d+,\d+\]<(stdout|stderr|stddiag)>:)");

  auto handle_line = [&](const std::string& line) {
    std::smatch m;
    if (std::regex_match(line, m, tag)) {
      const int r = std::stoi(m[1]);
      if (r >= 0 && r < spec.ranks) {
        const std::string text = std::regex_replace(m[3].str(), inner_tag, "");
        res.rank_output[std::size_t(r)] += text + '\n';
        *logs[std::size_t(r)] << text << '\n' << std::flush;
        if (spec.echo) {
          if (r == 0 && spec.echo_rank0_plain) *spec.echo << text << '\n' << std::flush;
          else *spec.echo << "[rank " << r << "] " << text << '\n' << std::flush;
        }
        return;
      }
    }
    res.launcher_output += line + '\n';
    if (spec.echo && !line.empty()) *spec.echo << "[mpirun] " << line << '\n' << std::flush;
  };

  const auto t0 = Clock::now();
  const auto deadline = t0 + spec.timeout;
  std::string pending;
  bool eof = false, term_sent = false, kill_sent = false;
  Clock::time_point term_time;
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    if (!eof) {
      pollfd p{fds[0], POLLIN, 0};
      const int n = poll(&p, 1, 200);
      if (n > 0) {
        char buf[65536];
        const ssize_t got = read(fds[0], buf, sizeof buf);
        if (got > 0) {
          pending.append(buf, std::size_t(got));
          std::size_t nl;
          while ((nl = pending.find('\n')) != std::string::npos) {
            handle_line(pending.substr(0, nl));
            pending.erase(0, nl + 1);
          }
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          eof = true;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) reaped = true;
    const auto now = Clock::now();
    if (!reaped && !term_sent && now > deadline) {
      res.timed_out = true;
      term_sent = true;
      term_time = now;
      ::kill(-pid, SIGTERM);  // mpirun forwards it to the ranks
      kill_rank_pids(spec.run_dir, spec.ranks, SIGTERM);
    }
    if (!reaped && term_sent && !kill_sent && now - term_time > std::chrono::seconds(5)) {
      kill_sent = true;
      ::kill(-pid, SIGKILL);
      kill_rank_pids(spec.run_dir, spec.ranks, SIGKILL);
    }
  }
  // mpirun is gone; drain what is left in the pipe (ranks killed with it write no more).
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) break;
    char buf[65536];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    pending.append(buf, std::size_t(got));
  }
  std::size_t nl;
  while ((nl = pending.find('\n')) != std::string::npos) {
    handle_line(pending.substr(0, nl));
    pending.erase(0, nl + 1);
  }
  if (!pending.empty()) handle_line(pending);
  close(fds[0]);
  if (res.timed_out) kill_rank_pids(spec.run_dir, spec.ranks, SIGKILL);  // no stragglers
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

}  // namespace tb::harness
