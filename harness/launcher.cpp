// mpirun as a child process (harness/subprocess.h: its own group, a deadline enforced by us), its
// combined output split by rank from mpirun's --tag-output prefixes ("[job,rank]<stdout>:",
// Note [Tagged output]).
#include "harness/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "engine/core/env.h"
#include "harness/subprocess.h"

extern char** environ;

namespace tb::harness {

namespace fs = std::filesystem;

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("trainbench") : p.string();
}

// Where one process sits (world_from_env reads them before MPI's own): set where the launcher
// runs (a shell, an outer job's rank), passed on they made every rank of the launch that rank.
// Each rank gets its place from mpirun or srun instead; never forwarded, removed from their
// environment too (a rank on this host inherits mpirun's).
static const std::set<std::string>& own_place_variables() {
  static const std::set<std::string> names = {"TRAINBENCH_RANK", "TRAINBENCH_WORLD_SIZE", "TRAINBENCH_LOCAL_RANK"};
  return names;
}

std::vector<std::string> forwarded_variables(const LaunchSpec& spec) {
  std::set<std::string> names = {"TRAINBENCH_DIST_DIR"};
  for (const auto& [k, v] : spec.env) names.insert(k);
  // Inside a rank of another Open MPI job, its OMPI_* variables describe that job (its rank, its
  // daemon's address): passing them on would make our ranks believe they belong to it.
  const bool inside_mpi_job = std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    const auto starts = [&](std::string_view p) { return name.compare(0, p.size(), p) == 0; };
    if (own_place_variables().count(name) && !spec.env.count(name)) continue;
    if (starts("TRAINBENCH_") || starts("NCCL_") || (starts("OMPI_") && !inside_mpi_job) || name == "OMP_NUM_THREADS")
      names.insert(name);
  }
  return {names.begin(), names.end()};
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
    if (!std::getenv("OMPI_MCA_mpi_yield_when_idle")) cmd.insert(cmd.end(), {"--mca", "mpi_yield_when_idle", "1"});
  } else {
    cmd.insert(cmd.end(), {"--hostfile", spec.hostfile});
  }
  for (const std::string& n : forwarded_variables(spec)) cmd.insert(cmd.end(), {"-x", n});
  cmd.insert(cmd.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
  cmd.insert(cmd.end(), spec.argv.begin(), spec.argv.end());
  return cmd;
}

std::string launcher_of(const LaunchSpec& spec) {
  std::string name = spec.launcher;
  if (name.empty()) {
    const char* env = std::getenv("TRAINBENCH_LAUNCHER");
    name = env && *env ? env : "mpirun";
  }
  if (name != "mpirun" && name != "srun")
    throw std::invalid_argument("launch: unknown launcher '" + name + "' (mpirun or srun; TRAINBENCH_LAUNCHER)");
  if (name == "srun" && !spec.hostfile.empty())
    throw std::invalid_argument("launch: a hostfile is mpirun's; under srun, Slurm places the ranks (--nodes)");
  if (name == "srun" && !spec.mpirun_args.empty())
    throw std::invalid_argument("launch: mpirun arguments given to an srun launch");
  return name;
}

// Note [Ranks under srun]
// Slurm starts the ranks itself (slurmd's slurmstepd on every node of the step) and tells each
// where it sits through SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_STEP_NUM_NODES, which
// dist::world_from_env reads; Open MPI ranks get their wire-up from Slurm's PMIx plugin
// (--mpi=pmix: Debian's Open MPI has no PMI-2 client), so there is no mpirun and no daemon of ours.
// --label tags every line with its task ("3: text"), which the launcher splits like mpirun's
// --tag-output. --kill-on-bad-exit ends the step when a rank fails, as mpirun aborts its job.
// --export=ALL hands our whole environment (TRAINBENCH_DIST_DIR, the spec's env, the forwarded
// variables) to every rank on every node. The job name names the run folder, so a step the
// launcher had to SIGKILL (srun gone, the allocation left) is cancelled by name afterwards.
// Every rank inherits TRAINBENCH_DIST_DIR, so the timeout, the stacks and the orphan sweep find
// ranks on this machine as they find mpirun's; ranks on other machines are ended by Slurm
// (srun's SIGTERM, then scancel).
static std::string slurm_job_name(const fs::path& run_dir) { return "trainbench-" + run_dir.filename().string(); }

std::vector<std::string> srun_command(const LaunchSpec& spec) {
  std::vector<std::string> cmd = {"srun", "-n", std::to_string(spec.ranks)};
  // At most one node per rank: a suite's world of 1 under --nodes 2 runs on one node.
  const int nodes = std::min(spec.ranks, spec.nodes > 0
                                             ? spec.nodes
                                             : int(core::env_int64("TRAINBENCH_LAUNCH_NODES", 0, 1, 1 << 24)));
  if (nodes > 0) cmd.insert(cmd.end(), {"-N", std::to_string(nodes)});
  // An even spread when it divides (Slurm's own pick put 3 + 1 of 4 ranks on 2 four-CPU nodes);
  // it also sets SLURM_NTASKS_PER_NODE in the ranks.
  if (nodes > 1 && spec.ranks % nodes == 0) cmd.push_back("--ntasks-per-node=" + std::to_string(spec.ranks / nodes));
  cmd.insert(cmd.end(), {"--label", "--kill-on-bad-exit=1", "--export=ALL", "--input=none",
                         "--job-name=" + slurm_job_name(spec.run_dir)});
  // A site's choice (SLURM_MPI_TYPE, read by srun itself) wins over ours.
  if (!std::getenv("SLURM_MPI_TYPE")) cmd.push_back("--mpi=pmix");
  cmd.insert(cmd.end(), spec.argv.begin(), spec.argv.end());
  return cmd;
}

std::vector<std::string> launch_command(const LaunchSpec& spec) {
  return launcher_of(spec) == "srun" ? srun_command(spec) : mpirun_command(spec);
}

namespace {

// What std::regex's \s and \d were in the "C" locale (the old frame pattern used them).
bool stack_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
bool decimal_digit(char c) { return c >= '0' && c <= '9'; }
bool hex_digit(char c) { return decimal_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

struct StackFrame {
  std::string_view number;    // as written: "0", "12", "007"
  std::string_view function;  // the rest of the line, address and "in" taken off
};

// A frame line of eu-stack or gdb, "#<digits><spaces>[0x<hex><spaces>][in<spaces>]<function>",
// read as the regex ^#(\d+)\s+(0x[0-9a-fA-F]+\s+)?(in\s+)?(.*)$ read it before: each part as long
// as it goes, the optional ones taken where they fit. By hand, not std::regex: libstdc++'s
// executor recurses per character, and one huge line (a template's name) overflows the stack
// (as it did in the output splitter, Note [Tagged output]).
std::optional<StackFrame> stack_frame(std::string_view l) {
  if (l.empty() || l[0] != '#') return std::nullopt;
  std::size_t at = 1;
  while (at < l.size() && decimal_digit(l[at])) ++at;
  if (at == 1) return std::nullopt;
  StackFrame f;
  f.number = l.substr(1, at - 1);
  auto spaces_from = [&](std::size_t i) {
    while (i < l.size() && stack_space(l[i])) ++i;
    return i;
  };
  const std::size_t after_number = at;
  at = spaces_from(at);
  if (at == after_number) return std::nullopt;
  if (l.substr(at, 2) == "0x") {
    std::size_t end = at + 2;
    while (end < l.size() && hex_digit(l[end])) ++end;
    const std::size_t next = spaces_from(end);
    if (end > at + 2 && next > end) at = next;
  }
  if (l.substr(at, 2) == "in") {
    const std::size_t next = spaces_from(at + 2);
    if (next > at + 2) at = next;
  }
  f.function = l.substr(at);
  // The regex's '.' matched no line terminator: such a line was no frame.
  if (f.function.find_first_of("\r\n") != std::string_view::npos) return std::nullopt;
  return f;
}

// A frame's number, saturated: one past int's range is past any limit (std::stoi threw there).
long long frame_number(std::string_view digits) {
  constexpr long long kPastInt = static_cast<long long>(std::numeric_limits<int>::max()) + 1;
  long long n = 0;
  for (char c : digits) n = std::min(n * 10 + (c - '0'), kPastInt);
  return n;
}

}  // namespace

std::string short_stack(const std::string& full, int frames, int threads) {
  static const std::string kStdString =
      "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >";
  std::ostringstream os;
  int thread = -1, skipped = 0;
  auto flush_skipped = [&] {
    if (skipped) os << "  (+" << skipped << " more thread" << (skipped > 1 ? "s" : "") << ")\n";
    skipped = 0;
  };
  std::istringstream is(full);
  for (std::string l; std::getline(is, l);) {
    std::optional<StackFrame> frame;
    if (l.rfind("pid ", 0) == 0 || l.rfind('(', 0) == 0) {  // our process header, or our own note
      flush_skipped();
      thread = -1;
      os << l << '\n';
    } else if (l.rfind("TID ", 0) == 0 || l.rfind("Thread ", 0) == 0) {  // eu-stack's, gdb's thread header
      if (++thread >= threads) ++skipped;
    } else if (thread < threads && (frame = stack_frame(l)) && frame_number(frame->number) < frames) {
      // One pass: a replacement never makes a new occurrence, so this equals replacing until none is left.
      std::string f;
      for (std::size_t from = 0;;) {
        const std::size_t at = frame->function.find(kStdString, from);
        f += frame->function.substr(from, at == std::string_view::npos ? at : at - from);
        if (at == std::string_view::npos) break;
        f += "std::string";
        from = at + kStdString.size();
      }
      if (f.size() > 110) f = f.substr(0, 107) + "...";
      if (thread > 0 && frame->number == "0") os << "  thread " << thread + 1 << ":\n";
      os << "  #" << frame->number << " " << f << '\n';
    }
  }
  flush_skipped();
  return os.str();
}

std::string LaunchResult::diagnosis(std::size_t lines) const {
  std::ostringstream os;
  if (timed_out) os << "the ranks did not finish within the launch timeout (" << seconds << " s) and were killed";
  else if (stop_signal)
    os << "the launcher got signal " << stop_signal << " (" << strsignal(stop_signal) << ") and ended the ranks after "
       << seconds << " s";
  else os << launcher << " exited with status " << exit_code << " after " << seconds << " s";
  for (int r : never_joined) os << "\n  rank " << r << " never joined: it never reached MPI_Init";
  for (std::size_t r = 0; r < rank_output.size(); ++r) {
    std::vector<std::string> all;
    std::istringstream is(rank_output[r]);
    for (std::string l; std::getline(is, l);) all.push_back(l);
    os << "\n  rank " << r << (all.empty() ? ": (no output)" : ":");
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) os << "\n    " << all[i];
  }
  if (!launcher_output.empty()) {
    std::istringstream is(launcher_output);
    std::vector<std::string> all;
    for (std::string l; std::getline(is, l);) all.push_back(l);
    os << "\n  " << launcher << ":";
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) os << "\n    " << all[i];
  }
  if (!stacks.empty()) {
    os << "\n  stacks at the timeout (top frames; every thread in LaunchResult::stacks and rank<R>.stack):";
    for (std::size_t r = 0; r < stacks.size(); ++r) {
      os << "\n  rank " << r << ":";
      std::istringstream is(short_stack(stacks[r]));
      for (std::string l; std::getline(is, l);) os << "\n    " << l;
    }
  }
  if (orphans) os << "\n  " << orphans << " process(es) of the run outlived every kill (orphans)";
  return os.str();
}

namespace {

// A process of a run, as /proc shows it.
struct RunProcess {
  int pid = 0;
  int ppid = 0;
  int rank = -1;     // OMPI_COMM_WORLD_RANK (PMIX_RANK, SLURM_PROCID) in its environment; -1: mpirun or a daemon
  std::string name;  // its comm, e.g. "trainbench", "sleep"
};

std::string read_whole(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The processes whose environment holds `want` ("NAME=value"). `slurm`: an srun launch, whose
// ranks may carry no MPI variable (Note [Ranks under srun]); SLURM_PROCID is not read otherwise,
// since mpirun started inside a Slurm job inherits the job's.
std::vector<RunProcess> scan_env(const std::string& want, bool slurm = false) {
  std::vector<RunProcess> found;
  const int self = int(::getpid());
  std::error_code ec;
  // Processes vanish while we read: every step tolerates a missing file.
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string id = e.path().filename().string();
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) continue;
    RunProcess p;
    p.pid = std::atoi(id.c_str());
    if (p.pid == self) continue;
    const std::string env = read_whole(e.path() / "environ");  // unreadable (gone, other user): empty
    bool ours = false;
    for (std::size_t at = 0; at < env.size();) {
      std::size_t end = env.find('\0', at);
      if (end == std::string::npos) end = env.size();
      const std::string_view kv(env.data() + at, end - at);
      if (kv == want) ours = true;
      static constexpr std::string_view kRankKeys[] = {"OMPI_COMM_WORLD_RANK=", "PMIX_RANK=", "SLURM_PROCID="};
      for (std::size_t k = 0; k < (slurm ? 3 : 2); ++k)
        if (p.rank < 0 && kv.substr(0, kRankKeys[k].size()) == kRankKeys[k])
          p.rank = std::atoi(std::string(kv.substr(kRankKeys[k].size())).c_str());
      at = end + 1;
    }
    if (!ours) continue;
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    const std::string stat = read_whole(e.path() / "stat");
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size()) continue;  // gone meanwhile
    const char state = stat[close + 2];
    if (state == 'Z' || state == 'X') continue;  // dead, waiting to be reaped: not running anything
    p.name = stat.substr(stat.find('(') + 1, close - stat.find('(') - 1);
    p.ppid = std::atoi(stat.c_str() + close + 4);
    if (slurm && p.name == "srun") p.rank = -1;  // srun inside a Slurm job inherits its SLURM_PROCID
    found.push_back(std::move(p));
  }
  return found;
}

std::vector<RunProcess> scan_run(const fs::path& run_dir, bool slurm = false) {
  return scan_env("TRAINBENCH_DIST_DIR=" + run_dir.string(), slurm);
}

// SIGKILLs every process of the run until none is left or `patience` passes (a process that
// forks as fast as we kill, or one in uninterruptible sleep); returns how many are left.
int kill_run(const fs::path& run_dir, std::chrono::milliseconds patience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const std::vector<RunProcess> left = scan_run(run_dir);
    if (left.empty() || std::chrono::steady_clock::now() >= until) return int(left.size());
    for (const RunProcess& p : left) ::kill(p.pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Note [Stacks at the timeout]
// When the outer timeout passes, every process of the run on this host is read from the outside
// through ptrace, by eu-stack (elfutils) or, without it, gdb; not by a signal handler in the
// ranks: a rank that is SIGSTOPped (a frozen host) cannot run a handler, nor can one blocked with
// the signal masked or deadlocked inside malloc (where formatting a backtrace would deadlock
// too), and a program that is not ours (a shell script) has none. ptrace reads a stopped process
// as it is and leaves it stopped. eu-stack before gdb: gdb first loads the symbols of every
// library, which for a rank linking LibTorch took over 60 s here; eu-stack reads only what it
// unwinds through (1-4 s). All ranks at once, kStackTime for all the processes of a rank, so
// the kill comes at most that long after the timeout. Ranks on other hosts are out of reach (their last
// lines still show).
constexpr std::chrono::seconds kStackTime{10};
constexpr std::size_t kStackProcessesPerRank = 4;  // the rank and what it started (a shell's child)

std::string stack_of(int pid, std::chrono::milliseconds limit) {
  for (const bool gdb : {false, true}) {
    SubprocessSpec s;
    if (gdb)
      s.argv = {"gdb",
                "-p",
                std::to_string(pid),
                "-batch",
                "-nx",
                "-iex",
                "set debuginfod enabled off",
                "-ex",
                "thread apply all bt"};
    else s.argv = {"eu-stack", "-p", std::to_string(pid)};
    s.timeout = limit;
    s.grace = std::chrono::milliseconds(500);
    s.output = SubprocessSpec::Output::Merge;
    s.max_output = std::size_t(1) << 20;
    const SubprocessResult r = run_subprocess(s);
    if (!r.started()) continue;  // not installed: the next tool
    if (r.timed_out)
      return r.out + "(" + s.argv[0] + " did not finish within " + std::to_string(limit.count()) + " ms)\n";
    return r.out;
  }
  return "(no stack: neither eu-stack (elfutils) nor gdb is installed)\n";
}

// Per rank: the stack of every thread of each of its processes on this host.
std::vector<std::string> collect_stacks(const fs::path& run_dir, int ranks, bool slurm) {
  std::vector<std::vector<RunProcess>> by_rank(std::size_t(ranks), std::vector<RunProcess>{});
  const std::vector<RunProcess> all = scan_run(run_dir, slurm);
  std::map<int, int> rank_of;
  for (const RunProcess& p : all) rank_of[p.pid] = p.rank;
  for (const RunProcess& p : all)
    if (p.rank >= 0 && p.rank < ranks) by_rank[std::size_t(p.rank)].push_back(p);
  std::vector<std::string> stacks(static_cast<std::size_t>(ranks));
  std::vector<std::thread> readers;
  for (int r = 0; r < ranks; ++r) {
    std::vector<RunProcess>& procs = by_rank[std::size_t(r)];
    // The process mpirun started first (its parent is not of the same rank), then its children.
    std::stable_sort(procs.begin(), procs.end(), [&](const RunProcess& a, const RunProcess& b) {
      const bool a_top = !rank_of.count(a.ppid) || rank_of[a.ppid] != a.rank;
      const bool b_top = !rank_of.count(b.ppid) || rank_of[b.ppid] != b.rank;
      return a_top != b_top ? a_top : a.pid < b.pid;
    });
    if (procs.size() > kStackProcessesPerRank) procs.resize(kStackProcessesPerRank);
    readers.emplace_back([&procs, &text = stacks[std::size_t(r)]] {
      if (procs.empty()) text = "(no process of this rank on this host: it ended, never started, or runs elsewhere)\n";
      const auto until = std::chrono::steady_clock::now() + kStackTime;
      for (const RunProcess& p : procs) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until -
                                                                                std::chrono::steady_clock::now());
        text += "pid " + std::to_string(p.pid) + " (" + p.name + "):\n" +
                (left.count() > 0 ? stack_of(p.pid, left) : "(not read: the rank's stack time ran out)\n");
      }
    });
  }
  for (std::thread& t : readers) t.join();
  return stacks;
}

// Note [Launcher signals]
// SIGINT, SIGTERM or SIGHUP reaching the launcher while ranks run is forwarded: mpirun's group
// and every process of the run get SIGTERM, SIGKILL after the grace, the leftovers are killed,
// then the signal is raised again under the disposition it had before, so the caller ends as it
// would have (Ctrl-C on `trainbench launch` leaves no rank behind). Several launches at once
// (threads) share one set of handlers.
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_stop_signal{0};
std::mutex g_signal_mutex;
int g_launches_running = 0;
struct sigaction g_previous[std::size(kForwardedSignals)];

extern "C" void note_stop_signal(int sig) { g_stop_signal.store(sig); }

class ForwardSignals {
 public:
  ForwardSignals() {
    std::lock_guard<std::mutex> lock(g_signal_mutex);
    if (g_launches_running++ > 0) return;
    g_stop_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = note_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i)
      ::sigaction(kForwardedSignals[i], &sa, &g_previous[i]);
  }
  ~ForwardSignals() {
    std::lock_guard<std::mutex> lock(g_signal_mutex);
    if (--g_launches_running > 0) return;
    for (std::size_t i = 0; i < std::size(kForwardedSignals); ++i)
      ::sigaction(kForwardedSignals[i], &g_previous[i], nullptr);
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;
};

// The ranks without an arrival mark of Note [MPI rendezvous] (engine/dist/mpi/mpi_group.cpp:
// mpi_init_<job>_rank<R> in the run folder, written before MPI_Init), when some rank left one:
// ranks of a program on the engine's MPI backend that never reached MPI_Init. Empty for other
// programs (no rank leaves a mark).
std::vector<int> ranks_never_joined(const fs::path& run_dir, int ranks) {
  std::set<int> marked;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    const std::size_t at = n.rfind("_rank");
    if (n.rfind("mpi_init_", 0) == 0 && at != std::string::npos) marked.insert(std::atoi(n.c_str() + at + 5));
  }
  std::vector<int> missing;
  if (!marked.empty())
    for (int r = 0; r < ranks; ++r)
      if (!marked.count(r)) missing.push_back(r);
  return missing;
}

// Ranks started by `trainbench rank` write their pid here, so a timeout can kill them even when
// mpirun itself no longer responds.
void kill_rank_pids(const fs::path& run_dir, int ranks, int sig) {
  for (int r = 0; r < ranks; ++r) {
    std::ifstream f(run_dir / ("rank" + std::to_string(r) + ".pid"));
    long pid = 0;
    if (f >> pid && pid > 1) ::kill(pid_t(pid), sig);
  }
}

// Note [Tagged output]
// With --tag-output, mpirun writes every chunk it forwards from a rank (what one read of the
// rank's pipe gave, at most 4 KiB with Open MPI 4.1) as "[job,rank]<stdout|stderr|stddiag>:"
// and the chunk, the tag repeated after each newline in the chunk that is not its last byte. It
// tags chunks, not lines: a line a rank writes in pieces (a progress line before and after its
// case runs), or one longer than a chunk, carries tags in its middle, and other ranks' chunks can
// sit between its pieces: "[1,0]<stderr>:r0-start [1,1]<stderr>:r1-start [1,0]<stderr>:r0-end\n".
// So the stream is cut at every tag, each piece goes to the source its own tag names (job, rank
// and stream: the tag itself), and a source's line ends at its own newline, pieces of other
// sources in between or not. A piece never crosses a newline of the stream: after one comes a tag
// or, untagged, a line of mpirun's own. Tags are read by hand, never by std::regex over a line:
// libstdc++'s regex executor recurses once per character, and a line of 40,000 characters
// overflowed the stack. Lines are kept whole however long, not cut: LaunchResult::rank_output
// keeps every byte of a rank's output anyway, and a cut JSON record or tensor is of no use.
// Limits, unavoidable from the stream alone: text a rank prints that is itself a tag
// ("[1,0]<stdout>:") is cut there like a real one, and a message of mpirun's that comes right
// after a rank's unfinished line (no newline yet) is taken as the rest of that line.

struct TagAt {
  enum { kNo, kMore, kYes } found = kNo;  // not a tag; a tag's beginning, cut by the end of the bytes; a tag
  std::size_t size = 0;                   // kYes: its length
  long long rank = -1;                    // kYes: the rank it names
};

// Whether s starts with a tag "[<job>,<rank>]<stdout|stderr|stddiag>:".
TagAt tag_at(std::string_view s) {
  constexpr std::size_t kMaxDigits = 10;  // a 32-bit job id or rank
  std::size_t i = 0;
  bool more = false;  // s ended before it was known
  const auto literal = [&](std::string_view want) {
    const std::string_view have = s.substr(i, want.size());
    if (want.substr(0, have.size()) != have) return false;
    if (have.size() < want.size()) {
      more = true;
      return false;
    }
    i += want.size();
    return true;
  };
  const auto number = [&](long long& value) {
    const std::size_t from = i;
    for (value = 0; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (i - from == kMaxDigits) return false;
      value = value * 10 + (s[i] - '0');
    }
    more = i == s.size();
    return i > from && !more;
  };
  long long job = 0, rank = 0;
  if (literal("[") && number(job) && literal(",") && number(rank) && literal("]<"))
    for (const std::string_view stream : {"stdout>:", "stderr>:", "stddiag>:"}) {
      const std::size_t at = i;
      if (literal(stream)) return {TagAt::kYes, i, rank};
      i = at;
    }
  return {more ? TagAt::kMore : TagAt::kNo};
}

// srun --label's "<task>: text" (the task right-aligned with blanks): the task and where the text
// starts.
std::optional<std::pair<long long, std::size_t>> srun_task(std::string_view line) {
  const std::size_t from = line.find_first_not_of(' ');
  if (from == std::string_view::npos) return std::nullopt;
  long long task = 0;
  std::size_t i = from;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
    if (i - from == 10) return std::nullopt;
    task = task * 10 + (line[i] - '0');
  }
  if (i == from || line.substr(i, 2) != ": ") return std::nullopt;
  return std::make_pair(task, i + 2);
}

}  // namespace

TaggedOutputSplitter::TaggedOutputSplitter(int ranks, LineFn on_line) : ranks_(ranks), on_line_(std::move(on_line)) {}

TaggedOutputSplitter::Source& TaggedOutputSplitter::source(std::string_view tag, long long rank) {
  auto it = sources_.find(tag);
  if (it == sources_.end()) {
    it = sources_.emplace(std::string(tag), Source{}).first;
    const bool in_job = !tag.empty() && rank >= 0 && rank < ranks_;
    it->second.rank = in_job ? int(rank) : -1;
    if (!in_job) it->second.prefix = std::string(tag);  // shown as it came, among mpirun's lines
  }
  return it->second;
}

void TaggedOutputSplitter::append(Source& s, std::string_view text) {
  if (text.empty()) return;
  if (!s.open) s.began = next_began_++;
  s.open = true;
  s.text.append(text);
}

void TaggedOutputSplitter::complete(Source& s) {
  std::string line = s.prefix.empty() ? std::move(s.text) : s.prefix + s.text;
  s.text = std::string();  // a long line's memory goes with it
  s.open = false;
  on_line_(s.rank, std::move(line));
}

void TaggedOutputSplitter::feed(std::string_view bytes) {
  unread_.append(bytes);
  const std::string_view s(unread_);
  std::size_t i = 0;
  while (i < s.size()) {
    if (line_start_) {  // a tag, or a line of mpirun's own
      const TagAt t = tag_at(s.substr(i));
      if (t.found == TagAt::kMore) break;
      if (t.found == TagAt::kYes) {
        current_ = &source(s.substr(i, t.size), t.rank);
        i += t.size;
      } else {
        current_ = &source({}, -1);
      }
      line_start_ = false;
      continue;
    }
    const std::size_t stop = s.find_first_of("\n[", i);
    if (stop == std::string_view::npos) {
      append(*current_, s.substr(i));
      i = s.size();
      break;
    }
    append(*current_, s.substr(i, stop - i));
    i = stop;
    if (s[i] == '\n') {
      complete(*current_);
      ++i;
      line_start_ = true;
      continue;
    }
    const TagAt t = tag_at(s.substr(i));
    if (t.found == TagAt::kMore) break;
    if (t.found == TagAt::kYes) {  // the next chunk, of this source or another
      current_ = &source(s.substr(i, t.size), t.rank);
      i += t.size;
    } else {  // a '[' of the text
      append(*current_, "[");
      ++i;
    }
  }
  unread_.erase(0, i);  // what is left is shorter than a tag
}

void TaggedOutputSplitter::finish() {
  if (!unread_.empty()) {  // a tag cut off by the end of the stream: text
    if (line_start_) current_ = &source({}, -1);
    append(*current_, unread_);
    unread_.clear();
  }
  std::vector<Source*> open;
  for (auto& [tag, s] : sources_)
    if (s.open) open.push_back(&s);
  std::sort(open.begin(), open.end(), [](const Source* a, const Source* b) { return a->began < b->began; });
  for (Source* s : open) complete(*s);
  line_start_ = true;
  current_ = nullptr;
}

std::vector<int> processes_in_run(const fs::path& run_dir) {
  return processes_with_env("TRAINBENCH_DIST_DIR", run_dir.string());
}

// Note [A guard for a launcher killed outright]
// SIGKILL to the launcher (a CI job's hard limit, the OOM killer) runs none of its cleanup.
// mpirun still ends its ranks (it gets SIGTERM from the kernel, parent_death_signal), but not
// what a rank started in a session of its own that ignores SIGTERM: only the launcher's scan of
// the run's environment finds that (kill_run). So each launch starts a guard: a shell in its own
// session (a kill of the launcher's process group misses it), reading a pipe whose write end
// only the launcher holds. A launch that ends writes a line and the guard exits; a launcher
// killed outright closes the pipe without one, and the guard, after mpirun's grace, SIGKILLs
// every process left with the run's TRAINBENCH_DIST_DIR, noting each in launch_guard.log.
constexpr const char* kGuardScript =
    "if read -r _; then exit 0; fi\n"
    "want=\"TRAINBENCH_DIST_DIR=$1\"\n"
    "sleep 5\n"
    "for try in 1 2 3 4 5 6 7 8 9 10; do\n"
    "  n=0\n"
    "  for d in /proc/[0-9]*; do\n"
    "    if grep -qzxF -- \"$want\" \"$d/environ\" 2>/dev/null && kill -KILL \"${d#/proc/}\" 2>/dev/null; then\n"
    "      n=$((n+1))\n"
    "      echo \"launch guard: the launcher ended without its cleanup; killed process ${d#/proc/} ($(cat \"$d/comm\" "
    "2>/dev/null))\" >>\"$1/launch_guard.log\"\n"
    "    fi\n"
    "  done\n"
    "  [ \"$n\" = 0 ] && exit 0\n"
    "  sleep 0.2\n"
    "done\n";

class LaunchGuard {
 public:
  explicit LaunchGuard(const fs::path& run_dir) {
    // grep -F reads a newline as the end of one pattern and the start of another: a run folder
    // named "x\nPATH=/usr/bin" would have the guard SIGKILL every process with that variable.
    if (run_dir.string().find('\n') != std::string::npos) return;  // no guard; kill_run still runs
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no guard: the launch runs as before
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawnattr_init(&attr);
    ::posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
    ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, 1, 2);
    ::posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // none of the launcher's pipes held open
    sigset_t none, defaults;
    sigemptyset(&none);
    sigfillset(&defaults);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &defaults);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    std::string dir = run_dir.string();
    std::string sh = "/bin/sh", c = "-c", script = kGuardScript, name = "trainbench-launch-guard";
    char* argv[] = {sh.data(), c.data(), script.data(), name.data(), dir.data(), nullptr};
    std::string path = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char* envp[] = {path.data(), nullptr};  // not the run's variable: the guard never finds itself
    pid_t pid = 0;
    const int err = ::posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp);
    ::posix_spawn_file_actions_destroy(&fa);
    ::posix_spawnattr_destroy(&attr);
    ::close(fds[0]);
    if (err != 0) {
      ::close(fds[1]);
      return;
    }
    pid_ = pid;
    write_end_ = fds[1];
  }
  // The launch ended and cleaned up itself: the guard exits at once.
  void dismiss() { finish(true); }
  // Any other way out (an exception): the guard runs, as for a launcher killed outright.
  ~LaunchGuard() { finish(false); }
  LaunchGuard(const LaunchGuard&) = delete;
  LaunchGuard& operator=(const LaunchGuard&) = delete;

 private:
  void finish(bool clean) {
    if (write_end_ < 0) return;
    if (clean) {
      const ssize_t n = ::write(write_end_, "\n", 1);  // a full pipe cannot be: nothing else is written
      (void)n;
    }
    ::close(write_end_);
    write_end_ = -1;
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_t pid_ = -1;
  int write_end_ = -1;
};

std::vector<int> processes_with_env(const std::string& name, const std::string& value) {
  std::vector<int> pids;
  for (const RunProcess& p : scan_env(name + "=" + value)) pids.push_back(p.pid);
  return pids;
}

LaunchResult launch(const LaunchSpec& spec) {
  if (spec.ranks < 1) throw std::invalid_argument("launch: ranks must be >= 1");
  if (spec.argv.empty()) throw std::invalid_argument("launch: no program given");
  fs::create_directories(spec.run_dir);
  const bool slurm = launcher_of(spec) == "srun";
  const std::vector<std::string> cmd = launch_command(spec);

  SubprocessSpec run;
  run.argv = cmd;
  run.timeout = spec.timeout;  // then SIGTERM (mpirun forwards it to the ranks), 5 s later SIGKILL
  run.grace = std::chrono::seconds(5);
  run.output = SubprocessSpec::Output::Merge;
  // Killed outright (SIGKILL, the OOM killer, a CI job's hard limit), we run no cleanup: mpirun
  // (srun) gets SIGTERM from the kernel instead and ends the ranks itself, SIGKILL for those that
  // ignore it. Not SIGKILL: mpirun killed so could not end them.
  run.die_with_parent = true;
  run.parent_death_signal = SIGTERM;
  // What mpirun cannot reach, the guard ends: Note [A guard for a launcher killed outright].
  LaunchGuard guard(spec.run_dir);
  run.env["TRAINBENCH_DIST_DIR"] = spec.run_dir.string();
  for (const std::string& k : own_place_variables()) run.env[k] = std::nullopt;
  for (const auto& [k, v] : spec.env) run.env[k] = v;
  // Ranks on other hosts are not in mpirun's group: their pid files reach them. Ranks here (and
  // what they started, in whatever group or session) are found by the run's environment.
  run.on_kill = [&](int sig) {
    kill_rank_pids(spec.run_dir, spec.ranks, sig);
    for (const RunProcess& p : scan_run(spec.run_dir)) {
      ::kill(p.pid, sig);
      if (sig == SIGTERM) ::kill(p.pid, SIGCONT);  // a stopped process acts on SIGTERM only once continued
    }
  };
  LaunchResult res;
  res.launcher = cmd.front();
  run.on_deadline = [&] {  // Note [Stacks at the timeout]
    if (spec.echo)
      *spec.echo << "[launch] no end within " << spec.timeout.count()
                 << " s: reading every rank's stack, then killing\n"
                 << std::flush;
    res.stacks = collect_stacks(spec.run_dir, spec.ranks, slurm);
    for (int r = 0; r < spec.ranks; ++r) {
      const fs::path file = spec.run_dir / ("rank" + std::to_string(r) + ".stack");
      std::ofstream(file) << res.stacks[std::size_t(r)];
      if (!spec.echo) continue;
      *spec.echo << "[launch] rank " << r << "'s stack (all threads: " << file.string() << "):\n";
      std::istringstream is(short_stack(res.stacks[std::size_t(r)]));
      for (std::string l; std::getline(is, l);) *spec.echo << "[rank " << r << "]   " << l << '\n';
      *spec.echo << std::flush;
    }
  };
  std::optional<ForwardSignals> forward;  // Note [Launcher signals]
  forward.emplace();
  // Note [mpirun after its ranks]
  // Open MPI's mpirun has been seen to stay after every rank had ended (under load, when a rank
  // exit()s with its group alive and the others' watchdogs end them: it prints "Per user-direction,
  // the job has been aborted" and then waits for nothing until the launch timeout). So once ranks
  // of this run were seen on this host and none has been left for kRanklessGrace, the launcher ends
  // mpirun itself. Ranks on other hosts are not seen here, so such runs never arm it.
  constexpr auto kRanklessGrace = std::chrono::seconds(5);
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point last_scan{};
  std::optional<SteadyClock::time_point> rankless_since;
  bool seen_rank = false, mpirun_lingered = false;
  run.stop_requested = [&] {
    if (g_stop_signal.load() != 0) return true;
    const auto now = SteadyClock::now();
    if (mpirun_lingered || now - last_scan < std::chrono::milliseconds(500)) return mpirun_lingered;
    last_scan = now;
    bool any_rank = false;
    for (const RunProcess& p : scan_run(spec.run_dir, slurm)) any_rank = any_rank || p.rank >= 0;
    seen_rank = seen_rank || any_rank;
    if (any_rank || !seen_rank) {
      rankless_since.reset();
      return false;
    }
    if (!rankless_since) rankless_since = now;
    mpirun_lingered = now - *rankless_since >= kRanklessGrace;
    return mpirun_lingered;
  };

  res.rank_output.resize(std::size_t(spec.ranks));
  std::vector<std::unique_ptr<std::ofstream>> logs;
  for (int r = 0; r < spec.ranks; ++r)
    logs.push_back(std::make_unique<std::ofstream>(spec.run_dir / ("rank" + std::to_string(r) + ".log")));
  // A line of a rank: into its output, its log, and the terminal.
  auto rank_line = [&](int r, const std::string& text) {
    std::string& out = res.rank_output[std::size_t(r)];
    out += text;
    out += '\n';
    *logs[std::size_t(r)] << text << '\n' << std::flush;
    if (spec.echo) {
      if (r == 0 && spec.echo_rank0_plain) *spec.echo << text << '\n' << std::flush;
      else *spec.echo << "[rank " << r << "] " << text << '\n' << std::flush;
    }
  };
  // A line of the launcher's own (mpirun's, srun's, ours).
  auto launcher_line = [&](const std::string& line) {
    res.launcher_output += line;
    res.launcher_output += '\n';
    if (spec.echo && !line.empty()) *spec.echo << "[" << cmd.front() << "] " << line << '\n' << std::flush;
  };

  // mpirun: Note [Tagged output]. srun --label tags whole lines: "<task>: text", the task number
  // right-aligned to the width of the largest.
  TaggedOutputSplitter tagged(spec.ranks, [&](int r, std::string&& line) {
    if (r >= 0) rank_line(r, line);
    else launcher_line(line);
  });
  std::string srun_pending;
  auto srun_line = [&](std::string_view line) {
    const auto task = srun_task(line);
    if (task && task->first < spec.ranks) rank_line(int(task->first), std::string(line.substr(task->second)));
    else launcher_line(std::string(line));
  };
  run.on_output = [&](std::string_view chunk) {
    if (!slurm) return tagged.feed(chunk);
    const std::size_t searched = srun_pending.size();
    srun_pending.append(chunk);
    std::size_t from = 0;
    for (std::size_t nl = srun_pending.find('\n', searched); nl != std::string::npos;
         nl = srun_pending.find('\n', from)) {
      srun_line(std::string_view(srun_pending).substr(from, nl - from));
      from = nl + 1;
    }
    srun_pending.erase(0, from);
  };
  run.max_output = 0;  // every line is kept above, by rank
  SubprocessResult done;
  try {
    done = run_subprocess(run);
  } catch (const std::runtime_error& e) {  // no pipe or no fork
    throw std::runtime_error(std::string("launch: ") + e.what());
  }
  if (!done.started())
    launcher_line("launch: cannot run " + cmd.front() + ": " + std::strerror(done.exec_errno) +
                  (slurm ? " (install slurm-client; ci/bootstrap does)" : " (install openmpi-bin; ci/bootstrap does)"));
  // The lines left without their newline.
  tagged.finish();
  if (!srun_pending.empty()) srun_line(srun_pending);
  if (mpirun_lingered)
    launcher_line("launch: every rank of this host had ended " + std::to_string(kRanklessGrace.count()) +
                  " s before, but mpirun had not: it was ended by the launcher (Note [mpirun after its ranks])");
  // Whatever outlived mpirun (a rank's child that ignores SIGTERM, a daemon a rank started, a
  // rank on this host that mpirun lost track of) is killed, found by the run's environment.
  res.orphans = kill_run(spec.run_dir, std::chrono::seconds(5));
  guard.dismiss();
  // A step whose srun was killed (or whose allocation outlived it) is Slurm's to end on the other
  // nodes too: cancel the job by its name (Note [Ranks under srun]).
  if (slurm && done.started() && !done.ok()) {
    SubprocessSpec cancel;
    cancel.argv = {"scancel", "--quiet", "--name=" + slurm_job_name(spec.run_dir)};
    cancel.timeout = std::chrono::seconds(10);
    run_subprocess(cancel);
  }
  res.timed_out = done.timed_out;
  if (!done.ok()) res.never_joined = ranks_never_joined(spec.run_dir, spec.ranks);
  if (done.stopped) res.stop_signal = g_stop_signal.load();  // 0 when mpirun lingered
  res.seconds = done.seconds;
  res.exit_code = done.status_code();
  // A signal to us (also one that came after the ranks ended): once the previous handlers are
  // back, it acts as it would have.
  const int got = g_stop_signal.load();
  forward.reset();
  if (got) ::raise(got);
  return res;
}

}  // namespace tb::harness
