// Launches the Python report generator (reports/trainbench_reports) as a child process: the
// report is matplotlib's job, the C++ side only finds the interpreter and the package.
#include <fcntl.h>
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

namespace {

std::string python_hint() {
  return "set TRAINBENCH_PYTHON to a Python 3.8+ with matplotlib, numpy and jsonschema (the venv "
         "that `ci/bootstrap | tail -1` prints has them)";
}

}  // namespace

fs::path run_report(const ReportRequest& req) {
  if (req.inputs.empty()) throw ReportError("report: no JSON files given", 2, false);
  // The inputs themselves (missing, a folder, not UTF-8, not a result...) are the generator's to
  // judge: it names the file and the problem in one line.
  const fs::path pkg_root = fs::path(TB_SOURCE_DIR) / "reports";
  if (!fs::is_directory(pkg_root / "trainbench_reports"))
    throw ReportError("report: the report package is missing at " + pkg_root.string() +
                          " (trainbench finds it in the source tree it was built from)",
                      1, false);
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
  args.push_back("--");  // an input named like an option is still an input
  for (const fs::path& p : req.inputs) args.push_back(p.string());

  std::string pythonpath = pkg_root.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) pythonpath.append(":").append(old);

  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  // The child reports a failed exec through this close-on-exec pipe: the only way to tell "no
  // interpreter" from an interpreter that ran and exited 127.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw ReportError(std::string("report: pipe failed: ") + std::strerror(errno), 1, false);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw ReportError(std::string("report: fork failed: ") + std::strerror(err), 1, false);
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::setenv("PYTHONPATH", pythonpath.c_str(), 1);
    ::execvp(cargv[0], cargv.data());
    // Only async-signal-safe calls between fork and _exit.
    const int err = errno;
    [[maybe_unused]] auto n = ::write(fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(fds[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw ReportError(std::string("report: waitpid failed: ") + std::strerror(errno), 1, false);
  }
  if (got == static_cast<ssize_t>(sizeof exec_errno))
    throw ReportError("report: cannot start the Python interpreter '" + python +
                          "': " + std::strerror(exec_errno) + "; " + python_hint(),
                      127, false);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const std::string cmd = "'" + python + " -m trainbench_reports'";
  if (code == 2) throw ReportError("report: bad input (see above)", 2, true);
  if (code == 3)  // the package's own exit status for a missing dependency or an old Python
    throw ReportError("report: " + python_hint(), 3, false);
  if (code != 0)
    throw ReportError("report: " + cmd + " failed (exit " + std::to_string(code) +
                          "); its output above says why",
                      code, false);
  if (!fs::exists(out / "report.html"))
    throw ReportError("report: " + cmd + " exited 0 but wrote no " + (out / "report.html").string() +
                          "; is '" + python + "' a Python interpreter? " + python_hint(),
                      1, false);
  return out / "report.html";
}

}  // namespace tb::harness
