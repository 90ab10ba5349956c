// The OOM scenarios of `trainbench scenario` (harness/scenario.h, docs/debugging.md "Out of
// memory"): oom/batch_too_large, oom/long_sequence_activations, oom/optimizer_state_step1 (the
// capacity scenarios, each re-run with every remedy under the same cap), oom/fragmentation,
// oom/leak and oom/ddp_one_rank. Each runs in ranks of its own (never in the harness process).
#pragma once
#include <string>
#include <vector>

#include "harness/scenario.h"
#include "suites/scenarios/oom_workload.h"

namespace tb::suites {

void register_oom_scenarios();

// Where a run ran out of memory, as one comparable line: "step 0 forward, tag activation, op
// <op>, 1 MiB requested" ("no OOM" when it did not).
std::string signature(const oom::RunResult& r);

// The determinism check: one rank places the cap once (seed ctx.seed) and runs the scenario's
// fault for seeds 0..seeds-1, each from a fresh model and an emptied cache; one signature per
// seed. For the capacity scenarios and oom/leak (oom/ddp_one_rank ends its rank: run it per seed).
std::vector<std::string> oom_fault_signatures(const std::string& name, const harness::ScenarioContext& ctx, int seeds);

}  // namespace tb::suites
