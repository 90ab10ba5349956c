// `trainbench project --results R.json [--results ...] [--ranks 8,64,1024] [--link ib] [--json OUT]`:
// the scaling projection of DDP and FSDP (docs/distributed.md, "Scaling projection"): alpha-beta
// fits of the measured `comm` sweeps, a compute model from the measured `ddp`/`fsdp` steps, the
// projected table for a link class, and the prediction error at every measured point.
// The fit and the projection live in the reports package (reports/trainbench_reports/projection.py),
// beside the plots drawn from the same model; this command runs it with the project's Python.
// Exit status: 0 printed; 2 bad input (missing records, unknown link, bad ranks list; one line on
// stderr); 3 no usable Python (numpy missing); 127 the interpreter cannot be started.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tb::harness {

struct ProjectOptions {
  std::vector<std::string> results;
  std::string ranks = "8,16,32,64,128,256,512,1024";
  std::string link = "ib";
  std::string json;
  double per_rank_batch = 0;   // 0: not given, the world-1 run's batch (a given one is 1e-6 or more)
  double compute_speedup = 1;  // ranks compute this many times faster than the measured world-1 run
};

// Adds the subcommand and its options to `app`.
CLI::App* add_project_command(CLI::App& app, ProjectOptions& o);

// Runs the projection; returns its exit status (above).
int run_project(const ProjectOptions& o);

}  // namespace tb::harness
