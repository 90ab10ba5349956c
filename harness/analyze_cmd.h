// `trainbench analyze DUMP_DIR [--json]`: merges the ranks' flight-recorder dumps that the watchdog
// wrote on a hang (<run_dir>/flight_recorder_rank<R>.json) into one diagnosis
// (engine/dist/dump_analysis.h) and prints it as text, or as JSON with --json.
// Exit status: 0 the dumps are consistent, 1 a mismatch or hang is diagnosed, 2 bad input.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tb::harness {

struct AnalyzeOptions {
  std::string dir;
  bool json = false;
};

// Adds the subcommand and its options to `app`.
CLI::App* add_analyze_command(CLI::App& app, AnalyzeOptions& o);

// Runs it: 0 or 1 (above); throws UsageError (runner.h) for a folder or dump it cannot read.
int run_analyze(const AnalyzeOptions& o);

}  // namespace tb::harness
