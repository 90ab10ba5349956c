// Helpers shared by the checkpoint suite's files: temporary directories and bit-exact tensor
// comparison. Cases run through suites/recorded.h like every suite's.
#pragma once
#include <functional>
#include <string>

#include "engine/checkpoint/training_state.h"
#include "harness/suite.h"
#include "suites/recorded.h"

namespace tb::suites::ckpt {

using Failed = CheckFailed;
inline void expect(bool ok, const std::string& what) { check(ok, what); }

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
// in_memory: under /dev/shm when it is there (for loops of small files that need no disk).
class TempDir {
 public:
  explicit TempDir(bool in_memory = false);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The tensor's elements, row-major, as raw bytes.
std::string bytes_of(const Tensor& t);
// "" when a and b have the same dtype, shape and bytes; else what differs.
std::string bit_diff(const Tensor& a, const Tensor& b);
// "" when the lists hold the same names in the same order with bit-identical tensors.
std::string named_diff(const checkpoint::NamedTensors& a, const checkpoint::NamedTensors& b);
std::string state_diff(const checkpoint::TrainingState& a, const checkpoint::TrainingState& b);

inline harness::TestCase make_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("checkpoint", name, std::move(body), /*with_seed=*/false);
}

// The cases defined in checkpoint_crash.cpp.
void kill9_case(harness::Record& r);
void fuzz_case(harness::Record& r);
// The cases defined in checkpoint_limits.cpp.
void deep_json_case(harness::Record& r);
void header_scaling_case(harness::Record& r);
void killed_save_temporaries_case(harness::Record& r);
void permissions_case(harness::Record& r);

}  // namespace tb::suites::ckpt
