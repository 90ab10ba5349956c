// Note [Hang scenarios]
// Each hang scenario launches 2 or 3 ranks of this executable (`trainbench scenario-rank`) that
// train for a few numbered steps (step i issues collective #i, an all_reduce of 1024 float32)
// and inject one fault at a step, rank and delay drawn from the seed (fault_plan). The ranks
// leave in the run dir: rank<R>.pid, fault_rank<R>.txt (realtime ns of the fault), error_rank<R>.txt
// (realtime ns and the exception a rank raised: long lines are kept out of mpirun's tagged
// output, which can cut them), diagnosed_rank<R>.txt (realtime ns of a diagnosis that is not an
// error, e.g. a straggler report) and peak_rank<R>.txt; the watchdog adds flight_recorder_rank<R>.json.
// The parent merges the dumps (dist::analyze_dumps, as `trainbench analyze` does) and the
// scenario's check decides whether the expected diagnosis came out. time_to_diagnosis_s runs from
// the fault to the first diagnosis written (an error, a diagnosed stamp or a dump); the outer timeout is the
// collective timeout + 15 s, and reaching it fails the scenario (outer_kill).
#include "suites/scenarios/hang_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/dist/call_site.h"
#include "engine/dist/watchdog.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"

namespace tb::suites::hang {

namespace fs = std::filesystem;

namespace {

double realtime_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

fs::path rank_file(const fs::path& dir, const std::string& stem, int rank, const std::string& ext = ".txt") {
  return dir / (stem + "_rank" + std::to_string(rank) + ext);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "<realtime seconds> <text>" files: the time, and the text after it.
std::optional<double> stamped_time(const fs::path& p, std::string* text = nullptr) {
  std::ifstream in(p);
  double t = 0;
  if (!(in >> t)) return std::nullopt;
  if (text) {
    in.get();
    std::stringstream ss;
    ss << in.rdbuf();
    *text = ss.str();
    while (!text->empty() && text->back() == '\n') text->pop_back();
  }
  return t;
}

double file_mtime(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return double(st.st_mtim.tv_sec) + double(st.st_mtim.tv_nsec) * 1e-9;
}

void write_stamped(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out.precision(17);
  out << realtime_now() << ' ' << text << '\n';
}

}  // namespace

FaultPlan fault_plan(int seed, int world) {
  std::mt19937 rng(uint32_t(seed) * 2654435761u + 0x5eedu);
  FaultPlan p;
  p.step = 2 + int(rng() % 5);                                      // collective #2..#6: the group has run
  p.victim = world > 1 ? 1 + int(rng() % uint32_t(world - 1)) : 0;  // never rank 0: it reports
  p.delay_ms = int(rng() % 200);
  p.steps = p.step + 2;
  return p;
}

Rank::Rank(const harness::ScenarioContext& c, int w) : ctx(c), plan(fault_plan(c.seed, w)), world(w) {
  const dist::WorldInfo info = dist::world_from_env();
  rank = info.rank;
  TB_CHECK(info.size == w, "scenario",
           "launched with " + std::to_string(info.size) + " ranks, wants " + std::to_string(w));
  std::ofstream(rank_file(ctx.run_dir, "pid", rank)) << ::getpid() << '\n';
}

void Rank::join() {
  pg = dist::new_group(ctx.backend);
  write_peak();
}

void Rank::step() {
  Tensor g = full({1024}, double(rank + 1));
  {
    dist::CallSite site("train/grad sync");
    pg->all_reduce(g)->wait();
  }
  const float want = float(world * (world + 1) / 2);
  TB_CHECK(g.data_ptr<float>()[0] == want, "scenario", "all_reduce gave " + std::to_string(g.data_ptr<float>()[0]));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the step's compute
  write_peak();
}

void Rank::fault(const std::string& what) {
  std::this_thread::sleep_for(std::chrono::milliseconds(plan.delay_ms));
  write_stamped(rank_file(ctx.run_dir, "fault", rank), what);
  std::fprintf(stderr, "scenario: rank %d: fault at step %d: %s\n", rank, plan.step, what.c_str());
  std::fflush(stderr);
}

void Rank::diagnosed(const std::string& what) const { write_stamped(rank_file(ctx.run_dir, "diagnosed", rank), what); }

void Rank::write_peak() const {
  std::ofstream(rank_file(ctx.run_dir, "peak", rank)) << memory::cpu_allocator().stats().peak_allocated_bytes << '\n';
}

int rank_main(const harness::ScenarioContext& ctx, int world, const std::function<void(Rank&)>& body) {
  // The rank number for the error file before anything can throw.
  int r = 0;
  try {
    r = dist::world_from_env().rank;
    Rank rank(ctx, world);
    body(rank);
    rank.write_peak();
    std::fprintf(stderr, "scenario: rank %d: finished\n", rank.rank);
    return 0;
  } catch (const std::exception& e) {
    write_stamped(rank_file(ctx.run_dir, "error", r), e.what());
    std::fprintf(stderr, "scenario: rank %d: error: %s\n", r, e.what());
    std::fflush(stderr);
    return 4;
  }
}

const dist::Finding* Outcome::finding(dist::FindingKind kind, int rank, uint64_t seq) const {
  if (!dumps) return nullptr;
  for (const dist::Finding& f : dumps->findings)
    if (f.kind == kind && f.collective_seq == seq && std::find(f.ranks.begin(), f.ranks.end(), rank) != f.ranks.end())
      return &f;
  return nullptr;
}

std::string Outcome::clean_finish() const {
  if (launch.exit_code != 0) return "the job exited " + std::to_string(launch.exit_code);
  for (int r = 0; r < world; ++r)
    if (!errors[std::size_t(r)].empty()) return "rank " + std::to_string(r) + " raised: " + errors[std::size_t(r)];
  return {};
}

std::string Outcome::all(std::size_t lines) const {
  std::string s = launch.diagnosis(lines);
  for (int r = 0; r < world; ++r)
    if (!errors[std::size_t(r)].empty()) s += "\nrank " + std::to_string(r) + " raised: " + errors[std::size_t(r)];
  if (dumps) s += "\ndumps: " + dist::diagnosis_text(*dumps);
  if (!dump_error.empty()) s += "\ndumps: " + dump_error;
  return s;
}

void register_hang(HangScenario s) {
  auto shared = std::make_shared<HangScenario>(std::move(s));
  harness::Scenario sc;
  sc.name = "hang/" + shared->name;
  sc.description = shared->description;
  sc.expected = shared->expected;
  sc.quick = shared->quick;
  const std::string full_name = sc.name;
  sc.rank_main = [shared](const harness::ScenarioContext& ctx) { return rank_main(ctx, shared->world, shared->body); };
  sc.run = [shared, full_name](const harness::ScenarioContext& ctx) {
    harness::Record rec;
    rec.suite = "scenarios";
    rec.kind = "scenario";
    rec.case_name = full_name + "/" + ctx.backend + "/seed" + std::to_string(ctx.seed);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const harness::Scenario* me = harness::find_scenario(full_name);
      TB_CHECK(me != nullptr, "scenario", full_name + " is not registered");
      Outcome o;
      o.world = shared->world;
      o.plan = fault_plan(ctx.seed, shared->world);
      o.timeout_s = ctx.timeout_s;
      o.backend = ctx.backend;
      fs::remove_all(ctx.run_dir);
      const auto outer = std::chrono::seconds(long(ctx.timeout_s + 15.5));
      o.launch = harness::launch_scenario_ranks(*me, ctx, shared->world, shared->env, outer);
      const double launch_end = realtime_now();  // the outer timeout's stacks are read just before
      const auto& kill_ok = shared->outer_kill_expected;
      const bool outer_kill_ok = std::find(kill_ok.begin(), kill_ok.end(), ctx.backend) != kill_ok.end();
      // What the ranks left.
      std::optional<double> fault_at, diagnosed_at;
      const auto earliest = [](std::optional<double>& acc, double t) {
        if (t > 0 && (!acc || t < *acc)) acc = t;
      };
      int ended = 0, started = 0;
      for (int r = 0; r < o.world; ++r) {
        std::string err;
        if (auto t = stamped_time(rank_file(ctx.run_dir, "error", r), &err)) earliest(diagnosed_at, *t);
        if (auto t = stamped_time(rank_file(ctx.run_dir, "diagnosed", r))) earliest(diagnosed_at, *t);
        o.errors.push_back(err);
        if (auto t = stamped_time(rank_file(ctx.run_dir, "fault", r))) earliest(fault_at, *t);
        const fs::path dump = rank_file(ctx.run_dir, "flight_recorder", r, ".json");
        if (fs::exists(dump)) earliest(diagnosed_at, file_mtime(dump));
        const std::string& out = o.launch.rank_output.size() > std::size_t(r) ? o.launch.rank_output[std::size_t(r)]
                                                                              : std::string();
        const auto w = out.find("watchdog: ");
        o.watchdog_lines.push_back(w == std::string::npos ? "" : out.substr(w, out.find('\n', w) - w));
        // A watchdog that ends its rank before any group exists (MPI_Init's, Note [MPI rendezvous])
        // leaves no dump and no stamp: its line is the rank's last, so the rank's log was last
        // written when it arrived.
        if (w != std::string::npos && fs::exists(ctx.run_dir / ("rank" + std::to_string(r) + ".log")))
          earliest(diagnosed_at, file_mtime(ctx.run_dir / ("rank" + std::to_string(r) + ".log")));
        long pid = 0;
        std::ifstream(rank_file(ctx.run_dir, "pid", r)) >> pid;
        if (pid > 0) {
          ++started;
          // A rank the launcher killed last may take a moment to go (the signal, the reaping).
          for (int i = 0; i < 30 && dist::process_alive(pid); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          ended += !dist::process_alive(pid);
        }
        const std::string peak = read_text(rank_file(ctx.run_dir, "peak", r));
        if (!peak.empty()) rec.metrics["peak_bytes_rank" + std::to_string(r)] = std::stod(peak);
      }
      if (o.launch.timed_out && outer_kill_ok) earliest(diagnosed_at, launch_end);
      try {
        o.dumps = dist::analyze_dumps(dist::read_dump_dir(ctx.run_dir.string()));
      } catch (const std::exception& e) {
        o.dump_error = e.what();
      }
      rec.metrics["ranks_started"] = started;
      rec.metrics["ranks_ended"] = ended;
      rec.metrics["orphans"] = o.launch.orphans;  // the launcher killed them; they fail the run
      rec.metrics["outer_kill"] = o.launch.timed_out ? 1 : 0;
      rec.metrics["launch_s"] = o.launch.seconds;
      rec.metrics["timeout_s"] = ctx.timeout_s;
      rec.metrics["fault_step"] = o.plan.step;
      rec.metrics["fault_rank"] = o.plan.victim;
      if (fault_at && diagnosed_at) rec.metrics["time_to_diagnosis_s"] = std::max(0.0, *diagnosed_at - *fault_at);
      std::string diagnosis;
      std::string problem = shared->check(o, diagnosis);
      if (problem.empty() && o.launch.timed_out && !outer_kill_ok)
        problem = "the ranks ran into the outer timeout (" + std::to_string(outer.count()) + " s)";
      if (problem.empty() && o.launch.orphans > 0)
        problem = std::to_string(o.launch.orphans) + " process(es) of the run outlived the launch";
      if (problem.empty() && ended != started) problem = "a rank was still running after the launch";
      if (problem.empty() && !shared->remedy && !rec.metrics.contains("time_to_diagnosis_s"))
        problem = "no fault moment or no diagnosis was recorded (time_to_diagnosis_s unknown)";
      if (problem.empty()) {
        rec.status = harness::Status::Pass;
        rec.message = diagnosis;
      } else {
        rec.status = harness::Status::Fail;
        rec.message = problem + "\n" + o.all();
      }
      if (ctx.echo) *ctx.echo << "  diagnosis: " << (problem.empty() ? diagnosis : problem) << '\n';
    } catch (const std::exception& e) {
      rec.status = harness::Status::Error;
      rec.message = e.what();
    }
    rec.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rec;
  };
  harness::register_scenario(std::move(sc));
}

Check mismatch_check(const std::string& majority, const std::string& odd) {
  return [majority, odd](const Outcome& o, std::string& diagnosis) -> std::string {
    const std::string head = "collective #" + std::to_string(o.plan.step) + " differs between ranks: ";
    int said = 0;
    for (int r = 0; r < o.world; ++r) {
      const std::string& e = o.errors[std::size_t(r)];
      if (e.empty()) continue;
      const auto at = e.find(head);
      if (at == std::string::npos || e.find(majority) == std::string::npos || e.find(odd) == std::string::npos)
        return "rank " + std::to_string(r) + " raised\n  " + e + "\nexpected '" + head + "' naming '" + majority +
               "' and '" + odd + "'";
      if (!said) diagnosis = e.substr(at);
      ++said;
    }
    if (said == 0) return "no rank raised the mismatch at #" + std::to_string(o.plan.step);
    return {};
  };
}

}  // namespace tb::suites::hang
