#include "harness/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace tb::harness {

namespace {

using Clock = std::chrono::steady_clock;

struct Pipe {
  int fd[2] = {-1, -1};
  void open(const char* what) {
    if (::pipe2(fd, O_CLOEXEC) != 0) {
      const int err = errno;
      close_both();
      throw std::runtime_error(std::string(what) + " pipe failed: " + std::strerror(err));
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
  void close_both() { close_end(0), close_end(1); }
};

// The child's environment, built before fork (setenv is not async-signal-safe).
std::vector<std::string> child_environment(const SubprocessSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    if (!spec.env.count(name)) env.emplace_back(kv);
  }
  for (const auto& [name, value] : spec.env)
    if (value) env.push_back(name + "=" + *value);
  return env;
}

}  // namespace

std::string SubprocessResult::describe() const {
  if (exec_errno) return std::string("could not be started: ") + std::strerror(exec_errno);
  std::string s = signal ? "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")"
                         : "exited with status " + std::to_string(exit_code);
  if (timed_out) s += " after its deadline";
  if (stopped) s += " after we were asked to stop";
  return s;
}

SubprocessResult run_subprocess(const SubprocessSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("subprocess: no program given");
  using Output = SubprocessSpec::Output;
  const bool capture = spec.output != Output::Inherit;
  const bool split = spec.output == Output::Capture;

  std::vector<std::string> env_strings = child_environment(spec);
  std::vector<char*> envp, argv;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Pipe out, err, exec_report;  // exec_report: the child's execvp errno, closed on a good exec
  if (capture) out.open("stdout");
  if (split) err.open("stderr");
  exec_report.open("exec");

  const pid_t parent = ::getpid();
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    out.close_both(), err.close_both(), exec_report.close_both();
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(e));
  }
  if (pid == 0) {  // only async-signal-safe calls until exec
    if (spec.own_group) ::setpgid(0, 0);
    if (spec.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, spec.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);
    }
    if (capture) {
      ::dup2(out.fd[1], STDOUT_FILENO);
      ::dup2(split ? err.fd[1] : out.fd[1], STDERR_FILENO);
      const int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    }
    ::execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] auto n = ::write(exec_report.fd[1], &e, sizeof e);
    ::_exit(127);
  }
  if (spec.own_group) ::setpgid(pid, pid);  // also from here, so a kill below cannot miss a child not yet in its group
  out.close_end(1), err.close_end(1), exec_report.close_end(1);

  SubprocessResult res;
  {
    ssize_t got;
    while ((got = ::read(exec_report.fd[0], &res.exec_errno, sizeof res.exec_errno)) < 0 && errno == EINTR) {
    }
    if (got != ssize_t(sizeof res.exec_errno)) res.exec_errno = 0;
    exec_report.close_end(0);
  }

  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&res.out, &res.err};
  // One poll round over the open pipes: -1 when none is open, else how many reads happened.
  auto read_round = [&](int wait_ms) {
    int open_count = 0, activity = 0;
    for (pollfd& f : fds) f.revents = 0, open_count += f.fd >= 0;
    if (open_count == 0) return -1;
    if (::poll(fds, 2, wait_ms) <= 0) return 0;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      ++activity;
      if (got > 0) {
        const std::string_view chunk(buf, size_t(got));
        std::string& sink = *sinks[i];
        const size_t room = spec.max_output > sink.size() ? spec.max_output - sink.size() : 0;
        if (chunk.size() > room) res.truncated = true;
        sink.append(chunk.substr(0, std::min(room, chunk.size())));
        if (i == 0 && spec.on_output) spec.on_output(chunk);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
    return activity;
  };

  const bool has_deadline = spec.timeout.count() > 0;
  const auto deadline = t0 + spec.timeout;
  Clock::time_point kill_at{};
  bool term_sent = false, kill_sent = false, reaped = false;
  int status = 0;
  auto signal_group = [&](int sig) {
    ::kill(spec.own_group ? -pid : pid, sig);
    if (spec.on_kill) spec.on_kill(sig);
  };
  while (!reaped) {
    if (read_round(100) < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pid_t w;
    while ((w = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (w == pid || w < 0) reaped = true;  // < 0: not our child any more (cannot happen); stop waiting
    const auto now = Clock::now();
    if (reaped) break;
    const bool past_deadline = has_deadline && now >= deadline;
    if (!term_sent && (past_deadline || (spec.stop_requested && spec.stop_requested()))) {
      term_sent = true;
      (past_deadline ? res.timed_out : res.stopped) = true;
      if (past_deadline && spec.on_deadline) spec.on_deadline();
      kill_at = Clock::now() + spec.grace;
      signal_group(SIGTERM);
    } else if (term_sent && !kill_sent && now >= kill_at) {
      kill_sent = true;
      signal_group(SIGKILL);
    }
  }
  // The child is gone; what it wrote last may still be in the pipes. Read until they close or
  // stay silent for 100 ms (a grandchild that outlives it may hold them open).
  while (read_round(100) > 0) {
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  if (spec.own_group) ::kill(-pid, SIGKILL);  // whatever of its group is left (nothing, normally)
  if ((res.timed_out || res.stopped) && spec.on_kill) spec.on_kill(SIGKILL);
  if (!res.exec_errno) {
    if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
  } else {
    res.exit_code = 127;
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    if (!s.empty()) s += ' ';
    s += shell_quote(a);
  }
  return s;
}

}  // namespace tb::harness
