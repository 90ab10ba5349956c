// Note [OOM scenarios]
// Every scenario runs in ranks launched through launch_scenario_ranks (the harness process never
// holds the cap). The parent writes <run_dir>/oom_config.json, the ranks write
// <run_dir>/oom_result_rank<R>.json (oom_workload.h's RunResult) and leave their pids for the
// orphan check. Caps are not constants: each rank first trains the same run without a cap and
// places the cap against that run's measured peak (a fraction of it, or between two of its
// phases), so a scenario fails at the same step, phase and tag whatever the engine's exact
// allocation sizes, and a change that moves the failure elsewhere is a failed diagnosis.
//   - capacity scenarios (batch_too_large, long_sequence_activations, optimizer_state_step1):
//     1 rank: the uncapped baseline (peak, samples/s), the run under the cap (must OOM where
//     expected), then micro-batches + accumulation, activation checkpointing and bf16 autocast
//     under the same cap; then 2 ranks: FSDP with the same cap on each. A remedy fits when its run
//     ends without an OutOfMemoryError; its throughput is the job's samples/s over the baseline's.
//     One that does not fit runs once more without the cap, to say how much it needs.
//   - fragmentation: sequence lengths that grow every step with the allocator's cache release off
//     (memory::set_release_cache); the cached blocks of earlier sizes fill the cap.
//   - leak: every step's logits appended to a list; the cap leaves room for a few steps of it; a
//     snapshot after each step groups the live bytes by the site (op, module) that made them.
//   - ddp_one_rank: 2 ranks under DDP, the cap on rank 1 only; rank 1 reports its OOM and exits
//     with its group alive (as an uncaught error would), rank 0's watchdog names it.
#include "suites/scenarios/oom_scenarios.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/dist/watchdog.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/iterator.h"
#include "harness/scenario.h"
#include "suites/scenarios/oom_workload.h"

namespace tb::suites {

namespace {

namespace fs = std::filesystem;
using harness::Record;
using harness::Scenario;
using harness::ScenarioContext;
using nlohmann::json;
using oom::GptShape;
using oom::Remedy;
using oom::RunResult;
using oom::RunSpec;

constexpr int kOomExitCode = 4;  // a rank that ran out of memory (ddp_one_rank)

std::string dir_of(const ScenarioContext& ctx) { return ctx.run_dir.string(); }
json config(const ScenarioContext& ctx) { return oom::read_json(dir_of(ctx) + "/oom_config.json"); }
void write_result(const ScenarioContext& ctx, int rank, const json& j) {
  oom::write_json(dir_of(ctx) + "/oom_result_rank" + std::to_string(rank) + ".json", j);
}
std::string mib(int64_t b) { return memory::format_bytes(b); }
std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.precision(digits);
  os << std::fixed << v;
  return os.str();
}

// ---- the parent's side ----

struct Launched {
  harness::LaunchResult res;
  std::vector<std::optional<json>> results;  // per rank, when it wrote one
  int ranks_ended = 0, orphans = 0;
};

// <run_dir>/<name>; without a run dir (a caller that gave none), one under the temp folder.
fs::path sub_dir(const ScenarioContext& ctx, const std::string& name) {
  const fs::path base = ctx.run_dir.empty() ? fs::temp_directory_path() / ("tb_oom_" + std::to_string(getpid()))
                                            : ctx.run_dir;
  return base / name;
}

// Ranks of `sc` with `cfg` as their config, in `dir`; every rank's pid checked (and killed) after.
Launched launch(const Scenario& sc, const ScenarioContext& ctx, const fs::path& dir, int ranks, const json& cfg,
                int timeout_s) {
  ScenarioContext c = ctx;
  c.run_dir = dir;
  fs::remove_all(dir);
  fs::create_directories(dir);
  oom::write_json((dir / "oom_config.json").string(), cfg);
  Launched l;
  l.res = harness::launch_scenario_ranks(sc, c, ranks, {}, std::chrono::seconds(timeout_s));
  for (int r = 0; r < ranks; ++r) {
    const fs::path p = dir / ("oom_result_rank" + std::to_string(r) + ".json");
    if (fs::exists(p)) l.results.push_back(oom::read_json(p.string()));
    else l.results.push_back(std::nullopt);
    // The launcher has ended and counted everything of the run (LaunchResult::orphans); a rank
    // has ended when the pid it left is gone.
    long pid = 0;
    std::ifstream in(dir / ("rank" + std::to_string(r) + ".pid"));
    if (!(in >> pid) || !dist::process_alive(pid)) ++l.ranks_ended;
  }
  l.orphans = l.res.orphans;
  return l;
}

void add_launch_metrics(Record& rec, const Launched& l) {
  rec.metrics["ranks_ended"] = rec.metrics.value("ranks_ended", 0) + l.ranks_ended;
  rec.metrics["orphans"] = rec.metrics.value("orphans", 0) + l.orphans;
  // As the hang scenarios: launches that reached the outer timeout (the launcher killed them).
  rec.metrics["outer_kill"] = rec.metrics.value("outer_kill", 0) + (l.res.timed_out ? 1 : 0);
}

Record scenario_record(const Scenario& sc, int seed) {
  Record rec;
  rec.suite = "scenarios";
  rec.case_name = sc.name + "/seed" + std::to_string(seed);  // as run_scenarios names runs
  rec.kind = "scenario";
  return rec;
}

// Runs body; a thrown exception or a failed check becomes a failing record (never throws).
Record guarded(const Scenario& sc, const ScenarioContext& ctx,
               const std::function<void(Record&, std::vector<std::string>& failures)>& body) {
  Record rec = scenario_record(sc, ctx.seed);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  try {
    body(rec, failures);
  } catch (const std::exception& e) {
    failures.push_back(std::string("the scenario could not run: ") + e.what());
  }
  rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rec.metrics.value("orphans", 0) > 0) failures.push_back("processes of the run outlived the launch");
  if (rec.metrics.value("outer_kill", 0) > 0) failures.push_back("a launch reached its outer timeout");
  if (!failures.empty()) {
    rec.status = harness::Status::Fail;
    std::string why = "expected: " + sc.expected + ". Not found:";
    for (const std::string& f : failures) why += " " + f + ";";
    rec.message = why + "\n" + rec.message;
  }
  if (ctx.echo) *ctx.echo << rec.message << "\n";
  return rec;
}

// "step 0, forward, tag activation, op <op>: <the error>".
std::string where(const RunResult& r) {
  std::string s = "step " + std::to_string(r.step) + " " + r.phase + ", tag " + (r.tag.empty() ? "?" : r.tag);
  if (!r.op.empty()) s += ", op " + r.op;
  if (!r.module.empty()) s += " in " + r.module;
  return s + ", " + mib(r.requested) + " requested";
}

void oom_metrics(Record& rec, const RunResult& fault) {
  rec.metrics["oom_signature"] = signature(fault);
  rec.metrics["oom_step"] = fault.step;
  rec.metrics["oom_phase"] = fault.phase;
  rec.metrics["oom_tag"] = fault.tag;
  rec.metrics["oom_op"] = fault.op;
  rec.metrics["oom_module"] = fault.module;
  rec.metrics["oom_requested_bytes"] = fault.requested;
  rec.metrics["time_to_diagnosis_s"] = fault.seconds_to_oom;
}

void expect_oom(const RunResult& fault, int step, const std::string& phase, const std::string& tag,
                std::vector<std::string>& failures) {
  if (!fault.oom) {
    failures.push_back("the run under the cap did not run out of memory");
    return;
  }
  if (fault.step != step || fault.phase != phase || fault.tag != tag)
    failures.push_back("the OOM came at " + where(fault) + ", not at step " + std::to_string(step) + " " + phase +
                       " tag " + tag);
  if (fault.error.find("tag " + tag) == std::string::npos)
    failures.push_back("the error text does not name the tag " + tag + ": " + fault.error);
  // The call site: the op that asked (a Tensor method's copy names itself too, e.g. "reshape").
  if (fault.op.empty() || fault.error.find(fault.op) == std::string::npos)
    failures.push_back("the error does not name the op that asked: " + fault.error);
  if (fault.snapshot_path.empty() || !fs::exists(fault.snapshot_path))
    failures.push_back("no memory snapshot was written at the OOM");
}

// One rank of `sc` in <run_dir>/<mode> that places the cap, runs the fault and writes
// {"cap", "fault", ...}: its result with the fault's metrics recorded, or nullopt (and the failure
// said) when it wrote none.
std::optional<json> run_one_rank(const Scenario& sc, const ScenarioContext& ctx, const std::string& mode, Record& rec,
                                 std::vector<std::string>& failures) {
  Launched one = launch(sc, ctx, sub_dir(ctx, mode), 1, {{"mode", mode}}, 300);
  add_launch_metrics(rec, one);
  if (!one.res.ok() || !one.results[0]) {
    failures.push_back("the rank failed: " + one.res.diagnosis(20));
    return std::nullopt;
  }
  const RunResult fault = RunResult::from_json(one.results[0]->at("fault"));
  oom_metrics(rec, fault);
  rec.metrics["cap_bytes"] = one.results[0]->at("cap");
  rec.metrics["peak_bytes_rank0"] = fault.peak_bytes;
  return one.results[0];
}

// ---- capacity scenarios ----

struct Capacity {
  std::string name;
  GptShape shape;
  // Of the baseline's peak; 0: 3/4 of the way from step 0's forward/backward peak to the peak with
  // the optimizer state (AdamW's state is 2x the parameters, so its first step() cannot fit).
  double cap_fraction = 0;
  std::string phase, tag;  // where the OOM must come (step 0)
  std::string what;        // the description
};

std::vector<Capacity> capacity_scenarios() {
  return {
      {"oom/batch_too_large",
       {256, 64, 4, 4, 64, 64},
       0.6,
       "forward",
       "activation",
       "a GPT step on a batch of 64 x 64 tokens under a cap of 60% of its peak"},
      {"oom/long_sequence_activations",
       {256, 64, 4, 4, 512, 4},
       0.5,
       "forward",
       "activation",
       "a GPT step on 4 sequences of 512 tokens (attention scores grow with T^2) under a cap of 50% of its peak"},
      {"oom/optimizer_state_step1",
       {256, 192, 8, 4, 16, 4},
       0,
       "optimizer.step",
       "optimizer_state",
       "a GPT (8 blocks of d 192) with AdamW on a small batch, capped 3/4 of the way from step 0's "
       "forward/backward peak to the peak once AdamW's first step() creates exp_avg and exp_avg_sq"},
  };
}

// The determinism check's rank side (oom_fault_signatures): when the config asks for it, the
// fault alone for seeds 0..N-1 under the cap already placed; true when it ran.
bool repeat_fault(const ScenarioContext& ctx, RunSpec s) {
  const json cfg = config(ctx);
  if (!cfg.contains("repeat_seeds")) return false;
  json faults = json::array();
  for (int seed = 0; seed < cfg.at("repeat_seeds").get<int>(); ++seed) {
    s.seed = uint64_t(seed);
    faults.push_back(oom::train_run(s).to_json());
  }
  write_result(ctx, 0, {{"faults", faults}});
  return true;
}

// Rank 0 of the capacity launch: baseline, cap, fault, three remedies.
int capacity_rank(const Capacity& c, const ScenarioContext& ctx) {
  const json cfg = config(ctx);
  if (cfg.at("mode") == "fsdp") {
    auto group = dist::new_group(ctx.backend);
    oom::write_pid_file(dir_of(ctx), group->rank());
    set_num_threads(1);
    RunSpec s;
    s.shape = c.shape, s.remedy = oom::capacity_remedies().back(), s.cap = cfg.at("cap"), s.seed = uint64_t(ctx.seed);
    s.group = group;
    const RunResult r = oom::train_run(s);
    write_result(ctx, group->rank(), r.to_json());
    return 0;
  }
  oom::write_pid_file(dir_of(ctx), 0);
  set_num_threads(1);  // as each FSDP rank: the throughput ratios compare like with like
  RunSpec s;
  s.shape = c.shape, s.seed = uint64_t(ctx.seed);
  const RunResult base = oom::train_run(s);
  TB_CHECK(!base.oom, "oom scenario", "the uncapped baseline ran out of memory: ", base.error);
  s.cap = c.cap_fraction > 0 ? int64_t(c.cap_fraction * double(base.peak_bytes))
                             : base.peak_before_first_step + (base.peak_bytes - base.peak_before_first_step) * 3 / 4;
  s.snapshot_dir = dir_of(ctx);
  if (repeat_fault(ctx, s)) return 0;
  const RunResult fault = oom::train_run(s);
  json remedies = json::array();
  s.snapshot_dir.clear();
  for (const Remedy& r : oom::capacity_remedies()) {
    if (r.fsdp) continue;  // ranks of their own
    s.remedy = r;
    json j = oom::train_run(s).to_json();
    if (j.at("oom").get<bool>()) {  // how much it would have needed: the same run without the cap
      RunSpec free = s;
      free.cap = 0;
      j["uncapped_peak_bytes"] = oom::train_run(free).peak_bytes;
    }
    remedies.push_back(j);
  }
  write_result(ctx, 0,
               {{"baseline", base.to_json()}, {"cap", s.cap}, {"fault", fault.to_json()}, {"remedies", remedies}});
  return 0;
}

Record capacity_run(const Capacity& c, const ScenarioContext& ctx) {
  const Scenario& sc = *harness::find_scenario(c.name);
  return guarded(sc, ctx, [&](Record& rec, std::vector<std::string>& failures) {
    const std::optional<json> result = run_one_rank(sc, ctx, "capacity", rec, failures);
    if (!result) return;
    const json& out = *result;
    const RunResult base = RunResult::from_json(out.at("baseline"));
    const RunResult fault = RunResult::from_json(out.at("fault"));
    const int64_t cap = out.at("cap");
    std::vector<RunResult> remedies;
    std::map<std::string, int64_t> needs;  // uncapped peaks of the remedies that did not fit
    for (const json& j : out.at("remedies")) {
      remedies.push_back(RunResult::from_json(j));
      if (j.contains("uncapped_peak_bytes")) needs[remedies.back().remedy] = j.at("uncapped_peak_bytes");
    }

    Launched two = launch(sc, ctx, sub_dir(ctx, "fsdp"), 2, {{"mode", "fsdp"}, {"cap", cap}}, 300);
    add_launch_metrics(rec, two);
    RunResult fsdp;
    fsdp.remedy = oom::capacity_remedies().back().name;
    std::string fsdp_note;
    for (int r = 0; r < 2; ++r) {
      if (!two.results[size_t(r)]) {
        fsdp.oom = true;  // a rank that did not report: counted as not fitting, and said why
        fsdp_note = "rank " + std::to_string(r) + " wrote no result: " + two.res.diagnosis(8);
        continue;
      }
      const RunResult rr = RunResult::from_json(*two.results[size_t(r)]);
      rec.metrics["remedy_fsdp_2_ranks_peak_bytes_rank" + std::to_string(r)] = rr.peak_bytes;
      fsdp.peak_bytes = std::max(fsdp.peak_bytes, rr.peak_bytes);
      if (rr.oom && !fsdp.oom) {
        fsdp = rr;
        fsdp_note = "rank " + std::to_string(r) + ": " + where(rr);
      }
      // The job's rate is its slowest rank's.
      if (!fsdp.oom) fsdp.samples_per_s = r == 0 ? rr.samples_per_s : std::min(fsdp.samples_per_s, rr.samples_per_s);
    }
    remedies.push_back(fsdp);

    rec.metrics["baseline_peak_bytes"] = base.peak_bytes;
    rec.metrics["baseline_samples_per_s"] = base.samples_per_s;
    std::ostringstream msg;
    msg << c.name << ": out of memory at " << where(fault) << " under a cap of " << mib(cap) << " (uncapped peak "
        << mib(base.peak_bytes) << ")";
    if (c.phase == "optimizer.step")
      msg << "; step 0's forward and backward fit (peak " << mib(fault.peak_before_first_step)
          << "): the optimizer's first step() creates its state";
    msg << ".\n  " << fault.error << "\n";
    if (!fault.snapshot_path.empty()) msg << "  memory snapshot at the OOM: " << fault.snapshot_path << "\n";
    msg << "  remedy                     fits  peak        samples/s  vs uncapped\n";
    msg << "  uncapped baseline          -     " << mib(base.peak_bytes) << "   " << fixed(base.samples_per_s, 1)
        << "   1.00\n";
    int fits = 0;
    for (const RunResult& r : remedies) {
      const double ratio = base.samples_per_s > 0 ? r.samples_per_s / base.samples_per_s : 0;
      rec.metrics["remedy_" + r.remedy + "_fits"] = r.oom ? 0 : 1;
      rec.metrics["remedy_" + r.remedy + "_peak_bytes"] = r.peak_bytes;
      if (!r.oom) rec.metrics["remedy_" + r.remedy + "_throughput_ratio"] = ratio;
      fits += r.oom ? 0 : 1;
      std::string name = r.remedy;
      name.resize(std::max<size_t>(name.size(), 26), ' ');
      msg << "  " << name << " " << (r.oom ? "no " : "yes") << "   " << mib(r.peak_bytes) << "   ";
      if (r.oom) {
        msg << "OOM at " << where(r);
        if (needs.count(r.remedy)) {
          msg << "; needs " << mib(needs[r.remedy]) << " without the cap";
          rec.metrics["remedy_" + r.remedy + "_uncapped_peak_bytes"] = needs[r.remedy];
        }
        msg << "\n";
      } else msg << fixed(r.samples_per_s, 1) << "   " << fixed(ratio, 2) << "\n";
    }
    if (!fsdp_note.empty() && fsdp.oom) msg << "  (fsdp_2_ranks: " << fsdp_note << ")\n";
    msg << "  (samples/s of the whole job over 2 timed steps, one thread per process: fsdp_2_ranks has two processes,\n"
           "  so twice the baseline's cores)\n";
    rec.metrics["remedies_fit"] = fits;
    rec.message = msg.str();

    expect_oom(fault, 0, c.phase, c.tag, failures);
    if (c.phase == "optimizer.step" && fault.peak_before_first_step > cap)
      failures.push_back("step 0's forward and backward did not fit under the cap");
    if (fits == 0) failures.push_back("no remedy fits under the cap");
  });
}

// ---- leak ----

const GptShape kLeakShape{512, 64, 2, 4, 64, 8};  // logits 8 x 64 x 512 float32: 1 MiB per step
constexpr int kLeakSteps = 12;
constexpr double kLeakRoom = 4.5;  // the cap leaves room for this many steps of leaked logits

int leak_rank(const ScenarioContext& ctx) {
  oom::write_pid_file(dir_of(ctx), 0);
  set_num_threads(1);
  RunSpec s;
  s.shape = kLeakShape, s.seed = uint64_t(ctx.seed), s.steps = 2;
  const RunResult base = oom::train_run(s);
  TB_CHECK(!base.oom, "oom scenario", "the baseline ran out of memory: ", base.error);
  const int64_t logits = int64_t(memory::block_size(size_t(kLeakShape.batch * kLeakShape.seq * kLeakShape.vocab * 4)));
  s.cap = base.peak_bytes + int64_t(kLeakRoom * double(logits));
  s.steps = kLeakSteps;
  s.keep_logits = true;
  s.sites_each_step = true;
  s.snapshot_dir = dir_of(ctx);
  if (repeat_fault(ctx, s)) return 0;
  const RunResult leak = oom::train_run(s);
  write_result(ctx, 0,
               {{"baseline", base.to_json()}, {"cap", s.cap}, {"logits_bytes", logits}, {"fault", leak.to_json()}});
  return 0;
}

Record leak_run(const ScenarioContext& ctx) {
  const Scenario& sc = *harness::find_scenario("oom/leak");
  return guarded(sc, ctx, [&](Record& rec, std::vector<std::string>& failures) {
    const std::optional<json> result = run_one_rank(sc, ctx, "leak", rec, failures);
    if (!result) return;
    const json& out = *result;
    const RunResult fault = RunResult::from_json(out.at("fault"));
    const int64_t cap = out.at("cap"), logits = out.at("logits_bytes");
    // The growth: bytes held after each step, step over step (from step 1: step 0 made the
    // optimizer state).
    const std::vector<int64_t>& held = fault.allocated_after_step;
    const std::vector<int64_t>& act = fault.activation_after_step;
    std::ostringstream msg;
    msg << "oom/leak: out of memory at " << where(fault) << " under a cap of " << mib(cap) << ". Held after each step:";
    for (size_t i = 0; i < held.size(); ++i) msg << " " << mib(held[i]);
    bool steady = held.size() >= 3;
    for (size_t i = 1; i < held.size(); ++i) {
      const int64_t grew = held[i] - held[i - 1], grew_act = act[i] - act[i - 1];
      steady = steady && grew == logits && grew_act == logits;
    }
    const int64_t per_step = held.size() >= 2 ? held.back() - held[held.size() - 2] : 0;
    // The snapshots after each step, by the site that made the live blocks: the site whose bytes
    // grew by the logits' size at every step is the leak's creating op.
    const auto& sites = fault.sites_after_step;
    std::string grower;
    if (sites.size() >= 3)
      for (const auto& [site, bytes] : sites.back()) {
        bool every = true;
        for (size_t i = 1; i < sites.size() && every; ++i) {
          const auto prev = sites[i - 1].find(site), now = sites[i].find(site);
          const int64_t before = prev == sites[i - 1].end() ? 0 : prev->second;
          every = now != sites[i].end() && now->second - before == logits;
        }
        if (every) grower = site;
      }
    rec.metrics["leak_site"] = grower;
    rec.metrics["leak_bytes_per_step"] = per_step;
    rec.metrics["steps_before_oom"] = int64_t(held.size());
    msg << ": +" << mib(per_step) << " per step, all of it tagged activation";
    if (!grower.empty())
      msg << ", made by " << grower << " (the per-step snapshots: its live bytes grew by " << mib(logits)
          << " at every step)";
    msg << ".\n  " << fault.error;
    if (!fault.snapshot_path.empty()) msg << "\n  memory snapshot at the OOM: " << fault.snapshot_path;
    rec.message = msg.str();
    // Where the last step's request fails (forward or backward) is the cap's business; the
    // diagnosis is the growth before it.
    if (!fault.oom) failures.push_back("the leaking run did not run out of memory");
    if (!steady)
      failures.push_back("the bytes held did not grow by the logits' " + mib(logits) + " (activation) every step");
    if (fault.step < 3) failures.push_back("the leak ran out of memory before showing its growth");
    if (grower.empty()) failures.push_back("no site's live bytes grew by the logits' size at every step");
    else if (grower.find("head") == std::string::npos)
      failures.push_back("the growing site " + grower + " is not the head that makes the logits");
  });
}

// ---- fragmentation ----
// Sequence lengths that grow step after step (32, 48, ..., 128): each step's activations come in
// size classes no earlier step made, and the cache serves a request only from its own class. With
// the cache release off (memory::set_release_cache: memory the allocator cannot give back, as a
// CUDA segment with a live block in it), the earlier steps' free blocks stay reserved and count
// against the cap: the request fails with more bytes cached but free than it asks, while the
// bytes held by live tensors plus the request are under the cap.

const GptShape kFragShape{256, 64, 2, 4, 128, 8};
const std::vector<int64_t> kFragSeqs{32, 48, 64, 80, 96, 112, 128};
constexpr double kFragCapFraction = 1.25;  // of the uncapped run's peak (live bytes)

RunSpec frag_spec(const ScenarioContext& ctx) {
  RunSpec s;
  s.shape = kFragShape, s.seed = uint64_t(ctx.seed), s.seq_per_step = kFragSeqs, s.steps = int(kFragSeqs.size());
  return s;
}

int frag_rank(const ScenarioContext& ctx) {
  oom::write_pid_file(dir_of(ctx), 0);
  set_num_threads(1);
  RunSpec s = frag_spec(ctx);
  const RunResult base = oom::train_run(s);  // the cache released as needed, no cap: the peak
  TB_CHECK(!base.oom, "oom scenario", "the uncapped run ran out of memory: ", base.error);
  s.cap = int64_t(kFragCapFraction * double(base.peak_bytes));
  s.release_cache = false;
  s.snapshot_dir = dir_of(ctx);
  if (repeat_fault(ctx, s)) return 0;
  const RunResult fault = oom::train_run(s);
  s.snapshot_dir.clear();
  // Remedies: let the allocator return its cache (torch.cuda.empty_cache(), or CUDA's expandable
  // segments), or pad every batch to one length so every step reuses the same blocks.
  RunSpec release = s;
  release.release_cache = true;
  release.remedy.name = "release_cache";
  RunSpec padded = s;
  padded.seq_per_step.clear();
  padded.remedy.name = "pad_to_max_length";
  write_result(ctx, 0,
               {{"baseline", base.to_json()},
                {"cap", s.cap},
                {"fault", fault.to_json()},
                {"remedies", {oom::train_run(release).to_json(), oom::train_run(padded).to_json()}}});
  return 0;
}

Record frag_run(const ScenarioContext& ctx) {
  const Scenario& sc = *harness::find_scenario("oom/fragmentation");
  return guarded(sc, ctx, [&](Record& rec, std::vector<std::string>& failures) {
    const std::optional<json> result = run_one_rank(sc, ctx, "fragmentation", rec, failures);
    if (!result) return;
    const json& out = *result;
    const RunResult base = RunResult::from_json(out.at("baseline"));
    const RunResult fault = RunResult::from_json(out.at("fault"));
    const int64_t cap = out.at("cap");
    rec.metrics["baseline_peak_bytes"] = base.peak_bytes;
    rec.metrics["cached_free_bytes"] = fault.cached_free;
    rec.metrics["largest_free_block_bytes"] = fault.largest_free_block;
    rec.metrics["allocated_bytes_at_oom"] = fault.allocated;
    const int64_t block = fault.requested > 0 ? int64_t(memory::block_size(size_t(fault.requested))) : 0;
    std::ostringstream msg;
    msg << "oom/fragmentation: out of memory at " << where(fault) << " (sequence length "
        << (fault.step >= 0 && size_t(fault.step) < kFragSeqs.size() ? kFragSeqs[size_t(fault.step)] : 0)
        << ") under a cap of " << mib(cap) << ": " << mib(fault.allocated) << " held by live tensors + the "
        << mib(block) << " block asked = " << mib(fault.allocated + block) << " would fit, but "
        << mib(fault.cached_free) << " sit cached but free in blocks of the earlier lengths' sizes";
    // The cached blocks at the refusal, from the OOM's snapshot: none of the request's size class
    // (the cache serves a request only from its own class and never splits a larger block).
    int64_t cached_blocks = 0, same_class = 0;
    if (!fault.snapshot_path.empty() && fs::exists(fault.snapshot_path)) {
      const json snap = oom::read_json(fault.snapshot_path);
      for (const json& b : snap.at("cached")) {
        ++cached_blocks;
        same_class += b.at("size").get<int64_t>() == block ? 1 : 0;
      }
    }
    rec.metrics["cached_blocks_at_oom"] = cached_blocks;
    msg << " (" << cached_blocks << " blocks, the largest " << mib(fault.largest_free_block) << ", none of the "
        << mib(block) << " size class), which the allocator may not give back and the cache never splits.\n  "
        << fault.error << "\n";
    if (!fault.snapshot_path.empty()) msg << "  memory snapshot at the OOM: " << fault.snapshot_path << "\n";
    msg << "  remedy               fits  peak\n";
    int fits = 0;
    for (const json& j : out.at("remedies")) {
      const RunResult r = RunResult::from_json(j);
      rec.metrics["remedy_" + r.remedy + "_fits"] = r.oom ? 0 : 1;
      rec.metrics["remedy_" + r.remedy + "_peak_bytes"] = r.peak_bytes;
      fits += r.oom ? 0 : 1;
      std::string name = r.remedy;
      name.resize(std::max<size_t>(name.size(), 20), ' ');
      msg << "  " << name << " " << (r.oom ? "no " : "yes") << "   " << mib(r.peak_bytes);
      if (r.oom) msg << "   OOM at " << where(r);
      msg << "\n";
    }
    rec.message = msg.str();
    if (!fault.oom) {
      failures.push_back("the run with the cache release off did not run out of memory");
      return;
    }
    if (fault.reason != "limit") failures.push_back("the refusal's reason is " + fault.reason + ", not the limit");
    if (fault.cached_free < int64_t(fault.requested))
      failures.push_back("the bytes cached but free (" + mib(fault.cached_free) + ") do not exceed the request");
    if (fault.allocated + block > cap) failures.push_back("live bytes + the request exceed the cap: not fragmentation");
    if (cached_blocks == 0) failures.push_back("the OOM's snapshot lists no cached blocks");
    if (same_class > 0) failures.push_back("a cached block of the request's size class existed");
    if (fits == 0) failures.push_back("no remedy fits under the cap");
  });
}

// ---- one rank under DDP ----

const GptShape kDdpShape{256, 64, 2, 4, 64, 16};
constexpr int kDdpOomRank = 1;
constexpr double kDdpCapFraction = 0.6;

int ddp_rank(const ScenarioContext& ctx) {
  auto group = dist::new_group(ctx.backend);
  const int rank = group->rank();
  oom::write_pid_file(dir_of(ctx), rank);
  set_num_threads(1);
  RunSpec s;
  s.shape = kDdpShape, s.seed = uint64_t(ctx.seed), s.steps = 2, s.ddp = true, s.group = group;
  const RunResult base = oom::train_run(s);  // every rank: the uncapped peak
  TB_CHECK(!base.oom, "oom scenario", "the uncapped DDP run ran out of memory: ", base.error);
  if (rank == kDdpOomRank) {
    s.cap = int64_t(kDdpCapFraction * double(base.peak_bytes));
    s.snapshot_dir = dir_of(ctx);
  }
  s.steps = 4;
  const RunResult r = oom::train_run(s);
  if (r.oom) {
    json out = r.to_json();
    out["cap"] = s.cap;
    out["baseline_peak_bytes"] = base.peak_bytes;
    write_result(ctx, rank, out);
    std::fprintf(stderr, "trainbench: oom: rank %d: %s\n", rank, r.error.c_str());
    std::fflush(stderr);
    std::exit(kOomExitCode);  // as an uncaught error would: the group is left alive
  }
  write_result(ctx, rank, r.to_json());
  return 0;
}

Record ddp_run(const ScenarioContext& ctx) {
  const Scenario& sc = *harness::find_scenario("oom/ddp_one_rank");
  return guarded(sc, ctx, [&](Record& rec, std::vector<std::string>& failures) {
    const auto t0 = std::chrono::steady_clock::now();
    Launched l = launch(sc, ctx, sub_dir(ctx, "ddp"), 2, {{"mode", "ddp"}}, int(ctx.timeout_s) + 120);
    add_launch_metrics(rec, l);
    const double launch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rec.metrics["launch_seconds"] = launch_s;
    const std::string all = l.res.diagnosis(12);
    if (l.res.timed_out) failures.push_back("the ranks hung until the launch deadline");
    const std::optional<json>& oom_out = l.results[size_t(kDdpOomRank)];
    if (!oom_out) {
      failures.push_back("rank " + std::to_string(kDdpOomRank) + " did not report an OOM");
      rec.message = all;
      return;
    }
    const RunResult fault = RunResult::from_json(*oom_out);
    oom_metrics(rec, fault);
    rec.metrics["time_to_diagnosis_s"] = launch_s;  // every rank's diagnosis is out when the launch ends
    rec.metrics["oom_rank"] = kDdpOomRank;
    rec.metrics["peak_bytes_rank" + std::to_string(kDdpOomRank)] = fault.peak_bytes;
    std::ostringstream msg;
    msg << "oom/ddp_one_rank: rank " << kDdpOomRank << " ran out of memory at " << where(fault) << " (cap "
        << mib(oom_out->at("cap").get<int64_t>()) << " on that rank only).\n  " << fault.error;
    const std::string& oom_log = l.res.rank_output[size_t(kDdpOomRank)];
    if (oom_log.find("trainbench: oom: rank " + std::to_string(kDdpOomRank)) == std::string::npos)
      failures.push_back("rank " + std::to_string(kDdpOomRank) + "'s log lacks its OOM line");
    for (int r = 0; r < 2; ++r) {
      if (r == kDdpOomRank) continue;
      const std::string& o = l.res.rank_output[size_t(r)];
      const std::string want = "watchdog: rank " + std::to_string(r) + ": rank " + std::to_string(kDdpOomRank) +
                               " (pid";
      const size_t at = o.find(want);
      if (at == std::string::npos) {
        failures.push_back("rank " + std::to_string(r) + " did not name rank " + std::to_string(kDdpOomRank));
        continue;
      }
      const size_t eol = o.find('\n', at);
      msg << "\n  trainbench: " << o.substr(at, eol == std::string::npos ? eol : eol - at);
    }
    if (l.res.seconds > ctx.timeout_s + 15)
      failures.push_back("the ranks took " + fixed(l.res.seconds, 1) + " s to end (timeout " + fixed(ctx.timeout_s, 0) +
                         " s + 15)");
    if (!fault.oom) failures.push_back("rank 1's result is not an OOM");
    else if (fault.tag.empty() || fault.op.empty()) failures.push_back("the OOM names no tag or op: " + fault.error);
    if (fault.snapshot_path.empty() || !fs::exists(fault.snapshot_path))
      failures.push_back("rank 1 wrote no memory snapshot at the OOM");
    else msg << "\n  memory snapshot of rank " << kDdpOomRank << ": " << fault.snapshot_path;
    rec.message = msg.str();
    if (!failures.empty()) rec.message += "\n" + all;
  });
}

}  // namespace

std::vector<std::string> oom_fault_signatures(const std::string& name, const ScenarioContext& ctx, int seeds) {
  const Scenario* sc = harness::find_scenario(name);
  TB_CHECK(sc != nullptr, "oom scenario", "unknown scenario ", name);
  TB_CHECK(name != "oom/ddp_one_rank", "oom scenario", name, " ends its OOM rank: run it once per seed");
  const std::string mode = name == "oom/leak" ? "leak" : name == "oom/fragmentation" ? "fragmentation" : "capacity";
  const Launched l = launch(*sc, ctx, sub_dir(ctx, "repeat"), 1, {{"mode", mode}, {"repeat_seeds", seeds}}, 300);
  TB_CHECK(l.res.ok() && l.results[0], "oom scenario", name, ": the rank failed: ", l.res.diagnosis(20));
  std::vector<std::string> out;
  for (const json& j : l.results[0]->at("faults")) out.push_back(signature(RunResult::from_json(j)));
  return out;
}

std::string signature(const oom::RunResult& r) {
  if (!r.oom) return "no OOM";
  return where(r);
}

void register_oom_scenarios() {
  const auto add = [](std::string name, std::string what, std::string expected,
                      std::function<Record(const ScenarioContext&)> run,
                      std::function<int(const ScenarioContext&)> rank_main, bool quick = false) {
    Scenario s;
    s.quick = quick;
    s.name = std::move(name);
    s.description = std::move(what);
    s.expected = std::move(expected);
    s.run = std::move(run);
    s.rank_main = std::move(rank_main);
    harness::register_scenario(std::move(s));
  };
  for (const Capacity& c : capacity_scenarios())
    add(
        c.name, c.what,
        "out of memory at step 0 " + c.phase + " (tag " + c.tag +
            ", the op named); at least one remedy (micro-batches, activation checkpointing, bf16 autocast, FSDP) fits",
        [c](const ScenarioContext& ctx) { return capacity_run(c, ctx); },
        [c](const ScenarioContext& ctx) { return capacity_rank(c, ctx); });
  add("oom/fragmentation",
      "a GPT whose sequence length grows every step (32 to 128) with the cache release off, under a cap of 125% of "
      "its peak",
      "out of memory with live bytes + the request under the cap and more bytes cached but free than the request, "
      "none in a block of its size class (the OOM's snapshot); letting the allocator release its cache fits",
      frag_run, frag_rank, /*quick=*/true);
  add("oom/leak", "every step's logits appended to a list (a GPT under a cap with room for 4.5 steps of them)",
      "out of memory after the bytes held grew by the logits' size every step; the per-step snapshots name the "
      "head's op as the site that grew",
      leak_run, leak_rank, /*quick=*/true);
  add("oom/ddp_one_rank", "2 DDP ranks, a memory cap on rank 1 only (60% of its uncapped peak)",
      "rank 1 reports its OOM (step, phase, tag, op) and exits; rank 0's watchdog names rank 1; every rank ends, no "
      "orphans",
      ddp_run, ddp_rank);
}

}  // namespace tb::suites
