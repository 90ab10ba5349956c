// `trainbench hosts up N | down | status`: the hosts fixture (harness/hosts.h) from the command
// line. `up` leaves the hosts standing (persistent) and prints the environment that sends a
// launch to them; `down [ID...]` removes them (or those named) and any fixture whose owner died; `status` lists what is
// up, with each profile's nominal figures and, with --measure, the measured ones. The hidden
// `delay-line` is the process that delays a host's packets where the kernel has no netem.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "harness/delay_line.h"

namespace tb::harness {

struct HostsCmdOptions {
  int hosts = 2;
  int ranks_per_host = 2;
  std::string profile = "unshaped";
  bool measure = false;
  std::vector<int> down_ids;  // `hosts down ID...`: only these (none: every fixture `up` made)
  // The hidden `hosts delay-line` (harness/delay_line.h), started by the fixture in each host.
  DelayLineOptions delay_line;
  long long delay_ns = 0;
  int ready_fd = -1;
};

// Adds the subcommand (with up, down, status) to `app`.
CLI::App* add_hosts_command(CLI::App& app, HostsCmdOptions& o);

// Runs it: 0, or 2 when hosts cannot be made here (the reason is printed); throws UsageError
// (runner.h) for a bad profile.
int run_hosts(const CLI::App& sub, const HostsCmdOptions& o);

}  // namespace tb::harness
