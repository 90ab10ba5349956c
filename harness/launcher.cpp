// mpirun as a child process (harness/subprocess.h: its own group, a deadline enforced by us), its
// combined output split by rank from mpirun's --tag-output prefixes ("[job,rank]<stdout>:").
#include "harness/launcher.h"

#include <signal.h>
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

#include "harness/subprocess.h"

namespace tb::harness {

namespace fs = std::filesystem;

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
    if (!std::getenv("OMPI_MCA_mpi_yield_when_idle")) cmd.insert(cmd.end(), {"--mca", "mpi_yield_when_idle", "1"});
  } else {
    cmd.insert(cmd.end(), {"--hostfile", spec.hostfile});
  }
  // Every variable a rank needs, forwarded explicitly so remote hosts get it too.
  std::vector<std::string> names = {"TRAINBENCH_DIST_DIR"};
  for (const auto& [k, v] : spec.env) names.push_back(k);
  for (const char* inherited :
       {"TRAINBENCH_VENV", "TRAINBENCH_SEED", "TRAINBENCH_DIST_TIMEOUT", "TRAINBENCH_MEMORY_LIMIT", "OMP_NUM_THREADS"})
    if (std::getenv(inherited) && !spec.env.count(inherited)) names.push_back(inherited);
  for (const std::string& n : names) cmd.insert(cmd.end(), {"-x", n});
  cmd.insert(cmd.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
  cmd.insert(cmd.end(), spec.argv.begin(), spec.argv.end());
  return cmd;
}

std::string LaunchResult::diagnosis(std::size_t lines) const {
  std::ostringstream os;
  if (timed_out) os << "the ranks did not finish within the launch timeout (" << seconds << " s) and were killed";
  else os << "mpirun exited with status " << exit_code << " after " << seconds << " s";
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
    os << "\n  mpirun:";
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) os << "\n    " << all[i];
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

  SubprocessSpec run;
  run.argv = cmd;
  run.timeout = spec.timeout;  // then SIGTERM (mpirun forwards it to the ranks), 5 s later SIGKILL
  run.grace = std::chrono::seconds(5);
  run.output = SubprocessSpec::Output::Merge;
  run.env["TRAINBENCH_DIST_DIR"] = spec.run_dir.string();
  for (const auto& [k, v] : spec.env) run.env[k] = v;
  // Ranks on other hosts are not in mpirun's group: their pid files reach them.
  run.on_kill = [&](int sig) { kill_rank_pids(spec.run_dir, spec.ranks, sig); };

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

  std::string pending;
  run.on_output = [&](std::string_view chunk) {
    pending.append(chunk);
    std::size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      handle_line(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  };
  run.max_output = 0;  // every line is kept above, by rank
  SubprocessResult done;
  try {
    done = run_subprocess(run);
  } catch (const std::runtime_error& e) {  // no pipe or no fork
    throw std::runtime_error(std::string("launch: ") + e.what());
  }
  if (!done.started())
    handle_line(std::string("launch: cannot run mpirun: ") + std::strerror(done.exec_errno) +
                " (install openmpi-bin; ci/bootstrap does)");
  if (!pending.empty()) handle_line(pending);  // a last line without its newline
  res.timed_out = done.timed_out;
  res.seconds = done.seconds;
  res.exit_code = done.status_code();
  return res;
}

}  // namespace tb::harness
