// Starting N ranks through mpirun with a whole-run timeout, every rank's output kept (one log per
// rank in the run folder) and echoed with a rank prefix. Used by distributed suites (one launch
// per world size), by the watchdog test (which expects its ranks to fail), and by
// `trainbench launch` for any program. Never waits forever: past the timeout the ranks and
// mpirun are killed and the result says so, with each rank's last lines.
#pragma once
#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace tb::harness {

struct LaunchSpec {
  int ranks = 1;
  std::vector<std::string> argv;           // the program and its arguments, same for every rank
  std::chrono::seconds timeout{3600};      // whole run; then SIGTERM, 5 s later SIGKILL
  std::filesystem::path run_dir;           // created; rank<R>.log files; exported as TRAINBENCH_DIST_DIR
  std::map<std::string, std::string> env;  // exported to every rank (mpirun -x)
  std::string hostfile;                    // empty: every rank on this host (oversubscribed if needed)
  std::vector<std::string> mpirun_args;    // extra mpirun arguments, before the program
  std::ostream* echo = nullptr;            // live lines "[rank R] ..." (null: quiet)
  bool echo_rank0_plain = false;           // rank 0's lines without the prefix (progress lines)
};

struct LaunchResult {
  int exit_code = -1;  // mpirun's exit status (128+signal if killed by one)
  bool timed_out = false;
  double seconds = 0;
  std::vector<std::string> rank_output;  // per rank: its stdout and stderr lines, in arrival order
  std::string launcher_output;           // lines not tagged with a rank (mpirun's own messages)
  bool ok() const { return exit_code == 0 && !timed_out; }
  // One paragraph for an error record: how it ended and the last `lines` lines of every rank.
  std::string diagnosis(std::size_t lines = 6) const;
};

// The mpirun command line for a spec (shown by `trainbench launch --dry-run`).
std::vector<std::string> mpirun_command(const LaunchSpec& spec);

// Runs the spec. Throws std::runtime_error only when mpirun cannot be started at all (not
// installed); everything a rank does, including hanging or crashing, is in the result.
LaunchResult launch(const LaunchSpec& spec);

// The path of the running executable (/proc/self/exe), for relaunching ourselves as ranks.
std::string self_exe();

}  // namespace tb::harness
