// One way for every suite to turn a case body into a harness::Record: the body fills metrics
// and throws CheckFailed when a comparison fails; an engine core::Error is a "fail" (the engine
// raised where it should not), a LibTorch RefError or any other exception an "error" (the check
// itself could not run). The duration is measured around the body. Never throws.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>

#include "harness/suite.h"

namespace tb::suites {

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(bool cond, const std::string& what) {
  if (!cond) throw CheckFailed(what);
}

// with_seed: record the case's input seed (suites/ops/op_case.h: case_seed) in metrics["seed"].
harness::Record run_recorded(const std::string& suite, const std::string& name,
                             const std::function<void(harness::Record&)>& body, bool with_seed = true);

inline harness::TestCase recorded_case(const std::string& suite, const std::string& name,
                                       std::function<void(harness::Record&)> body, bool with_seed = true) {
  return {name, [suite, name, body, with_seed] { return run_recorded(suite, name, body, with_seed); }};
}

}  // namespace tb::suites
