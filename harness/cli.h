// The `trainbench` command line (CLI11) and the launcher of the Python report generator.
#pragma once
#include <filesystem>
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

// The interpreter that runs reports/: $TRAINBENCH_PYTHON, else <TRAINBENCH_VENV>/bin/python as
// configured by CMake, else python3 from PATH.
std::string report_python();

// Runs `<python> -m trainbench_reports --out DIR JSON...` with PYTHONPATH=<source>/reports and
// waits. Returns the path of report.html; throws std::runtime_error when the report fails.
std::filesystem::path run_report(const ReportRequest& req);

}  // namespace tb::harness
