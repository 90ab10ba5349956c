#include "harness/project_python.h"

#include <filesystem>

#include "engine/core/env.h"

// Set by harness/CMakeLists.txt: TRAINBENCH_VENV at configure time.
#ifndef TB_VENV
#define TB_VENV ""
#endif

namespace tb::harness {

std::optional<ProjectPython> project_python() {
  if (const auto p = core::env_string("TRAINBENCH_PYTHON")) return ProjectPython{*p, "TRAINBENCH_PYTHON"};
  if (const auto v = core::env_string("TRAINBENCH_VENV"))
    return ProjectPython{(std::filesystem::path(*v) / "bin" / "python").string(), "TRAINBENCH_VENV"};
  const std::filesystem::path baked = std::filesystem::path(TB_VENV) / "bin" / "python";
  std::error_code ec;
  if (!std::string(TB_VENV).empty() && std::filesystem::exists(baked, ec))
    return ProjectPython{baked.string(), "the build's venv"};
  return std::nullopt;
}

std::string project_python_hint() {
  return "set TRAINBENCH_PYTHON to a Python 3.8+ with matplotlib, numpy and jsonschema (the venv "
         "that `ci/bootstrap | tail -1` prints has them)";
}

}  // namespace tb::harness
