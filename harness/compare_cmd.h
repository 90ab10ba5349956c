// `trainbench compare BASE.json NEW.json [--threshold 5%] [--markdown] [--relative]`: per case in both runs the
// NEW/BASE ratio of the median time with a bootstrap interval and a verdict, status changes first
// (harness/result_compare.h, docs/compare.md). `trainbench compare --bounds FILE RUN.json`: one run's
// engine/LibTorch ratios against per-family bounds (ci/perf_bounds.json, the CI gate).
// Exit status: 0 no regression, 1 a significant slowdown beyond the threshold, a record newly
// failing, or a row over its bound (or without a usable ratio); 2 bad input (a missing file, a FIFO,
// bad JSON, another schema version, a case twice in one file, no case in common, no row the bounds
// can check, --relative with --bounds).
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tb::harness {

struct CompareCmdOptions {
  std::vector<std::string> files;
  std::string threshold = "5%";
  std::string bounds;
  bool markdown = false;
  bool relative = false;
};

CLI::App* add_compare_command(CLI::App& app, CompareCmdOptions& o);

// Prints the comparison on stdout and returns the exit status above; throws UsageError (runner.h)
// for bad input.
int run_compare(const CompareCmdOptions& o);

// "5%", "5" (both five percent) or "0.5%": decimal digits with at most one point, up to 1000;
// UsageError for anything else ("0x10", "1e1", "-0", " 5").
double parse_threshold(const std::string& text);

}  // namespace tb::harness
