#include "suites/optim/optim_suite.h"

namespace tb::suites {

std::vector<harness::TestCase> optimizer_tests();  // optimizer_cases.cpp
std::vector<harness::TestCase> schedule_tests();   // schedule_cases.cpp

std::vector<harness::TestCase> optim_tests() {
  std::vector<harness::TestCase> t = optimizer_tests();
  for (harness::TestCase& c : schedule_tests()) t.push_back(std::move(c));
  return t;
}

}  // namespace tb::suites
