// ctest's view of the op suite: one GoogleTest case per row of the op tables.
#include <gtest/gtest.h>

#include "suites/ops/op_case.h"

namespace tb::suites {

// gtest prints a parameter through PrintTo found by ADL: the case name, not its bytes.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

namespace {

class OpSuite : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpSuite, MatchesLibTorch) {
  const OpCase& c = GetParam();
  harness::Record r = run_case(c);
  EXPECT_EQ(r.status, harness::Status::Pass) << c.name << " (seed " << case_seed(c.name) << "): " << r.message;
}

std::string test_name(const ::testing::TestParamInfo<OpCase>& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Ops, OpSuite, ::testing::ValuesIn(all_op_cases()), test_name);

}  // namespace
}  // namespace tb::suites
