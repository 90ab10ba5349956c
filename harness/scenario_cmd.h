// `trainbench scenario list` and `trainbench scenario run <name or regex> [--json PATH] [--seeds N]
// [--backend mpi|gloo|both] [--timeout S]`: failures reproduced on purpose (harness/scenario.h,
// docs/debugging.md). `run` runs each selected scenario per seed (and, for hang/ scenarios, per
// backend), prints progress and each diagnosis, and writes records of kind "scenario".
// Exit status: 0 every run produced its expected diagnosis, 1 one did not, 2 bad input.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tb::harness {

struct ScenarioOptions {
  std::string pattern;  // an exact name, else an ECMAScript regex searched in the names
  std::string json;
  int seeds = 1;
  std::string backend = "both";
  double timeout_s = 5;
};

// Adds `scenario` with its `list` and `run` subcommands to `app`.
CLI::App* add_scenario_command(CLI::App& app, ScenarioOptions& o);

// Runs the chosen subcommand; throws UsageError (runner.h) for an unknown name or a bad regex.
int run_scenario_command(const CLI::App& sub, const ScenarioOptions& o, const std::string& command_line);

// The scenarios `pattern` selects: the one of that exact name, else every name the regex finds.
// Throws UsageError when the regex is invalid or selects nothing.
std::vector<std::string> select_scenarios(const std::string& pattern);

// The short set `trainbench all` runs (Scenario::quick; each once per backend at seed 0) whose
// names the --filter regex `filter` finds (empty: all). Throws UsageError on a bad regex.
std::vector<std::string> quick_scenarios(const std::string& filter);

}  // namespace tb::harness
