// Starting N ranks through mpirun (or Slurm's srun) with a whole-run timeout, every rank's output kept (one log per
// rank in the run folder) and echoed with a rank prefix. Used by distributed suites (one launch
// per world size), by the watchdog test (which expects its ranks to fail), and by
// `trainbench launch` for any program. Never waits forever: past the timeout every rank's stack
// is read (Note [Stacks at the timeout] in launcher.cpp), then mpirun, its daemons, the ranks and
// whatever they started are killed, and the result says so with each rank's last lines and
// stacks. A SIGINT/SIGTERM/SIGHUP to the launcher ends the run the same way first.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tb::harness {

struct LaunchSpec {
  int ranks = 1;
  std::vector<std::string> argv;           // the program and its arguments, same for every rank
  std::chrono::seconds timeout{3600};      // whole run; then stacks, SIGTERM, 5 s later SIGKILL
  std::filesystem::path run_dir;           // created; rank<R>.log files; exported as TRAINBENCH_DIST_DIR
  std::map<std::string, std::string> env;  // exported to every rank (mpirun -x), beside forwarded_variables
  std::string hostfile;                    // empty: every rank on this host (oversubscribed if needed)
  std::vector<std::string> mpirun_args;    // extra mpirun arguments, before the program
  // "mpirun", or "srun": the ranks are a step of the Slurm cluster srun reaches (its SLURM_CONF or
  // the allocation we run in), started with srun_command (Note [Ranks under srun]); hostfile and
  // mpirun_args do not apply. Empty: $TRAINBENCH_LAUNCHER, else "mpirun".
  std::string launcher;
  int nodes = 0;                  // srun -N; 0: $TRAINBENCH_LAUNCH_NODES, else as Slurm places the ranks
  std::ostream* echo = nullptr;   // live lines "[rank R] ..." (null: quiet)
  bool echo_rank0_plain = false;  // rank 0's lines without the prefix (progress lines)
};

struct LaunchResult {
  std::string launcher = "mpirun";  // what started the ranks: "mpirun" or "srun"
  int exit_code = -1;               // the launcher's exit status (128+signal if killed by one)
  bool timed_out = false;
  double seconds = 0;
  std::vector<std::string> rank_output;  // per rank: its stdout and stderr lines, in arrival order
  std::string launcher_output;           // lines not tagged with a rank (mpirun's or srun's own messages)
  // Processes of the run (processes_in_run) still alive when launch() returned, after it killed
  // everything left over: mpirun, its daemons, ranks and whatever they forked. Must be 0.
  int orphans = 0;
  // Per rank, read when the timeout passed (else empty): "pid P (name):" and every thread's stack
  // for each process of the rank on this host (Note [Stacks at the timeout] in launcher.cpp).
  // Also written to the run folder as rank<R>.stack.
  std::vector<std::string> stacks;
  // After a failed run of a program on the engine's MPI backend: the ranks that never reached
  // MPI_Init (never started, or stopped before creating a process group), told apart from ranks
  // that joined and then stopped (Note [MPI rendezvous] in engine/dist/mpi/mpi_group.cpp).
  std::vector<int> never_joined;
  int stop_signal = 0;  // SIGINT/SIGTERM/SIGHUP that made the launcher end the ranks (then raised again)
  bool ok() const { return exit_code == 0 && !timed_out && stop_signal == 0; }
  // One paragraph for an error record: how it ended and the last `lines` lines of every rank.
  std::string diagnosis(std::size_t lines = 6) const;
};

// The variables every rank gets (mpirun -x NAME each, so ranks on other hosts get them too):
// TRAINBENCH_DIST_DIR, the spec's env, and every TRAINBENCH_*, NCCL_*, OMPI_* (not when we are
// ourselves a rank of an Open MPI job) and OMP_NUM_THREADS set in this process, but for the
// variables of one process's place (TRAINBENCH_RANK, _WORLD_SIZE, _LOCAL_RANK: each rank's comes
// from mpirun or srun; launch() removes them from mpirun's environment too). Sorted.
std::vector<std::string> forwarded_variables(const LaunchSpec& spec);

// A stack from LaunchResult::stacks cut for a one-paragraph message: process headers, the first
// `threads` threads of each process, their first `frames` frames without addresses.
std::string short_stack(const std::string& full, int frames = 12, int threads = 2);

// The mpirun command line for a spec (shown by `trainbench launch --dry-run`).
std::vector<std::string> mpirun_command(const LaunchSpec& spec);

// The launcher a spec uses ("mpirun" or "srun"; throws std::invalid_argument for another name or
// for srun with a hostfile or mpirun_args) and its command line: mpirun_command or srun_command.
// Both start "<launcher> -n <ranks>".
std::string launcher_of(const LaunchSpec& spec);
std::vector<std::string> srun_command(const LaunchSpec& spec);
std::vector<std::string> launch_command(const LaunchSpec& spec);

// Runs the spec. Throws std::runtime_error only when mpirun cannot be started at all (not
// installed); everything a rank does, including hanging or crashing, is in the result.
LaunchResult launch(const LaunchSpec& spec);

// The live processes (zombies excluded, the caller excluded) whose environment has
// TRAINBENCH_DIST_DIR equal to run_dir: mpirun, its daemons, every rank of a launch into run_dir
// and anything they started (all inherit the variable the launcher sets). Read from
// /proc/PID/environ, so a process that changed its own environment later is still found, and
// one that exec'd with a cleared environment is not.
std::vector<int> processes_in_run(const std::filesystem::path& run_dir);

// The same for any variable: the live processes (zombies and the caller excluded) whose
// environment has NAME=VALUE (e.g. a Slurm fixture's SLURM_CONF: its daemons, steps and tasks).
std::vector<int> processes_with_env(const std::string& name, const std::string& value);

// mpirun's --tag-output stream cut into each rank's lines (Note [Tagged output] in launcher.cpp):
// feed() the bytes as they come, in pieces of any size; on_line gets every line (without its
// newline) once it is complete: rank R in [0, ranks) for a line of R's stdout, stderr or stddiag,
// -1 for an untagged line (mpirun's own messages) or one whose tag names a rank outside the job
// (then with its tag in front). finish() hands over the lines left without a newline at the end,
// in the order they began.
class TaggedOutputSplitter {
 public:
  using LineFn = std::function<void(int rank, std::string&& line)>;
  TaggedOutputSplitter(int ranks, LineFn on_line);
  void feed(std::string_view bytes);
  void finish();

 private:
  struct Source {
    int rank = -1;
    std::string prefix;       // in front of every line: the tag of a rank outside the job, else empty
    std::string text;         // the line so far
    bool open = false;        // text holds a line begun, not yet complete
    std::uint64_t began = 0;  // when that line began, for finish()'s order
  };
  Source& source(std::string_view tag, long long rank);
  void append(Source& s, std::string_view text);
  void complete(Source& s);

  int ranks_;
  LineFn on_line_;
  std::string unread_;  // bytes not yet cut: at most a tag that is still coming
  bool line_start_ = true;
  Source* current_ = nullptr;
  std::map<std::string, Source, std::less<>> sources_;  // by tag ("[1,0]<stdout>:"); "" untagged
  std::uint64_t next_began_ = 0;
};

// The path of the running executable (/proc/self/exe), for relaunching ourselves as ranks.
std::string self_exe();

}  // namespace tb::harness
