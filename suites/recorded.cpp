#include "suites/recorded.h"

#include <chrono>

#include "engine/core/error.h"
#include "reference/tensor.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

harness::Record run_recorded(const std::string& suite, const std::string& name,
                             const std::function<void(harness::Record&)>& body, bool with_seed) {
  harness::Record rec;
  rec.suite = suite;
  rec.case_name = name;
  if (with_seed) rec.metrics["seed"] = double(case_seed(name) & 0xFFFFFFFF);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    body(rec);
  } catch (const CheckFailed& e) {
    rec.status = harness::Status::Fail;
    rec.message = e.what();
  } catch (const core::Error& e) {
    rec.status = harness::Status::Fail;
    rec.message = std::string("engine raised: ") + e.what();
  } catch (const ref::RefError& e) {
    rec.status = harness::Status::Error;
    rec.message = std::string("LibTorch raised: ") + e.what();
  } catch (const std::exception& e) {
    rec.status = harness::Status::Error;
    rec.message = e.what();
  }
  rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rec;
}

}  // namespace tb::suites
