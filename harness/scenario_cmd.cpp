// `trainbench scenario`. See scenario_cmd.h; the scenarios and what each diagnoses are in
// docs/debugging.md.
#include "harness/scenario_cmd.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <regex>
#include <sstream>

#include "harness/cli_checks.h"
#include "harness/output_file.h"
#include "harness/registry_detail.h"
#include "harness/runner.h"
#include "harness/scenario.h"

namespace tb::harness {

namespace fs = std::filesystem;

CLI::App* add_scenario_command(CLI::App& app, ScenarioOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "scenario",
      "Reproduce distributed hangs and OOMs on purpose and check their diagnosis: `scenario list`, `scenario run "
      "NAME|REGEX`");
  sub->require_subcommand(1);
  sub->add_subcommand("list", "List the scenarios: name, the fault it injects, the diagnosis it expects");
  CLI::App* run = sub->add_subcommand(
      "run", "Run the scenarios a name or regex selects; exit 0 when each produced its expected diagnosis, else 1");
  run->add_option("name", o.pattern, "A scenario's name, or an ECMAScript regex searched in the names")
      ->required()
      ->type_name("NAME|REGEX");
  run->add_option("--json", o.json, "Result file; default: results/scenario-<timestamp>.json")->type_name("PATH");
  run->add_option("--seeds", o.seeds, "Run seeds 0..N-1 (the seed draws the fault's step, rank and moment)")
      ->capture_default_str()
      ->check(between(1, 100000, "seeds", true))
      ->type_name("N");
  run->add_option("--backend", o.backend, "Backends for hang scenarios")
      ->capture_default_str()
      ->check(CLI::IsMember({"mpi", "gloo", "both"}))
      ->type_name("mpi|gloo|both");
  run->add_option("--timeout", o.timeout_s,
                  "Collective timeout the ranks get (TRAINBENCH_DIST_TIMEOUT); every rank must end within it + 15 s")
      ->capture_default_str()
      ->check(between(1, 3600, "seconds"))
      ->type_name("S");
  return sub;
}

std::vector<std::string> select_scenarios(const std::string& pattern) {
  if (find_scenario(pattern)) return {pattern};
  if (pattern.empty()) throw UsageError("an empty scenario name (give a name or a regex; `.` runs them all)");
  const std::regex re = detail::compile_regex(pattern, "scenario");
  std::vector<std::string> out;
  for (const Scenario& s : scenarios())
    if (std::regex_search(s.name, re)) out.push_back(s.name);
  if (out.empty())
    throw UsageError("no scenario named or matching '" + pattern + "'; `trainbench scenario list` shows them");
  return out;
}

std::vector<std::string> quick_scenarios(const std::string& filter) {
  const std::regex re = detail::compile_filter(filter);
  std::vector<std::string> out;
  for (const Scenario& s : scenarios())
    if (s.quick && std::regex_search(s.name, re)) out.push_back(s.name);
  return out;
}

namespace {

int cmd_list() {
  if (scenarios().empty()) {
    std::cout << "no scenarios registered\n";
    return 0;
  }
  for (const Scenario& s : scenarios()) {
    std::cout << s.name << (s.quick ? "  (in `trainbench all`)" : "") << "\n  fault:     " << s.description
              << "\n  diagnosis: " << s.expected << '\n';
  }
  std::cerr << scenarios().size() << " scenarios; `trainbench scenario run NAME|REGEX` runs them\n";
  return 0;
}

fs::path default_json() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream os;
  os << "results/scenario-" << std::put_time(&tm, "%Y%m%d-%H%M%S") << ".json";
  return os.str();
}

}  // namespace

int run_scenario_command(const CLI::App& sub, const ScenarioOptions& o, const std::string& command_line) {
  if (sub.got_subcommand("list")) return cmd_list();
  const std::vector<std::string> names = select_scenarios(o.pattern);
  const fs::path json = o.json.empty() ? default_json() : fs::path(o.json);
  try {
    check_output_path(json);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--json ") + e.what());
  }
  ScenarioRunOptions ro;
  ro.names = names;
  ro.seeds = o.seeds;
  if (o.backend != "both") ro.backends = {o.backend};
  ro.timeout_s = o.timeout_s;
  const bool beside_json = !o.json.empty() && is_plain_output_path(o.json);
  ro.work_dir = (beside_json ? json.parent_path() : fs::path("results")) / "scenarios";
  ro.progress = &std::cerr;
  const std::vector<Record> records = run_scenarios(ro);
  const Counts c = count(records);
  std::cout << c.passed << " passed, " << c.failed + c.errors << " failed, " << c.skipped << " skipped" << std::endl;
  write_result(json, make_result(RunInfo{command_line, 1}, records));
  std::cout << "results: " << json.string() << std::endl;
  return c.ok() ? 0 : 1;
}

}  // namespace tb::harness
