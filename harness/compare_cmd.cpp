// `trainbench compare`. See compare_cmd.h; the statistics are Note [Compare statistics] in
// harness/result_compare.h.
#include "harness/compare_cmd.h"

#include <cmath>
#include <iostream>

#include "engine/core/error.h"
#include "harness/result_compare.h"
#include "harness/runner.h"

namespace tb::harness {

CLI::App* add_compare_command(CLI::App& app, CompareCmdOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Compare two result JSONs: per case NEW/BASE of the median time with a 95% bootstrap interval and a verdict "
      "(faster/slower/same/too noisy), status changes first; or with --bounds check one run's engine/LibTorch ratios; "
      "exit 1 on a significant slowdown, a newly failing record or a ratio over its bound, 2 bad input or nothing to "
      "compare or check");
  sub->add_option("json", o.files, "BASE.json NEW.json (one RUN.json with --bounds)")->required()->type_name("JSON");
  sub->add_option("--threshold", o.threshold, "Slowdown that counts, in percent (e.g. 5% or 10)")
      ->capture_default_str()
      ->type_name("PCT");
  sub->add_flag("--markdown", o.markdown, "Print Markdown tables (for a pull-request comment)");
  sub->add_flag("--relative", o.relative,
                "Verdicts from the change of the engine/LibTorch ratio (robust to a machine's load) instead of engine "
                "time; not with --bounds");
  sub->add_option("--bounds", o.bounds, "Per-family engine/LibTorch bounds (ci/perf_bounds.json) to check one run")
      ->type_name("FILE")
      ->check(CLI::Validator(
          [](std::string& s) {
            return s.empty() ? std::string("needs a bounds file, not an empty name") : std::string();
          },
          "FILE"));
  return sub;
}

double parse_threshold(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  // Plain decimal digits with at most one point: std::stod alone would take "0x10" (16), " 5",
  // "1e1" or "-0".
  const std::size_t point = t.find('.');
  const bool decimal = t.find_first_not_of("0123456789.") == std::string::npos &&
                       (point == std::string::npos || t.find('.', point + 1) == std::string::npos) &&
                       t.find_first_of("0123456789") != std::string::npos;
  double v = NAN;
  if (decimal) {
    try {
      v = std::stod(t);
    } catch (const std::exception&) {
    }
  }
  if (!std::isfinite(v) || v < 0 || v > 1000)
    throw UsageError("compare: --threshold '" + text + "' is not a percentage from 0 to 1000 (e.g. 5%)");
  return v / 100;
}

int run_compare(const CompareCmdOptions& o) {
  try {
    const double threshold = parse_threshold(o.threshold);  // checked with --bounds too, where it is unused
    if (!o.bounds.empty()) {
      if (o.files.size() != 1)
        throw UsageError("compare --bounds: give one result JSON, not " + std::to_string(o.files.size()));
      // --relative decides how two runs compare; --bounds checks one run, where it would be
      // ignored without a word.
      if (o.relative)
        throw UsageError(
            "compare: --relative compares two runs' engine/LibTorch ratios and has no meaning with --bounds, "
            "which checks one run's ratios: drop one of them");
      const std::string text = read_input_file(o.bounds, "bounds file");
      if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw UsageError("compare: " + o.bounds + ": empty file, not a bounds file");
      const PerfBounds b = parse_perf_bounds(text, o.bounds);
      const BoundsCheck c = check_bounds(read_result_file(o.files[0]), b);
      // A gate that checked nothing must not pass; like two runs with no case in common, that is
      // wrong input (another suite's run, a failed build), not a regression.
      if (c.rows.empty()) throw UsageError("compare --bounds: " + nothing_to_check(c, b, o.files[0]));
      std::cout << bounds_text(c, b, o.markdown) << std::flush;
      return c.over() ? 1 : 0;
    }
    if (o.files.size() != 2)
      throw UsageError("compare: give BASE.json and NEW.json, not " + std::to_string(o.files.size()) + " files");
    CompareOptions opt;
    opt.threshold = threshold;
    opt.relative = o.relative;
    const Comparison c = compare_results(read_result_file(o.files[0]), read_result_file(o.files[1]), opt, o.files[0],
                                         o.files[1]);
    // A comparison that compared nothing must not pass: two empty runs, or runs of other suites.
    if (c.in_both == 0)
      throw UsageError("compare: " + o.files[0] + " and " + o.files[1] + " have no case in common (" +
                       std::to_string(c.only_base.size()) + " and " + std::to_string(c.only_new.size()) +
                       " records): nothing to compare");
    std::cout << (o.markdown ? comparison_markdown(c) : comparison_text(c)) << std::flush;
    return c.regression() ? 1 : 0;
  } catch (const core::Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace tb::harness
