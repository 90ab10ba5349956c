// Finding the project's Python: the virtual environment ci/bootstrap makes (torch, numpy,
// matplotlib, jsonschema). The report generator, the PyTorch peers and the suites' independent
// Python readers all find it here, with one precedence (docs/env.md):
//   1. TRAINBENCH_PYTHON, an interpreter, taken as given (a bad one is an error where it runs);
//   2. $TRAINBENCH_VENV/bin/python, taken as given;
//   3. <the venv the build was configured with>/bin/python, if it exists;
//   4. none: callers skip what needs it (the report falls back to python3 from PATH).
#pragma once
#include <optional>
#include <string>

namespace tb::harness {

struct ProjectPython {
  std::string path;    // the interpreter
  std::string source;  // what chose it: "TRAINBENCH_PYTHON", "TRAINBENCH_VENV" or "the build's venv"
};

std::optional<ProjectPython> project_python();

// For messages when none is found or it fails: which variables to set.
std::string project_python_hint();

}  // namespace tb::harness
