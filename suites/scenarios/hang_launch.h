// What every hang scenario shares (Note [Hang scenarios] in hang_launch.cpp): the rank side (a
// process group, numbered training steps, the fault moment and errors written to the run dir)
// and the parent side (launch the ranks, read what they left, merge the flight-recorder dumps,
// count what outlived the launch, make the record).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/dist/dump_analysis.h"
#include "engine/dist/process_group.h"
#include "harness/scenario.h"

namespace tb::suites::hang {

// Where and when the fault strikes, drawn from the seed: the step (each step issues collective
// #step), the rank that misbehaves and a delay inside the step (so the fault lands at a random
// moment, not only at step boundaries).
struct FaultPlan {
  int step = 3;
  int victim = 1;
  int delay_ms = 0;
  int steps = 6;  // steps every healthy rank runs
};
FaultPlan fault_plan(int seed, int world);

// One rank of a hang scenario.
struct Rank {
  const harness::ScenarioContext& ctx;
  FaultPlan plan;
  std::shared_ptr<dist::ProcessGroup> pg;  // null until join()
  int rank = -1, world = 0;
  // Reads the rank from the launcher's environment and writes its pid file (no group yet).
  Rank(const harness::ScenarioContext& ctx, int world);
  // Creates the process group on ctx.backend.
  void join();
  // One training step's gradient sync: all_reduce of 1024 float32 (sum) at call site
  // "train/grad sync"; checks the sum.
  void step();
  // Writes the fault moment (fault_rank<R>.txt) and sleeps the plan's delay: call it right before
  // the faulty action.
  void fault(const std::string& what);
  // Stamps the moment a diagnosis that is not an error came out (diagnosed_rank<R>.txt), e.g. the
  // end of a collective a straggler report is printed for.
  void diagnosed(const std::string& what) const;
  // The engine allocator's peak so far, written to peak_rank<R>.txt (the record's peak bytes).
  void write_peak() const;
  bool victim() const { return rank == plan.victim; }
};

// Runs `body` as a rank's main: an exception is written to error_rank<R>.txt (with its time, for
// time_to_diagnosis_s) and printed, and the rank returns 4.
int rank_main(const harness::ScenarioContext& ctx, int world, const std::function<void(Rank&)>& body);

// What a launch left behind, for a scenario's check.
struct Outcome {
  FaultPlan plan;
  int world = 0;
  std::string backend;
  double timeout_s = 0;  // the collective timeout the ranks had
  harness::LaunchResult launch;
  std::vector<std::string> errors;          // per rank: the exception it raised ("" none)
  std::vector<std::string> watchdog_lines;  // per rank: its watchdog's line ("" none)
  std::optional<dist::Diagnosis> dumps;     // the merged flight-recorder dumps, if any were written
  std::string dump_error;                   // why they could not be merged
  // The first finding of the dumps' diagnosis of `kind` naming `rank` at collective `seq`.
  const dist::Finding* finding(dist::FindingKind kind, int rank, uint64_t seq) const;
  std::string all(std::size_t lines = 12) const;  // for failure messages
  // "" when the job exited 0 and no rank raised, else what went wrong.
  std::string clean_finish() const;
};

// Checks an outcome: "" when the expected diagnosis came out (then `diagnosis` holds it), else
// what was wrong.
using Check = std::function<std::string(const Outcome&, std::string& diagnosis)>;

struct HangScenario {
  std::string name, description, expected;  // name without "hang/"
  int world = 2;
  std::function<void(Rank&)> body;
  Check check;
  std::map<std::string, std::string> env;  // extra environment for the ranks
  bool quick = false;                      // in `trainbench all`'s short set (harness::Scenario::quick)
  // The fix shown working (e.g. Join for uneven batches): no fault to diagnose, so no
  // time_to_diagnosis_s is required; the check says what a correct finish looks like.
  bool remedy = false;
  // Backends where the launcher's outer timeout is the expected end (MPI_Init has no timeout of
  // its own): there the run passes with outer_kill 1 when the check accepts the stacks.
  std::vector<std::string> outer_kill_expected;
};

// Registers `s` as "hang/<name>": its run launches `world` ranks with an outer timeout of the
// collective timeout + 15 s, checks the outcome and fills the record (metrics
// time_to_diagnosis_s, ranks_ended, orphans (the launcher's count), outer_kill, launch_s,
// peak_bytes_rank<R>).
void register_hang(HangScenario s);

// "collective #S differs between ranks" naming both sides: every rank that raised must say it
// (at least one must), with `majority` and `odd` (fingerprint texts, watchdog.h describe_call).
Check mismatch_check(const std::string& majority, const std::string& odd);

}  // namespace tb::suites::hang
