// The process-wide registries suites fill before the CLI runs (suites, thread setters, run-header
// extras) and the selection of suites and cases by --suite / --filter.
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/tensor/iterator.h"
#include "harness/registry_detail.h"
#include "harness/runner.h"

namespace tb::harness {
namespace {

// Function-local statics: suites may register from static initialisers in other TUs.
std::vector<Suite>& suite_list() {
  static std::vector<Suite> s;
  return s;
}
std::vector<std::function<void(int)>>& setter_list() {
  static std::vector<std::function<void(int)>> s;
  return s;
}
nlohmann::json& run_info_obj() {
  static nlohmann::json j = nlohmann::json::object();
  return j;
}

std::string known_suites() {
  std::ostringstream os;
  for (const Suite& s : suite_list()) os << (os.tellp() > 0 ? ", " : "") << s.name;
  std::string out = os.str();
  return out.empty() ? "(none registered)" : out;
}

// A suite whose case list cannot even be built (LibTorch failed to load, a fixture threw) still
// shows up as one error record instead of aborting the whole run and hiding the other suites.
constexpr const char* kSetupCase = "(setup)";
TestCase setup_error_case(const std::string& what) {
  return {kSetupCase, [what] {
            Record r;
            r.status = Status::Error;
            r.message = "listing the suite's test cases failed: " + what;
            return r;
          }};
}

// A case name identifies its record (results JSON, --filter, `trainbench compare`): two cases of
// one suite with one name give two records nobody can tell apart. Returns the names (matching the
// filter) used more than once, in first-seen order.
template <class Case>
std::vector<std::string> duplicate_names(const std::vector<Case>& cases, const std::regex& re) {
  std::map<std::string, int> uses;
  std::vector<std::string> dups;
  for (const Case& c : cases)
    if (++uses[c.name] == 2 && std::regex_search(c.name, re)) dups.push_back(c.name);
  return dups;
}

std::string duplicates_message(const std::vector<std::string>& dups) {
  std::string msg = std::to_string(dups.size()) + " case name(s) used by more than one case: ";
  for (size_t i = 0; i < dups.size() && i < 10; ++i) msg += (i ? ", " : "") + dups[i];
  if (dups.size() > 10) msg += ", ...";
  return msg + "; every case of a suite needs its own name";
}

}  // namespace

namespace detail {
// libstdc++ compiles a regex by recursive descent, one frame per nesting level: 15,000 nested
// groups overflowed the stack (SIGSEGV) instead of failing. Bounds far above any case filter.
constexpr std::size_t kMaxRegexChars = 4096;
constexpr int kMaxRegexDepth = 100;

std::regex compile_regex(const std::string& pattern, const std::string& what) {
  const auto refuse = [&](const std::string& why) {
    const std::string shown = pattern.size() > 80 ? pattern.substr(0, 80) + "..." : pattern;
    throw UsageError("invalid " + what + " regex '" + shown + "': " + why);
  };
  if (pattern.size() > kMaxRegexChars)
    refuse(std::to_string(pattern.size()) + " characters, more than the " + std::to_string(kMaxRegexChars) +
           " allowed");
  int depth = 0, deepest = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') ++i;  // an escaped character, '(' included
    else if (pattern[i] == '(') deepest = std::max(deepest, ++depth);
    else if (pattern[i] == ')') --depth;
  }
  if (deepest > kMaxRegexDepth)
    refuse("groups nested " + std::to_string(deepest) + " deep, more than the " + std::to_string(kMaxRegexDepth) +
           " allowed");
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    refuse(e.what());
  }
  return {};  // not reached: refuse throws
}

std::regex compile_filter(const std::string& filter) {
  return compile_regex(filter.empty() ? std::string(".*") : filter, "--filter");
}
}  // namespace detail
using detail::compile_filter;

void register_suite(Suite s) {
  if (s.name.empty()) throw std::invalid_argument("register_suite: a suite needs a name");
  for (const Suite& other : suite_list())
    if (other.name == s.name) throw std::invalid_argument("register_suite: suite '" + s.name + "' registered twice");
  suite_list().push_back(std::move(s));
}

const std::vector<Suite>& suites() { return suite_list(); }

void register_thread_setter(std::function<void(int)> setter) {
  if (setter) setter_list().push_back(std::move(setter));
}

void add_run_info(const std::string& key, nlohmann::json value) { run_info_obj()[key] = std::move(value); }

namespace detail {
const nlohmann::json& extra_run_info() { return run_info_obj(); }
}  // namespace detail

std::vector<const Suite*> select_suites(const Selection& sel) {
  std::vector<const Suite*> out;
  if (sel.suites.empty()) {
    for (const Suite& s : suite_list())
      if (s.run_by_default || sel.include_non_default) out.push_back(&s);
    return out;
  }
  for (const std::string& name : sel.suites) {
    const Suite* found = nullptr;
    for (const Suite& s : suite_list())
      if (s.name == name) found = &s;
    if (!found) throw UsageError("unknown suite '" + name + "'; known suites: " + known_suites());
    bool dup = false;
    for (const Suite* p : out) dup = dup || p == found;
    if (!dup) out.push_back(found);
  }
  return out;
}

namespace {
using CaseList = std::function<std::vector<TestCase>()>;
std::vector<std::pair<std::string, CaseList>>& timed_list() {
  static std::vector<std::pair<std::string, CaseList>> t;
  return t;
}
// The cases `of(suite)` gives for each selected suite, filtered.
std::vector<PlannedTest> collect_cases(const Selection& sel, const std::function<CaseList(const Suite&)>& of) {
  const std::regex re = compile_filter(sel.filter);
  std::vector<PlannedTest> out;
  for (const Suite* s : select_suites(sel)) {
    const CaseList list = of(*s);
    if (!list) continue;
    std::vector<TestCase> cases;
    try {
      cases = list();
    } catch (const std::exception& e) {
      out.push_back({s->name, setup_error_case(e.what())});
      continue;
    }
    if (const auto dups = duplicate_names(cases, re); !dups.empty())
      out.push_back({s->name, setup_error_case(duplicates_message(dups))});
    for (TestCase& t : cases)
      if (std::regex_search(t.name, re)) out.push_back({s->name, std::move(t)});
  }
  return out;
}
}  // namespace

std::vector<PlannedTest> collect_tests(const Selection& sel) {
  return collect_cases(sel, [](const Suite& s) { return s.tests; });
}

void register_timed_benches(const std::string& suite, std::function<std::vector<TestCase>()> cases) {
  bool known = false;
  for (const Suite& s : suite_list()) known = known || s.name == suite;
  if (!known) throw std::invalid_argument("register_timed_benches: no suite '" + suite + "'");
  for (const auto& [name, list] : timed_list())
    if (name == suite) throw std::invalid_argument("register_timed_benches: suite '" + suite + "' has them already");
  timed_list().emplace_back(suite, std::move(cases));
}

std::vector<PlannedTest> collect_timed(const Selection& sel) {
  return collect_cases(sel, [](const Suite& s) {
    for (const auto& [name, list] : timed_list())
      if (name == s.name) return list;
    return CaseList();
  });
}

std::vector<PlannedBench> collect_benches(const Selection& sel) {
  const std::regex re = compile_filter(sel.filter);
  std::vector<PlannedBench> out;
  for (const Suite* s : select_suites(sel)) {
    if (!s->benches) continue;
    std::vector<BenchCase> cases;
    try {
      cases = s->benches();
    } catch (const std::exception& e) {
      // A bench case whose warm-up call throws becomes an "error" record in run_benches.
      const std::string msg = e.what();
      BenchCase b;
      b.name = kSetupCase;
      b.engine = [msg] { throw std::runtime_error("listing the suite's benchmarks failed: " + msg); };
      b.reference = [] {};
      out.push_back({s->name, std::move(b)});
      continue;
    }
    if (const auto dups = duplicate_names(cases, re); !dups.empty()) {
      BenchCase b;
      b.name = kSetupCase;
      b.engine = [msg = duplicates_message(dups)] { throw std::runtime_error(msg); };
      b.reference = [] {};
      out.push_back({s->name, std::move(b)});
    }
    for (BenchCase& b : cases)
      if (std::regex_search(b.name, re)) out.push_back({s->name, std::move(b)});
  }
  return out;
}

int apply_threads(int n) {
  if (n < 1) n = std::max(1u, std::thread::hardware_concurrency());
  tb::set_num_threads(n);
  for (const auto& set : setter_list()) set(n);
  return n;
}

}  // namespace tb::harness
