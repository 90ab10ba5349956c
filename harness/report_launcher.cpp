// Launches the Python report generator (reports/trainbench_reports) as a child process: the
// report is matplotlib's job, the C++ side only finds the interpreter and the package.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "engine/core/env.h"
#include "harness/cli.h"

// Both set by harness/CMakeLists.txt.
#ifndef TB_VENV
#define TB_VENV ""
#endif
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
  if (const auto env = core::env_string("TRAINBENCH_PYTHON")) return *env;
  const std::string venv = TB_VENV;
  if (!venv.empty() && fs::exists(fs::path(venv) / "bin" / "python"))
    return (fs::path(venv) / "bin" / "python").string();
  return "python3";
}

fs::path run_report(const ReportRequest& req) {
  if (req.inputs.empty()) throw std::runtime_error("report: no JSON files given");
  for (const fs::path& p : req.inputs)
    if (!fs::is_regular_file(p)) throw std::runtime_error("report: no such file: " + p.string());
  const fs::path pkg_root = fs::path(TB_SOURCE_DIR) / "reports";
  if (!fs::is_directory(pkg_root / "trainbench_reports"))
    throw std::runtime_error("report: the report package is missing at " + pkg_root.string() +
                             " (trainbench finds it in the source tree it was built from)");
  const fs::path out = req.out_dir.empty() ? default_report_dir(req.inputs) : req.out_dir;
  const std::string python = report_python();

  std::vector<std::string> args = {python, "-m", "trainbench_reports", "--quiet",
                                   "--out", out.string()};
  auto num = [](double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  if (req.peak_gflops > 0) args.insert(args.end(), {"--peak-gflops", num(req.peak_gflops)});
  if (req.peak_gbps > 0) args.insert(args.end(), {"--peak-gbps", num(req.peak_gbps)});
  for (const fs::path& p : req.inputs) args.push_back(p.string());

  std::string pythonpath = pkg_root.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath.append(":").append(old);

  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(std::string("report: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
    ::execvp(cargv[0], cargv.data());
    // Only async-signal-safe calls between fork and _exit.
    const char msg[] = "trainbench: report: cannot execute the Python interpreter\n";
    [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw std::runtime_error(std::string("report: waitpid failed: ") + std::strerror(errno));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    throw std::runtime_error("report: '" + python + " -m trainbench_reports' failed (exit " +
                             std::to_string(code) + "); set TRAINBENCH_PYTHON to an interpreter "
                             "with matplotlib and jsonschema if this one lacks them");
  }
  return out / "report.html";
}

}  // namespace tb::harness
