// The scenarios of `trainbench scenario` (harness/scenario.h): failures reproduced on purpose,
// each passing when the expected diagnosis comes out. docs/debugging.md goes from a symptom to
// the scenario, the diagnosis and the fix.
#pragma once

namespace tb::suites {

// hang/<name>: distributed hangs and desyncs, real ranks through the launcher on MPI and Gloo
// (suites/scenarios/hang_*.cpp).
void register_hang_scenarios();
void register_ddp_hang_scenarios();  // hang_ddp.cpp; called by register_hang_scenarios
// The "scenarios" suite: `trainbench bench --suite scenarios` soaks the hang scenarios over many
// seeds (hang_soak.cpp, Note [Scenario soak]).
void register_scenario_soak();

}  // namespace tb::suites
