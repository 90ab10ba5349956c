// ctest's view of the op suite: one GoogleTest case per row of the op tables, and the check that
// every op family has a benchmark row (so the CI perf gate, ci/perf_gate, sees it).
#include <gtest/gtest.h>

#include <map>
#include <set>

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

// A family (the case name up to its first '/') with no `bench` row is invisible to ci/perf_gate,
// which bounds the engine/LibTorch time ratio of the bench rows only: a one-off survey found 5-14x
// slowdowns in such families (engine/ops/README.md, "A survey of ops without benchmark rows").
// A family that computes gets a row in cases_sweep.cpp; the families below are exempt, each group
// for the reason given. An in-place or out= family (name ending in "_" or "_out") is covered by
// its base family's row (add_ and add_out by add's).
struct Exemption {
  const char* reason;
  std::set<std::string> families;
};
const std::vector<Exemption>& bench_exemptions() {
  static const std::vector<Exemption> e = {
      {"views and metadata-only ops: no element is read or written (where reshape or flatten must copy, "
       "the copy is contiguous's, which has a row)",
       {"as_strided", "chunk", "expand", "flatten", "narrow", "permute", "reshape", "select", "slice", "split",
        "squeeze", "squeeze_dim", "t", "transpose", "unflatten", "unsqueeze", "unsqueeze_end", "view"}},
      {"factories: a fill of fresh memory, timed by nothing the engine computes",
       {"arange", "empty", "eye", "full", "full_like", "linspace", "ones", "ones_like", "zeros", "zeros_like"}},
      {"random factories: the values differ by generator, so there is no LibTorch row to time beside "
       "(dropout, random too, has a Check::Stats row)",
       {"rand", "randint", "randn"}},
      {"test-only meta rows: compositions of ops that have rows of their own (autocast/<op>: an op under "
       "autocast; chain: op sequences for gradients; inplace_view: in-place ops through views; view_chain: "
       "view sequences)",
       {"autocast", "chain", "inplace_view", "view_chain"}},
  };
  return e;
}

std::string family_of(const std::string& name) { return name.substr(0, name.find('/')); }

TEST(BenchCoverage, EveryFamilyHasABenchRow) {
  std::map<std::string, bool> has_bench;  // family -> whether one of its rows is a bench row
  for (const OpCase& c : all_op_cases()) has_bench[family_of(c.name)] |= c.bench;
  std::set<std::string> exempt;
  for (const Exemption& e : bench_exemptions()) exempt.insert(e.families.begin(), e.families.end());
  auto base_has_bench = [&](const std::string& f) {
    for (const std::string suffix : {"_out", "_"})
      if (f.size() > suffix.size() && f.ends_with(suffix)) {
        const auto it = has_bench.find(f.substr(0, f.size() - suffix.size()));
        return it != has_bench.end() && it->second;
      }
    return false;
  };
  std::string missing;
  for (const auto& [family, bench] : has_bench)
    if (!bench && !exempt.count(family) && !base_has_bench(family)) missing += " " + family;
  EXPECT_TRUE(missing.empty()) << "op families with no benchmark row, invisible to ci/perf_gate:" << missing
                               << "\nAdd a row to suites/ops/cases_sweep.cpp (or, for a family that computes "
                                  "nothing, an exemption with its reason in ops_test.cpp).";
  // The list stays true: an exempt family that no longer exists, or that has a row now, is stale.
  std::string stale;
  for (const std::string& family : exempt) {
    const auto it = has_bench.find(family);
    if (it == has_bench.end()) stale += " " + family + " (no rows)";
    else if (it->second) stale += " " + family + " (has a benchmark row)";
  }
  EXPECT_TRUE(stale.empty()) << "stale exemptions in ops_test.cpp:" << stale;
}

}  // namespace
}  // namespace tb::suites
