// The scenario registry and the launch of a scenario's ranks (harness/scenario.h).
#include "harness/scenario.h"

#include <stdexcept>

namespace tb::harness {
namespace {

std::vector<Scenario>& scenario_list() {
  static std::vector<Scenario> s;
  return s;
}

}  // namespace

void register_scenario(Scenario s) {
  if (s.name.rfind("hang/", 0) != 0 && s.name.rfind("oom/", 0) != 0)
    throw std::invalid_argument("scenario name '" + s.name + "' must start with hang/ or oom/");
  if (s.name.size() <= 5 || s.name.back() == '/')
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

int scenario_rank_main(const std::string& name, const ScenarioContext& ctx) {
  const Scenario* sc = find_scenario(name);
  if (!sc) throw std::invalid_argument("unknown scenario '" + name + "'");
  if (!sc->rank_main) throw std::invalid_argument("scenario '" + name + "' has no rank body");
  return sc->rank_main(ctx);
}

}  // namespace tb::harness
