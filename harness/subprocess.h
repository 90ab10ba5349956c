// Running a program as a child process, the one way the harness and the suites do it: argv (no
// shell), its own process group, a deadline after which the whole group gets SIGTERM and, a grace
// later, SIGKILL (so a grandchild that hangs dies too), its output captured (bounded) or passed
// through, and how it ended decoded. Used by the rank launcher (mpirun), the report generator,
// the Python peers and the suites' Python cross-checks.
#pragma once
#include <chrono>
#include <csignal>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tb::harness {

struct SubprocessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  // Zero: no deadline. Past it the group gets SIGTERM, `grace` later SIGKILL.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds grace{5000};
  // Set (a value) or removed (nullopt) in the child's environment; the rest is inherited.
  std::map<std::string, std::optional<std::string>> env;
  // Capture: stdout and stderr into SubprocessResult::out / err. Merge: both into `out`, in the
  // order written (one pipe). Inherit: the child writes to our stdout and stderr.
  enum class Output { Capture, Merge, Inherit } output = Output::Capture;
  std::size_t max_output = std::size_t(64) << 20;  // bytes kept per stream; the rest is counted, dropped
  bool die_with_parent = false;                    // PR_SET_PDEATHSIG: signalled if we die first
  int parent_death_signal = SIGKILL;               // ... with this signal
  // False: stay in our process group, so the terminal's Ctrl-C reaches it as it reaches us (an
  // interactive child without a deadline); nothing is then killed as a group.
  bool own_group = true;
  // Live chunks of stdout as they arrive (also kept in `out`), e.g. to split them into lines.
  std::function<void(std::string_view)> on_output;
  // Called with SIGTERM, then SIGKILL, when the group is signalled past the deadline: for
  // processes the child started outside its group (mpirun's ranks on other hosts).
  std::function<void(int signal)> on_kill;
  // Called once when the deadline passes, before anything is signalled: to look at the hung
  // processes while they are still there (the launcher records every rank's stack).
  std::function<void()> on_deadline;
  // Polled every ~100 ms: true ends the child as a passed deadline does (SIGTERM, the grace,
  // SIGKILL), without on_deadline; e.g. the caller itself got SIGINT and forwards it.
  std::function<bool()> stop_requested;
};

struct SubprocessResult {
  int exec_errno = 0;      // nonzero: argv[0] could not be started (errno of execvp); nothing ran
  int exit_code = -1;      // its exit status when it exited
  int signal = 0;          // the signal that ended it, when one did
  bool timed_out = false;  // the deadline passed and the group was killed
  bool stopped = false;    // stop_requested said so and the group was killed
  double seconds = 0;
  std::string out, err;    // captured output (err stays empty with Merge and Inherit)
  bool truncated = false;  // more than max_output bytes came on a stream
  bool started() const { return exec_errno == 0; }
  // The shell's convention: the exit status, 128 + signal when killed, 127 when it never ran.
  int status_code() const { return exec_errno ? 127 : signal ? 128 + signal : exit_code; }
  bool ok() const { return exec_errno == 0 && !timed_out && signal == 0 && exit_code == 0; }
  // "exited with status 3", "killed by signal 9 (Killed)", "cannot start 'x': No such file...".
  std::string describe() const;
};

// Runs the spec to its end (or its deadline) and reaps it; whatever remains of its process group
// afterwards is killed. Throws std::runtime_error only when no child could be made (pipe or fork
// failing); a program that cannot be executed is a result with exec_errno set.
SubprocessResult run_subprocess(const SubprocessSpec& spec);

// `s` single-quoted for a POSIX shell, for messages that show a command line.
std::string shell_quote(const std::string& s);
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace tb::harness
