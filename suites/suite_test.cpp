// ctest's view of one registered suite (TB_SUITE, set per executable in CMakeLists.txt): one
// GoogleTest case per correctness case, so a failure names the case, its seed and the reason.
#include <gtest/gtest.h>

#include <cctype>

#include "harness/suite.h"
#include "suites/register_all.h"

namespace tb::harness {
// gtest prints a parameter through PrintTo found by ADL: the case name.
void PrintTo(const TestCase& c, std::ostream* os) { *os << c.name; }
}  // namespace tb::harness

namespace {

std::vector<tb::harness::TestCase> suite_tests() {
  tb::suites::register_all();
  for (const tb::harness::Suite& s : tb::harness::suites())
    if (s.name == TB_SUITE) return s.tests();
  return {};
}

class SuiteTest : public ::testing::TestWithParam<tb::harness::TestCase> {};

TEST_P(SuiteTest, Passes) {
  tb::harness::Record r = GetParam().run();
  EXPECT_EQ(r.status, tb::harness::Status::Pass) << r.case_name << ": " << r.message;
}

std::string test_name(const ::testing::TestParamInfo<tb::harness::TestCase>& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Cases, SuiteTest, ::testing::ValuesIn(suite_tests()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SuiteTest);

}  // namespace
