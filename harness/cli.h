// The `trainbench` command line (CLI11) and the launcher of the Python report generator.
#pragma once
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace tb::harness {

// Parses argv and runs the subcommand (list | test | bench | report | all). Suites must be
// registered before. Returns the process exit code: 0 success, 1 a record failed or errored (or
// the report could not be made), 2 a usage error.
int main(int argc, char** argv);

struct ReportRequest {
  std::vector<std::filesystem::path> inputs;  // result JSON files
  std::filesystem::path out_dir;              // empty: default_report_dir(inputs)
  double peak_gflops = 0;                     // 0: the report's default
  double peak_gbps = 0;                       // 0: the report's default
};

// <folder of the first input>/report
std::filesystem::path default_report_dir(const std::vector<std::filesystem::path>& inputs);

// The interpreter that runs reports/: the project's Python (harness/project_python.h), else
// python3 from PATH.
std::string report_python();

// Why run_report failed. `exit_code`: the generator's (2 a bad input or --out, 3 this Python
// lacks a dependency; see reports/trainbench_reports/cli.py), 127 when no interpreter could be
// started. `reported`: the generator already printed the one-line reason on stderr, so the
// caller adds nothing; otherwise what() is the message to print.
struct ReportError : std::runtime_error {
  ReportError(const std::string& what, int exit_code, bool reported)
      : std::runtime_error(what), exit_code(exit_code), reported(reported) {}
  int exit_code;
  bool reported;
};

// Runs `<python> -m trainbench_reports --out DIR JSON...` with PYTHONPATH=<source>/reports and
// waits. Returns the path of report.html; throws ReportError when the report fails. Only when
// the interpreter cannot be started or cannot import the package and its dependencies does the
// message suggest TRAINBENCH_PYTHON.
std::filesystem::path run_report(const ReportRequest& req);

// Runs `<python> -m <module> ARGS...` with the reports package on PYTHONPATH, its output going
// straight to the user, and returns its exit status. Throws ReportError ("<what>: ...") when the
// package is missing, no child can be made, or the interpreter does not start (exit 127).
int run_reports_module(const std::string& what, const std::string& module, const std::vector<std::string>& args);
// `v` with 17 significant digits: a double passed to Python on a command line, unchanged.
std::string format_number(double v);

}  // namespace tb::harness
