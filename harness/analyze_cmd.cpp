// `trainbench analyze`. See analyze_cmd.h; the classes of diagnosis are in docs/distributed.md,
// "Analyzing hang dumps".
#include "harness/analyze_cmd.h"

#include <iostream>

#include "engine/core/error.h"
#include "engine/dist/dump_analysis.h"
#include "harness/runner.h"

namespace tb::harness {

CLI::App* add_analyze_command(CLI::App& app, AnalyzeOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "analyze",
      "Merge the ranks' flight-recorder dumps of a hang (flight_recorder_rank<R>.json) into one diagnosis: where "
      "the ranks diverged, each side's op, shapes and dtype, the missing or lagging ranks, each rank's last calls; "
      "exit 0 consistent, 1 diagnosed, 2 bad input");
  sub->add_option("dump_dir", o.dir, "Folder holding the dumps (the run dir, TRAINBENCH_DIST_DIR)")
      ->required()
      ->type_name("DUMP_DIR");
  sub->add_flag("--json", o.json, "Print the diagnosis as JSON instead of text");
  return sub;
}

int run_analyze(const AnalyzeOptions& o) {
  dist::Diagnosis d;
  try {
    d = dist::analyze_dumps(dist::read_dump_dir(o.dir));
  } catch (const core::Error& e) {
    throw UsageError(e.what());
  }
  if (o.json)
    std::cout << dist::diagnosis_json(d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  else std::cout << dist::diagnosis_text(d);
  std::cout.flush();
  return d.consistent() ? 0 : 1;
}

}  // namespace tb::harness
