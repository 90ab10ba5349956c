// Distributed suites: launch per world size, run cases in the ranks, merge the ranks' records.
#include "harness/distributed.h"

#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "engine/core/env.h"
#include "engine/dist/placement.h"
#include "engine/dist/process_group.h"
#include "harness/launcher.h"
#include "harness/registry_detail.h"

namespace tb::harness {

namespace fs = std::filesystem;

std::string rank_case_name(const std::string& name, int world) {
  const std::string w = "w" + std::to_string(world);
  // Already named by world ("all_reduce/float32/8/w2/engine", "equivalence/mlp/w2")?
  const std::regex has_w("(^|/)" + w + "(/|$)");
  return std::regex_search(name, has_w) ? name : name + "/" + w;
}

// Note [A core of its own] (engine/dist/placement.cpp): when a world's ranks all run on this
// machine and fit its cores, each gets cores of its own. The lists go into this process's
// environment (or it is cleared), which mpirun forwards (TRAINBENCH_*) and the PyTorch peers
// inherit. Namespace hosts of the hosts fixture are this machine (TRAINBENCH_HOSTS_SHARE_CORES);
// a real hostfile's hosts and Slurm's nodes place ranks themselves. Returns the lists, or "".
std::string place_ranks(int world, int rank_threads, bool on_this_machine) {
  std::string lists;
  if (on_this_machine && core::env_choice("TRAINBENCH_BIND", "auto", {"auto", "none"}) == "auto")
    lists = dist::format_rank_cpus(dist::plan_rank_cpus(world, rank_threads, dist::cores_of_this_process()));
  if (lists.empty()) ::unsetenv("TRAINBENCH_RANK_CPUS");
  else ::setenv("TRAINBENCH_RANK_CPUS", lists.c_str(), 1);
  return lists;
}

std::vector<TestCase> rank_cases(const Suite& s, int world, bool benches, const std::string& filter) {
  const auto& make = benches ? s.rank_benches : s.rank_tests;
  std::vector<TestCase> out;
  if (!make) return out;
  const std::regex re = detail::compile_filter(filter);
  for (TestCase& t : make(world)) {
    t.name = rank_case_name(t.name, world);
    if (std::regex_search(t.name, re)) out.push_back(std::move(t));
  }
  return out;
}

std::size_t count_rank_cases(const Suite& s, const DistRunOptions& o) {
  std::size_t n = 0;
  for (int w : s.world_sizes) {
    if (o.tests) n += rank_cases(s, w, false, o.filter).size();
    if (o.benches) n += rank_cases(s, w, true, o.filter).size() * std::size_t(s.peer ? std::max(1, s.bench_rounds) : 1);
  }
  return n;
}

namespace {

fs::path records_file(const fs::path& dir, int rank) {
  return dir / ("records.rank" + std::to_string(rank) + ".jsonl");
}

// Each rank's finished records by case name. A line cut short by a kill is ignored.
std::map<std::string, Record> read_rank_records(const fs::path& dir, int rank) {
  std::map<std::string, Record> out;
  std::ifstream in(records_file(dir, rank));
  for (std::string line; std::getline(in, line);) {
    try {
      Record r = record_from_json(nlohmann::json::parse(line));
      out[r.case_name] = std::move(r);
    } catch (const std::exception&) {
    }
  }
  return out;
}

// One record from every rank's record of one case: rank 0's metrics (ranks agree on collective
// results; each case checks its own rank), the worst status, the other ranks' complaints.
Record merge(const std::vector<Record>& per_rank) {
  Record out = per_rank.front();
  std::string extra;
  for (std::size_t r = 1; r < per_rank.size(); ++r) {
    const Record& x = per_rank[r];
    out.status = std::max(out.status, x.status);
    if (x.status != Status::Pass && x.status != Status::Skip)
      extra += "\nrank " + std::to_string(r) + " " + std::string(to_string(x.status)) + ": " + x.message;
    out.duration_s = std::max(out.duration_s, x.duration_s);
  }
  if (!extra.empty()) out.message = (out.message.empty() ? "" : "rank 0: " + out.message) + extra;
  out.rank = 0;
  out.metrics["world"] = int(per_rank.size());
  return out;
}

std::vector<Record> run_world(const Suite& s, int world, bool benches, const DistRunOptions& o, Progress* progress) {
  const std::vector<TestCase> cases = rank_cases(s, world, benches, o.filter);
  if (cases.empty()) return {};
  static int launch_counter = 0;
  const fs::path dir = o.work_dir / (s.name + "-" + (benches ? "bench" : "test") + "-w" + std::to_string(world) + "-" +
                                     std::to_string(getpid()) + "-" + std::to_string(++launch_counter));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int rank_threads = std::max(1, o.threads / world);

  LaunchSpec spec;
  spec.ranks = world;
  spec.run_dir = dir;
  spec.timeout = o.launch_timeout;
  spec.hostfile = o.hostfile;
  spec.env = o.env;
  spec.argv = {self_exe(),  "rank",
               "--suite",   s.name,
               "--world",   std::to_string(world),
               "--threads", std::to_string(rank_threads),
               "--out",     dir.string()};
  if (!o.filter.empty()) spec.argv.insert(spec.argv.end(), {"--filter", o.filter});
  if (benches) spec.argv.push_back("--benches");
  std::size_t start = 0, total = 0;
  if (progress) {
    start = progress->done();
    total = progress->total();
    spec.argv.insert(spec.argv.end(),
                     {"--progress-start", std::to_string(start), "--progress-total", std::to_string(total)});
  }
  spec.env["TRAINBENCH_RANK_THREADS"] = std::to_string(rank_threads);
  {
    const auto shared = o.env.find("TRAINBENCH_HOSTS_SHARE_CORES");
    const bool namespace_hosts = (shared != o.env.end() &&
                                  core::parse_bool("TRAINBENCH_HOSTS_SHARE_CORES", shared->second)) ||
                                 core::env_bool("TRAINBENCH_HOSTS_SHARE_CORES", false);
    const std::string lists = place_ranks(world, rank_threads,
                                          launcher_of(spec) == "mpirun" && (spec.hostfile.empty() || namespace_hosts));
    // The run header says where each world's ranks ran ("0;1": rank 0 on CPU 0, rank 1 on CPU 1).
    static nlohmann::json placed = nlohmann::json::object();
    placed["w" + std::to_string(world)] = lists.empty() ? "unbound" : lists;
    add_run_info("rank_cpus", placed);
  }
  // A hang is diagnosed by the ranks' watchdogs well before the launch timeout ends it.
  if (!core::env_string("TRAINBENCH_DIST_TIMEOUT")) spec.env["TRAINBENCH_DIST_TIMEOUT"] = "300";  // empty: unset
  spec.echo = progress ? &std::cerr : nullptr;
  spec.echo_rank0_plain = true;
  {
    // The run header says how ranks were started (mpirun's flags shape the figures).
    std::vector<std::string> cmd = launch_command(spec);
    cmd.resize(cmd.size() - spec.argv.size());
    cmd[2] = "<world>";  // "mpirun -n <world> ...": one header for every world size
    std::string line;
    for (const std::string& a : cmd) line += (line.empty() ? "" : " ") + a;
    add_run_info("rank_launcher", line + " <trainbench rank ...>");
  }
  const LaunchResult res = launch(spec);

  std::vector<std::map<std::string, Record>> got;
  for (int r = 0; r < world; ++r) got.push_back(read_rank_records(dir, r));
  std::vector<Record> out;
  bool diagnosed = false;
  for (const TestCase& c : cases) {
    std::vector<Record> per_rank;
    std::vector<int> missing;
    for (int r = 0; r < world; ++r) {
      auto it = got[std::size_t(r)].find(c.name);
      if (it == got[std::size_t(r)].end()) missing.push_back(r);
      else per_rank.push_back(it->second);
    }
    Record rec;
    if (missing.empty()) {
      rec = merge(per_rank);
    } else {
      rec.suite = s.name;
      rec.case_name = c.name;
      rec.kind = benches ? "benchmark" : "correctness";
      rec.status = Status::Error;
      std::string ranks;
      for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      if (!diagnosed) {
        rec.message = "rank(s) " + ranks + " did not finish this case: " + res.diagnosis() +
                      "\n  rank logs and watchdog dumps: " + dir.string();
        diagnosed = true;
      } else {
        rec.message = "not run: the world of " + std::to_string(world) + " ranks ended earlier";
      }
      rec.metrics["world"] = world;
    }
    out.push_back(std::move(rec));
  }
  if (!res.ok() && !diagnosed) {
    // Every case finished, yet the job failed (a crash at exit, a finalize that hung).
    Record rec;
    rec.suite = s.name;
    rec.case_name = "(launch)/w" + std::to_string(world);
    rec.status = Status::Error;
    rec.message = res.diagnosis() + "\n  rank logs: " + dir.string();
    out.push_back(std::move(rec));
  }
  // Rank 0 printed the progress lines of the finished cases; account for them here.
  if (progress) progress->advance(cases.size());
  return out;
}

std::vector<Record> run_peer(const Suite& s, int w, const DistRunOptions& o, Progress* progress) {
  setenv("TRAINBENCH_RANK_THREADS", std::to_string(std::max(1, o.threads / w)).c_str(), 1);
  place_ranks(w, std::max(1, o.threads / w), true);  // the peers run here, whatever the ranks did
  std::vector<Record> out;
  const std::regex re = detail::compile_filter(o.filter);
  try {
    out = s.peer(w, [&re](const std::string& name) { return std::regex_search(name, re); });
    for (Record& r : out) {
      if (r.suite.empty()) r.suite = s.name;
      if (progress) std::cerr << s.name << ' ' << r.case_name << " ... " << r.status << '\n';
    }
  } catch (const std::exception& e) {
    Record r;
    r.suite = s.name;
    r.case_name = "(peer)/w" + std::to_string(w);
    r.kind = "benchmark";
    r.status = Status::Error;
    r.message = e.what();
    out = {std::move(r)};
  }
  return out;
}

}  // namespace

// Note [Benchmark rounds]
// A peer (PyTorch on Gloo) runs as its own job after the ranks, tens of seconds later; on a
// shared machine the load can change in between, and one such pair of runs gave ratios 1.64x to
// 1.99x for the same build. With Suite::bench_rounds = R the pair runs R times, alternating its
// order (ranks, peer, peer, ranks, ...), and each case keeps the mean of its numeric metrics over
// the rounds that passed (status and message come from the worst round, string metrics from the
// first), with `rounds` = the rounds averaged, and its series of repetition times (`*_time_s`) holds every
// passing round's. Ratios of those means compare both sides over the same span.
std::vector<Record> average_rounds(const std::vector<std::vector<Record>>& rounds) {
  std::vector<Record> out;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::map<std::string, std::pair<double, int>>> sums;
  for (const std::vector<Record>& round : rounds)
    for (const Record& r : round) {
      auto [it, fresh] = index.emplace(r.case_name, out.size());
      if (fresh) out.push_back(r);
      Record& acc = out[it->second];
      if (!fresh && r.status > acc.status) {
        acc.status = r.status;
        acc.message = r.message;
      }
      if (r.status != Status::Pass) continue;
      if (!fresh)  // every passing round's repetition times, for `trainbench compare`
        for (const auto& [k, v] : r.series.items())
          if (k.size() > 7 && k.compare(k.size() - 7, 7, "_time_s") == 0 && v.is_array())
            for (const auto& x : v) acc.series[k].push_back(x);
      for (const auto& [k, v] : r.metrics.items())
        if (v.is_number()) {
          auto& [sum, n] = sums[r.case_name][k];
          sum += v.get<double>();
          ++n;
        }
    }
  for (Record& r : out) {
    int rounds_used = 0;
    for (const auto& [k, sn] : sums[r.case_name]) {
      r.metrics[k] = sn.first / sn.second;
      rounds_used = std::max(rounds_used, sn.second);
    }
    if (rounds.size() > 1) r.metrics["rounds"] = rounds_used;
  }
  return out;
}

std::vector<Record> run_distributed(const Suite& s, const DistRunOptions& o, Progress* progress) {
  std::vector<Record> out;
  auto append = [&out](std::vector<Record> recs) {
    out.insert(out.end(), std::make_move_iterator(recs.begin()), std::make_move_iterator(recs.end()));
  };
  for (int w : s.world_sizes) {
    if (o.tests) append(run_world(s, w, false, o, progress));
    if (!o.benches) continue;
    if (!s.peer) {
      append(run_world(s, w, true, o, progress));
      continue;
    }
    const int rounds = std::max(1, s.bench_rounds);
    std::vector<std::vector<Record>> ranks, peers;
    for (int r = 0; r < rounds; ++r) {  // Note [Benchmark rounds]: ranks, peer, peer, ranks, ...
      if (r % 2 == 0) {
        ranks.push_back(run_world(s, w, true, o, progress));
        peers.push_back(run_peer(s, w, o, progress));
      } else {
        peers.push_back(run_peer(s, w, o, progress));
        ranks.push_back(run_world(s, w, true, o, progress));
      }
    }
    append(rounds == 1 ? std::move(ranks.front()) : average_rounds(ranks));
    append(rounds == 1 ? std::move(peers.front()) : average_rounds(peers));
  }
  return out;
}

int rank_main(const RankOptions& o) {
  // Die with the launcher: a rank orphaned by a killed mpirun must not linger.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const dist::WorldInfo w = dist::world_from_env();
  {
    std::ofstream pid(o.out_dir / ("rank" + std::to_string(w.rank) + ".pid"));
    pid << getpid() << '\n';
  }
  if (w.size != o.world) {
    std::cerr << "trainbench rank: launched as world size " << w.size << " (" << w.source << ") but asked for "
              << o.world << '\n';
    return 2;
  }
  const Suite* suite = nullptr;
  for (const Suite& s : suites())
    if (s.name == o.suite) suite = &s;
  if (!suite) {
    std::cerr << "trainbench rank: unknown suite " << o.suite << '\n';
    return 2;
  }
  try {
    dist::pin_rank_from_env(w.rank, w.size);  // Note [A core of its own]
  } catch (const std::exception& e) {
    std::cerr << "trainbench rank: " << e.what() << '\n';
    return 2;
  }
  apply_threads(o.threads);
  const std::vector<TestCase> cases = rank_cases(*suite, o.world, o.benches, o.filter);
  Progress progress(w.rank == 0 ? &std::cerr : nullptr, o.progress_total ? o.progress_total : cases.size(),
                    o.progress_start);
  std::ofstream out(records_file(o.out_dir, w.rank), std::ios::app);
  for (const TestCase& c : cases) {
    std::vector<Record> recs = run_tests({PlannedTest{suite->name, c}}, &progress);
    Record& r = recs.front();
    r.rank = w.rank;
    r.case_name = c.name;  // with the world size (a case's own record may use its bare name)
    if (o.benches && r.kind == "correctness") r.kind = "benchmark";
    out << record_to_json(r).dump() << '\n' << std::flush;  // one line per case survives a kill
  }
  return 0;
}

}  // namespace tb::harness
