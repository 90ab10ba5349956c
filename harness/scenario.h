// Scenarios: failures reproduced on purpose (`trainbench scenario list|run`, docs/debugging.md).
// A scenario injects one fault (a rank that skips a collective, a batch too large for the memory
// cap, ...) and passes when the expected diagnosis came out. Hang scenarios are named
// "hang/<name>", OOM scenarios "oom/<name>"; suites/scenarios/ registers them.
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "harness/launcher.h"
#include "harness/suite.h"

namespace tb::harness {

struct ScenarioContext {
  int seed = 0;                   // --seeds N runs seeds 0..N-1; random fault moments come from it
  double timeout_s = 10;          // the collective timeout ranks get (TRAINBENCH_DIST_TIMEOUT)
  std::string backend = "mpi";    // for hang scenarios: mpi | gloo
  std::filesystem::path run_dir;  // a fresh folder for this run: rank logs, dumps, snapshots
  std::ostream* echo = nullptr;   // live lines (null: quiet)
};

struct Scenario {
  std::string name;         // "hang/<name>" or "oom/<name>"
  std::string description;  // one line: the fault it injects
  std::string expected;     // one line: the diagnosis that must come out
  bool quick = false;       // part of `trainbench all`'s short set (a few seconds per run)
  // Runs the scenario once, in the parent process (it launches ranks or children as it needs),
  // and returns a record of kind "scenario": pass when the expected diagnosis came out; metrics
  // time_to_diagnosis_s, ranks_ended, orphans (processes left behind; must be 0) and
  // peak_bytes_rank<R>; message: the diagnosis. Never throws (failures are records).
  std::function<Record(const ScenarioContext&)> run;
  // Optional: the body of each rank that launch_scenario_ranks starts (the hidden subcommand
  // `trainbench scenario-rank NAME --seed S --backend B`); dist::world_from_env() gives the rank.
  // Its return value is the rank's exit status.
  std::function<int(const ScenarioContext&)> rank_main;
};

// Throws std::invalid_argument on a name without the hang/ or oom/ prefix, or a duplicate.
void register_scenario(Scenario s);
const std::vector<Scenario>& scenarios();
// nullptr when no scenario has that name.
const Scenario* find_scenario(const std::string& name);

// Starts `ranks` ranks of this executable running `sc.rank_main` through the launcher, with
// TRAINBENCH_DIST_TIMEOUT = ctx.timeout_s, `env` exported, rank logs in ctx.run_dir, and an outer
// timeout of `outer_timeout` (past it the launcher kills everything: the scenario then failed).
LaunchResult launch_scenario_ranks(const Scenario& sc, const ScenarioContext& ctx, int ranks,
                                   const std::map<std::string, std::string>& env, std::chrono::seconds outer_timeout);

struct ScenarioRunOptions {
  std::vector<std::string> names;
  int seeds = 1;
  std::vector<std::string> backends{"mpi", "gloo"};  // for hang/ scenarios; oom/ run once
  double timeout_s = 5;
  std::filesystem::path work_dir;  // run dirs go under it; a passing run's is removed
  std::ostream* progress = nullptr;
};

// Runs every (name, backend, seed); one record per run (suite "scenarios", kind "scenario"), and
// a line per run on `progress`. Throws std::invalid_argument for an unknown name.
std::vector<Record> run_scenarios(const ScenarioRunOptions& o);

// The hidden `scenario-rank` subcommand's body.
int scenario_rank_main(const std::string& name, const ScenarioContext& ctx);

}  // namespace tb::harness
