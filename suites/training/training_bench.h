// Benchmarks of whole training steps (suite "training"): engine and LibTorch on the same
// weights and data, with each side's peak memory for one step.
#pragma once
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {
std::vector<harness::BenchCase> training_benches();
std::vector<harness::TestCase> training_tests();  // training_tests.cpp
std::vector<harness::TestCase> recipe_tests();    // recipe_tests.cpp (part of training_tests())
// The second half of the resume check (training_tests.cpp), run by a fresh process that
// register_all() recognises by TRAINBENCH_RESUME_CHILD=<checkpoint dir>. Returns an exit code.
int run_resume_child(const std::string& dir);
}  // namespace tb::suites
