// `trainbench project`. See project_cmd.h. The model is Python (numpy's least squares, and the
// report draws its plots from the same code), so this only finds the interpreter and the package,
// as `trainbench report` does (report_launcher.cpp), and passes the options through.
#include "harness/project_cmd.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "harness/cli.h"
#include "harness/project_python.h"
#include "harness/subprocess.h"

// Set by harness/CMakeLists.txt.
#ifndef TB_SOURCE_DIR
#define TB_SOURCE_DIR "."
#endif

namespace tb::harness {

namespace fs = std::filesystem;

CLI::App* add_project_command(CLI::App& app, ProjectOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "project",
      "Project DDP and FSDP step time, samples/s and scaling efficiency to many ranks from measured comm, ddp and "
      "fsdp benchmarks (alpha-beta fits + compute model), with the prediction error at every measured point; exit "
      "2 bad input");
  sub->add_option("--results", o.results, "Result JSON with comm, ddp/fsdp and hosts benchmark records (repeatable)")
      ->required()
      ->type_name("JSON");
  sub->add_option("--ranks", o.ranks, "Comma-separated rank counts (default 8,16,...,1024)")->type_name("LIST");
  sub->add_option(
         "--link", o.link,
         "Link class: nvlink, ib, ethernet (documented profiles), or one measured in the comm or hosts records "
         "(shm, gloo, a link profile across hosts: e.g. 10g-50us, 10g-50us-gloo); default ib")
      ->type_name("NAME");
  sub->add_option("--per-rank-batch", o.per_rank_batch, "Samples per rank (default: the world-1 run's)")
      ->type_name("N");
  sub->add_option("--compute-speedup", o.compute_speedup,
                  "Ranks compute F times faster than the measured world-1 run (an accelerator against this CPU; "
                  "default 1)")
      ->type_name("F");
  sub->add_option("--json", o.json, "Also write the projection as a result file (kind projection)")->type_name("PATH");
  return sub;
}

int run_project(const ProjectOptions& o) {
  const fs::path pkg_root = fs::path(TB_SOURCE_DIR) / "reports";
  if (!fs::is_directory(pkg_root / "trainbench_reports")) {
    std::cerr << "trainbench: project: the reports package is missing at " << pkg_root.string()
              << " (trainbench finds it in the source tree it was built from)\n";
    return 1;
  }
  const std::string python = report_python();
  std::vector<std::string> args = {python, "-m", "trainbench_reports.projection", "--ranks", o.ranks, "--link", o.link};
  for (const std::string& r : o.results) args.insert(args.end(), {"--results", r});
  if (!o.json.empty()) args.insert(args.end(), {"--json", o.json});
  auto num = [](double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  if (o.per_rank_batch != 0) args.insert(args.end(), {"--per-rank-batch", num(o.per_rank_batch)});
  if (o.compute_speedup != 1) args.insert(args.end(), {"--compute-speedup", num(o.compute_speedup)});
  std::string pythonpath = pkg_root.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath.append(":").append(old);

  SubprocessSpec spec;
  spec.argv = std::move(args);
  spec.env["PYTHONPATH"] = pythonpath;
  spec.output = SubprocessSpec::Output::Inherit;  // the table and its errors go straight to the user
  spec.own_group = false;                         // Ctrl-C stops it with us
  SubprocessResult run;
  try {
    run = run_subprocess(spec);
  } catch (const std::runtime_error& e) {  // no pipe or no fork
    std::cerr << "trainbench: project: " << e.what() << '\n';
    return 1;
  }
  if (!run.started()) {
    std::cerr << "trainbench: project: cannot start the Python interpreter '" << python
              << "': " << std::strerror(run.exec_errno) << "; " << project_python_hint() << '\n';
    return 127;
  }
  const int code = run.status_code();
  if (code == 3) std::cerr << "trainbench: project: " << project_python_hint() << '\n';
  return code;
}

}  // namespace tb::harness
