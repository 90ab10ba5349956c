// `trainbench compare`. See compare_cmd.h; the statistics are Note [Compare statistics] in
// harness/result_compare.h.
#include "harness/compare_cmd.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/core/error.h"
#include "harness/result_compare.h"
#include "harness/runner.h"

namespace tb::harness {

CLI::App* add_compare_command(CLI::App& app, CompareCmdOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "compare",
      "Compare two result JSONs: per case NEW/BASE of the median time with a 95% bootstrap interval and a verdict "
      "(faster/slower/same/too noisy), status changes first; or with --bounds check one run's engine/LibTorch ratios; "
      "exit 1 on a significant slowdown, a newly failing record or a ratio over its bound, 2 bad input");
  sub->add_option("json", o.files, "BASE.json NEW.json (one RUN.json with --bounds)")->required()->type_name("JSON");
  sub->add_option("--threshold", o.threshold, "Slowdown that counts, in percent (e.g. 5% or 10)")
      ->capture_default_str()
      ->type_name("PCT");
  sub->add_flag("--markdown", o.markdown, "Print Markdown tables (for a pull-request comment)");
  sub->add_flag("--relative", o.relative,
                "Verdicts from the change of the engine/LibTorch ratio (robust to a machine's load) instead of engine "
                "time");
  sub->add_option("--bounds", o.bounds, "Per-family engine/LibTorch bounds (ci/perf_bounds.json) to check one run")
      ->type_name("FILE");
  return sub;
}

double parse_threshold(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  double v = NAN;
  std::size_t used = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0 || v > 1000)
    throw UsageError("compare: --threshold '" + text + "' is not a percentage from 0 to 1000 (e.g. 5%)");
  return v / 100;
}

int run_compare(const CompareCmdOptions& o) {
  try {
    if (!o.bounds.empty()) {
      if (o.files.size() != 1)
        throw UsageError("compare --bounds: give one result JSON, not " + std::to_string(o.files.size()));
      std::ifstream in(o.bounds, std::ios::binary);
      if (!in) throw UsageError("compare: --bounds " + o.bounds + ": cannot be read");
      std::ostringstream text;
      text << in.rdbuf();
      const PerfBounds b = parse_perf_bounds(text.str(), o.bounds);
      const BoundsCheck c = check_bounds(read_result_file(o.files[0]), b);
      std::cout << bounds_text(c, b, o.markdown) << std::flush;
      if (c.rows.empty()) return 1;  // a gate that checked nothing must not pass
      return c.over() ? 1 : 0;
    }
    if (o.files.size() != 2)
      throw UsageError("compare: give BASE.json and NEW.json, not " + std::to_string(o.files.size()) + " files");
    CompareOptions opt;
    opt.threshold = parse_threshold(o.threshold);
    opt.relative = o.relative;
    const Comparison c = compare_results(read_result_file(o.files[0]), read_result_file(o.files[1]), opt, o.files[0],
                                         o.files[1]);
    std::cout << (o.markdown ? comparison_markdown(c) : comparison_text(c)) << std::flush;
    return c.regression() ? 1 : 0;
  } catch (const core::Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace tb::harness
