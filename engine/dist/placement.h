// Where a rank runs: the cores each rank of a world on one machine gets, and pinning a rank's
// threads to them. See Note [A core of its own] in placement.cpp.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tb::dist {

// The CPUs this process may run on (its affinity mask), grouped by physical core: one entry per
// core, the core's hardware threads in it (from sysfs; one per entry when sysfs says nothing).
std::vector<std::vector<int>> cores_of_this_process();

// Each of `ranks` ranks of `threads` threads gets whole cores of its own: cores.size() / ranks of
// them, consecutive, with all their hardware threads. Empty when ranks * threads > cores.size()
// (then the ranks share the cores and are left to the scheduler).
std::vector<std::vector<int>> plan_rank_cpus(int ranks, int threads, const std::vector<std::vector<int>>& cores);

// TRAINBENCH_RANK_CPUS's form: one CPU list per rank, separated by ';' ("0;1", "0-1,4-5;2-3,6-7").
std::string format_rank_cpus(const std::vector<std::vector<int>>& per_rank);
// Its parse: exactly `world` lists (core::parse_cpu_list each), no CPU in two ranks' lists.
// Throws core::Error naming `name` on any other value.
std::vector<std::vector<int>> parse_rank_cpus(std::string_view name, std::string_view value, int world);

// When TRAINBENCH_RANK_CPUS is set: pins every thread of this process (and so every thread it
// starts later) to rank `rank`'s list and returns how many CPUs that is. 0 when it is unset.
// Throws core::Error when the value is malformed or the kernel refuses the CPUs.
int pin_rank_from_env(int rank, int world);
// What pin_rank_from_env applied in this process: the count of CPUs, 0 when it pinned nothing.
int pinned_cpus();

}  // namespace tb::dist
