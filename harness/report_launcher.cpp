// Launches the Python report generator (reports/trainbench_reports) as a child process: the
// report is matplotlib's job, the C++ side only finds the interpreter and the package.
#include <cstdlib>
#include <cstring>
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

fs::path default_report_dir(const std::vector<fs::path>& inputs) {
  if (inputs.empty()) return "report";
  const fs::path parent = inputs.front().parent_path();
  return parent.empty() ? fs::path("report") : parent / "report";
}

std::string report_python() {
  const auto py = project_python();
  return py ? py->path : "python3";
}

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

int run_reports_module(const std::string& what, const std::string& module, const std::vector<std::string>& args) {
  const fs::path pkg_root = fs::path(TB_SOURCE_DIR) / "reports";
  if (!fs::is_directory(pkg_root / "trainbench_reports"))
    throw ReportError(what + ": the reports package is missing at " + pkg_root.string() +
                          " (trainbench finds it in the source tree it was built from)",
                      1, false);
  const std::string python = report_python();
  std::string pythonpath = pkg_root.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath.append(":").append(old);

  SubprocessSpec spec;
  spec.argv = {python, "-m", module};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env["PYTHONPATH"] = pythonpath;
  spec.output = SubprocessSpec::Output::Inherit;  // its messages go straight to the user
  spec.own_group = false;                         // Ctrl-C stops it with us
  SubprocessResult run;
  try {
    run = run_subprocess(spec);
  } catch (const std::runtime_error& e) {  // no pipe or no fork
    throw ReportError(what + ": " + e.what(), 1, false);
  }
  if (!run.started())
    throw ReportError(what + ": cannot start the Python interpreter '" + python +
                          "': " + std::strerror(run.exec_errno) + "; " + project_python_hint(),
                      127, false);
  return run.status_code();
}

fs::path run_report(const ReportRequest& req) {
  if (req.inputs.empty()) throw ReportError("report: no JSON files given", 2, false);
  // The inputs themselves (missing, a folder, not UTF-8, not a result...) are the generator's to
  // judge: it names the file and the problem in one line.
  const fs::path out = req.out_dir.empty() ? default_report_dir(req.inputs) : req.out_dir;
  std::vector<std::string> args = {"--quiet", "--out", out.string()};
  if (req.peak_gflops > 0) args.insert(args.end(), {"--peak-gflops", format_number(req.peak_gflops)});
  if (req.peak_gbps > 0) args.insert(args.end(), {"--peak-gbps", format_number(req.peak_gbps)});
  args.push_back("--");  // an input named like an option is still an input
  for (const fs::path& p : req.inputs) args.push_back(p.string());

  const int code = run_reports_module("report", "trainbench_reports", args);
  const std::string python = report_python();
  const std::string cmd = "'" + python + " -m trainbench_reports'";
  if (code == 2) throw ReportError("report: bad input (see above)", 2, true);
  if (code == 3)  // the package's own exit status for a missing dependency or an old Python
    throw ReportError("report: " + project_python_hint(), 3, false);
  if (code != 0)
    throw ReportError("report: " + cmd + " failed (exit " + std::to_string(code) + "); its output above says why", code,
                      false);
  if (!fs::exists(out / "report.html"))
    throw ReportError("report: " + cmd + " exited 0 but wrote no " + (out / "report.html").string() + "; is '" +
                          python + "' a Python interpreter? " + project_python_hint(),
                      1, false);
  return out / "report.html";
}

}  // namespace tb::harness
