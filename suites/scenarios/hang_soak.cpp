// Note [Scenario soak]
// `trainbench bench --suite scenarios`: every hang scenario on each backend over
// TRAINBENCH_SCENARIO_SEEDS seeds (default 50), so the fault lands at many steps, ranks and
// moments. One benchmark record per (scenario, backend): detection_rate (runs whose expected
// diagnosis came out), time_to_diagnosis_p50_s / _p99_s / _max_s, outer_kills (runs the launcher's
// outer timeout had to end), orphans; series time_to_diagnosis_s holds every run's figure for the
// report's distribution plot. The runs' own records (kind "scenario") are not kept: a failing
// run's message goes into the benchmark record's message. Not in the default run: hours.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "engine/core/env.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "suites/scenarios/scenarios.h"

namespace tb::suites {

namespace {

double percentile(std::vector<double> v, double p) {  // nearest rank
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t k = std::size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::max<std::size_t>(k, 1) - 1];
}

constexpr double kSoakTimeout = 5;  // the collective timeout the soak's ranks get

harness::Record soak(const std::string& name, const std::string& backend) {
  harness::Record rec;
  rec.kind = "benchmark";
  const int seeds = int(core::env_int64("TRAINBENCH_SCENARIO_SEEDS", 50, 1, 100000));
  harness::ScenarioRunOptions o;
  o.names = {name};
  o.seeds = seeds;
  o.backends = {backend};
  o.timeout_s = kSoakTimeout;
  o.work_dir = std::filesystem::temp_directory_path() / "tb_scenario_soak";
  const std::vector<harness::Record> runs = harness::run_scenarios(o);
  std::vector<double> ttd;
  int detected = 0, kills = 0, orphans = 0;
  std::string failures;
  for (const harness::Record& r : runs) {
    const bool ok = r.status == harness::Status::Pass;
    detected += ok;
    if (r.metrics.contains("time_to_diagnosis_s")) ttd.push_back(r.metrics["time_to_diagnosis_s"].get<double>());
    if (r.metrics.contains("outer_kill")) kills += int(r.metrics["outer_kill"].get<double>());
    if (r.metrics.contains("orphans")) orphans += int(r.metrics["orphans"].get<double>());
    if (!ok && failures.size() < 4000) failures += r.case_name + ": " + r.message.substr(0, 600) + "\n";
  }
  rec.metrics["runs"] = double(runs.size());
  rec.metrics["detection_rate"] = runs.empty() ? 0.0 : double(detected) / double(runs.size());
  rec.metrics["time_to_diagnosis_p50_s"] = percentile(ttd, 50);
  rec.metrics["time_to_diagnosis_p99_s"] = percentile(ttd, 99);
  rec.metrics["time_to_diagnosis_max_s"] = percentile(ttd, 100);
  rec.metrics["outer_kills"] = kills;
  rec.metrics["orphans"] = orphans;
  rec.metrics["timeout_s"] = kSoakTimeout;
  rec.series["time_to_diagnosis_s"] = ttd;
  // The goal: every run diagnosed, none reaching the outer kill, p99 <= timeout + 5 s.
  const bool met = detected == int(runs.size()) && kills == 0 && orphans == 0 &&
                   !(percentile(ttd, 99) > kSoakTimeout + 5);
  rec.status = met ? harness::Status::Pass : harness::Status::Fail;
  rec.message = met ? "" : failures.empty() ? "p99 time to diagnosis above the timeout + 5 s" : failures;
  return rec;
}

}  // namespace

void register_scenario_soak() {
  harness::Suite s;
  s.name = "scenarios";
  s.description =
      "soak of the hang scenarios (`trainbench scenario`): TRAINBENCH_SCENARIO_SEEDS seeds (default 50) per "
      "scenario and backend, the fault at random moments; detection rate and time to diagnosis (benchmarks only)";
  s.run_by_default = false;
  harness::register_suite(std::move(s));
  harness::register_timed_benches("scenarios", [] {
    std::vector<harness::TestCase> out;
    for (const harness::Scenario& sc : harness::scenarios()) {
      if (sc.name.rfind("hang/", 0) != 0) continue;
      for (const std::string backend : {"mpi", "gloo"}) {
        const std::string name = sc.name;
        out.push_back({"soak/" + name.substr(5) + "/" + backend, [name, backend] { return soak(name, backend); }});
      }
    }
    return out;
  });
}

}  // namespace tb::suites
