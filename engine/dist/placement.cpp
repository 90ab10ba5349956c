#include "engine/dist/placement.h"

#include <dirent.h>
#include <sched.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "engine/core/env.h"
#include "engine/core/error.h"

// Note [A core of its own]
// Ranks that mostly wait on each other (a small collective is a hand-off: one rank publishes,
// the other reads) must not share a core: unbound, the kernel's wake-up placement puts a waking
// rank on the core of the rank that woke it, and two such ranks can stay stacked on one core for
// a whole run while the other core idles. Every hand-off is then a context switch: an 8-byte
// all_reduce at world 2 took ~24 us in such launches against ~1 us when the ranks sat on
// different cores (measured on 2 cores, sched_getcpu in the ranks; docs/distributed.md). So
// when the ranks of a world fit the machine (ranks x threads <= cores) the launcher gives each
// rank whole cores of its own (TRAINBENCH_RANK_CPUS) and the rank pins itself here, before its
// cases run; the PyTorch peers do the same with the same lists (reference/dist/torch_launch.py).
// Oversubscribed worlds (4 ranks on 2 cores) stay unbound: pinned, a rank could not move off a
// core its neighbour is busy on. The launcher decides rather than mpirun's --bind-to because the
// namespace hosts of the hosts fixture are one machine: each host's daemon would bind its ranks
// from core 0 up, stacking host 0's rank 0 and host 1's rank 0 on the same core.

namespace tb::dist {

namespace {

std::atomic<int> g_pinned{0};

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

}  // namespace

std::vector<std::vector<int>> cores_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  // A core is named by its lowest hardware thread (thread_siblings_list), so siblings group
  // together whatever the numbering (0 and 64 on many x86 machines).
  std::map<int, std::vector<int>> by_core;
  for (int c : cpus) {
    int first = c;
    const std::string siblings = read_line("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                                           "/topology/thread_siblings_list");
    try {
      const std::vector<int> s = core::parse_cpu_list("thread_siblings_list", siblings);
      if (std::find(s.begin(), s.end(), c) != s.end()) first = *std::min_element(s.begin(), s.end());
    } catch (const core::Error&) {
      // No sysfs (a container without it): every CPU is a core of its own.
    }
    by_core[first].push_back(c);
  }
  std::vector<std::vector<int>> out;
  for (auto& [first, threads] : by_core) out.push_back(std::move(threads));
  return out;
}

std::vector<std::vector<int>> plan_rank_cpus(int ranks, int threads, const std::vector<std::vector<int>>& cores) {
  if (ranks < 1 || threads < 1 || int64_t(ranks) * threads > int64_t(cores.size())) return {};
  const size_t per_rank = cores.size() / size_t(ranks);
  std::vector<std::vector<int>> out(static_cast<size_t>(ranks));
  for (size_t r = 0; r < out.size(); ++r)
    for (size_t k = r * per_rank; k < (r + 1) * per_rank; ++k)
      out[r].insert(out[r].end(), cores[k].begin(), cores[k].end());
  return out;
}

std::string format_rank_cpus(const std::vector<std::vector<int>>& per_rank) {
  std::string out;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (r) out += ';';
    for (size_t i = 0; i < per_rank[r].size(); ++i) {
      if (i) out += ',';
      out += std::to_string(per_rank[r][i]);
    }
  }
  return out;
}

std::vector<std::vector<int>> parse_rank_cpus(std::string_view name, std::string_view value, int world) {
  std::vector<std::vector<int>> out;
  for (size_t at = 0; at <= value.size();) {
    const size_t semi = std::min(value.find(';', at), value.size());
    out.push_back(core::parse_cpu_list(name, value.substr(at, semi - at), CPU_SETSIZE - 1));
    if (int(out.size()) > world) break;
    at = semi + 1;
  }
  if (int(out.size()) != world)
    throw core::Error(std::string(name), "has " + std::string(int(out.size()) > world ? "more than " : "") +
                                             std::to_string(out.size()) + " CPU list(s) for a world of " +
                                             std::to_string(world) + " ranks (one per rank, separated by ';')");
  std::set<int> seen;
  for (const std::vector<int>& l : out)
    for (int c : l)
      if (!seen.insert(c).second)
        throw core::Error(std::string(name), "gives CPU " + std::to_string(c) + " to two ranks");
  return out;
}

int pin_rank_from_env(int rank, int world) {
  const auto v = core::env_string("TRAINBENCH_RANK_CPUS");
  if (!v) return 0;
  const std::vector<std::vector<int>> plan = parse_rank_cpus("TRAINBENCH_RANK_CPUS", *v, world);
  if (rank < 0 || rank >= world) throw core::Error("TRAINBENCH_RANK_CPUS", "no list for rank " + std::to_string(rank));
  const std::vector<int>& mine = plan[size_t(rank)];
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : mine) CPU_SET(c, &set);
  // sched_setaffinity moves one thread; threads started before this call (a thread pool, a
  // watchdog) are moved one by one, and threads started later inherit the mask of their parent.
  std::vector<pid_t> tids;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') tids.push_back(pid_t(std::atoi(e->d_name)));
    closedir(d);
  }
  if (tids.empty()) tids.push_back(0);
  for (pid_t t : tids) {
    if (sched_setaffinity(t, sizeof set, &set) == 0) continue;
    const int err = errno;
    if (err == ESRCH && t != 0) continue;  // a thread that ended meanwhile
    throw core::Error("TRAINBENCH_RANK_CPUS", "rank " + std::to_string(rank) + ": the kernel refused CPUs " +
                                                  format_rank_cpus({mine}) + " (" + std::strerror(err) +
                                                  "); are they outside this process's cpuset?");
  }
  g_pinned = int(mine.size());
  return int(mine.size());
}

int pinned_cpus() { return g_pinned.load(); }

}  // namespace tb::dist
