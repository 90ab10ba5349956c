// `trainbench project`. See project_cmd.h. The model is Python (numpy's least squares, and the
// report draws its plots from the same code), so this passes the options through to it, launched
// as `trainbench report` launches its generator (run_reports_module, report_launcher.cpp).
#include "harness/project_cmd.h"

#include <iostream>

#include "harness/cli.h"
#include "harness/cli_checks.h"
#include "harness/project_python.h"

namespace tb::harness {

CLI::App* add_project_command(CLI::App& app, ProjectOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "project",
      "Project DDP and FSDP step time, samples/s and scaling efficiency to many ranks from measured comm, ddp and "
      "fsdp benchmarks (alpha-beta fits + compute model), with the prediction error at every measured point; exit "
      "2 bad input");
  sub->add_option("--results", o.results,
                  "Result JSON with comm, ddp/fsdp and hosts benchmark records (repeatable; the same benchmarks from "
                  "several runs count as their median)")
      ->required()
      ->type_name("JSON");
  sub->add_option("--ranks", o.ranks, "Comma-separated rank counts (default 8,16,...,1024)")->type_name("LIST");
  sub->add_option(
         "--link", o.link,
         "Link class: nvlink, ib, ethernet (documented profiles), or one measured in the comm or hosts records "
         "(shm, shm-cold, gloo, a link profile across hosts: e.g. 10g-50us, 10g-50us-cold, 10g-50us-gloo); "
         "default ib")
      ->type_name("NAME");
  // The ranges of projection.py (BATCH_RANGE, SPEEDUP_RANGE), usage errors here as there: 0 is no
  // batch (it had meant "the default"), a speedup of 1e-308 made every step infinite.
  sub->add_option("--per-rank-batch", o.per_rank_batch, "Samples per rank, 1e-06 to 1e+09 (default: the world-1 run's)")
      ->check(between(1e-6, 1e9, "samples"))
      ->type_name("N");
  sub->add_option("--compute-speedup", o.compute_speedup,
                  "Ranks compute F times faster than the measured world-1 run (an accelerator against this CPU), "
                  "1e-06 to 1e+06; default 1")
      ->check(between(1e-6, 1e6, ""))
      ->type_name("F");
  sub->add_option("--json", o.json, "Also write the projection as a result file (kind projection)")
      ->check(CLI::Validator(
          [](std::string& path) -> std::string {
            return path.empty() ? "an empty path (leave --json out to print only)" : std::string();
          },
          "PATH"))
      ->type_name("PATH");
  return sub;
}

int run_project(const ProjectOptions& o) {
  std::vector<std::string> args = {"--ranks", o.ranks, "--link", o.link};
  for (const std::string& r : o.results) args.insert(args.end(), {"--results", r});
  if (!o.json.empty()) args.insert(args.end(), {"--json", o.json});
  if (o.per_rank_batch != 0) args.insert(args.end(), {"--per-rank-batch", format_number(o.per_rank_batch)});
  if (o.compute_speedup != 1) args.insert(args.end(), {"--compute-speedup", format_number(o.compute_speedup)});
  try {
    const int code = run_reports_module("trainbench: project", "trainbench_reports.projection", args);
    if (code == 3) std::cerr << "trainbench: project: " << project_python_hint() << '\n';
    return code;
  } catch (const ReportError& e) {
    std::cerr << e.what() << '\n';
    return e.exit_code;
  }
}

}  // namespace tb::harness
