// The scenario registry and the launch of a scenario's ranks (harness/scenario.h).
#include "harness/scenario.h"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <iterator>
#include <stdexcept>
#include <thread>

namespace tb::harness {
namespace {

std::vector<Scenario>& scenario_list() {
  static std::vector<Scenario> s;
  return s;
}

}  // namespace

void register_scenario(Scenario s) {
  const std::size_t prefix = s.name.rfind("hang/", 0) == 0 ? 5 : s.name.rfind("oom/", 0) == 0 ? 4 : 0;
  if (prefix == 0) throw std::invalid_argument("scenario name '" + s.name + "' must start with hang/ or oom/");
  if (s.name.size() == prefix || s.name.back() == '/')
    throw std::invalid_argument("scenario name '" + s.name + "' has nothing after its prefix");
  if (!s.run) throw std::invalid_argument("scenario '" + s.name + "' has no run function");
  if (find_scenario(s.name)) throw std::invalid_argument("scenario '" + s.name + "' is registered twice");
  scenario_list().push_back(std::move(s));
}

const std::vector<Scenario>& scenarios() { return scenario_list(); }

const Scenario* find_scenario(const std::string& name) {
  for (const Scenario& s : scenario_list())
    if (s.name == name) return &s;
  return nullptr;
}

LaunchResult launch_scenario_ranks(const Scenario& sc, const ScenarioContext& ctx, int ranks,
                                   const std::map<std::string, std::string>& env, std::chrono::seconds outer_timeout) {
  if (!sc.rank_main) throw std::invalid_argument("scenario '" + sc.name + "' has no rank body to launch");
  LaunchSpec spec;
  spec.ranks = ranks;
  spec.argv = {self_exe(),
               "scenario-rank",
               sc.name,
               "--seed",
               std::to_string(ctx.seed),
               "--backend",
               ctx.backend,
               "--timeout",
               std::to_string(ctx.timeout_s)};
  spec.timeout = outer_timeout;
  spec.run_dir = ctx.run_dir;
  spec.env = env;
  spec.env["TRAINBENCH_DIST_TIMEOUT"] = std::to_string(ctx.timeout_s);
  spec.echo = ctx.echo;
  return launch(spec);
}

std::vector<Record> run_scenarios(const ScenarioRunOptions& o) {
  struct Planned {
    const Scenario* sc;
    std::string backend;
    int seed;
  };
  std::vector<Planned> plan;
  for (const std::string& n : o.names) {
    const Scenario* sc = find_scenario(n);
    if (!sc) throw std::invalid_argument("unknown scenario '" + n + "'");
    const bool hang = n.rfind("hang/", 0) == 0;
    for (const std::string& b : hang ? o.backends : std::vector<std::string>{""})
      for (int seed = 0; seed < o.seeds; ++seed) plan.push_back({sc, b, seed});
  }
  std::vector<Record> out;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    ScenarioContext ctx;
    ctx.seed = p.seed;
    ctx.timeout_s = o.timeout_s;
    if (!p.backend.empty()) ctx.backend = p.backend;
    std::string tag = p.sc->name + (p.backend.empty() ? "" : "-" + p.backend) + "-seed" + std::to_string(p.seed);
    for (char& c : tag)
      if (c == '/') c = '-';
    ctx.run_dir = o.work_dir / (tag + "-" + std::to_string(::getpid()));
    if (o.progress)
      *o.progress << "[" << i + 1 << "/" << plan.size() << "] " << p.sc->name << (p.backend.empty() ? "" : " ")
                  << p.backend << " seed " << p.seed << " ..." << std::endl;
    Record r = p.sc->run(ctx);
    r.suite = "scenarios";
    r.kind = "scenario";
    if (r.case_name.empty())
      r.case_name = p.sc->name + (p.backend.empty() ? "" : "/" + p.backend) + "/seed" + std::to_string(p.seed);
    if (o.progress) {
      std::ostringstream line;
      line << "  " << to_string(r.status) << " in " << std::fixed << std::setprecision(1) << r.duration_s << " s";
      if (r.metrics.contains("time_to_diagnosis_s"))
        line << ", diagnosed " << r.metrics["time_to_diagnosis_s"].get<double>() << " s after the fault";
      line << ": " << r.message.substr(0, r.message.find('\n'));
      if (r.status != Status::Pass) line << "\n  run dir kept: " << ctx.run_dir.string();
      *o.progress << line.str() << std::endl;
    }
    std::error_code ec;
    if (r.status == Status::Pass) std::filesystem::remove_all(ctx.run_dir, ec);
    out.push_back(std::move(r));
  }
  return out;
}

int scenario_rank_main(const std::string& name, const ScenarioContext& ctx) {
  const Scenario* sc = find_scenario(name);
  if (!sc) throw std::invalid_argument("unknown scenario '" + name + "'");
  if (!sc->rank_main) throw std::invalid_argument("scenario '" + name + "' has no rank body");
  return sc->rank_main(ctx);
}

}  // namespace tb::harness
