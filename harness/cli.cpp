// `trainbench` subcommands: list, test, bench, report, all, launch, estimate, analyze, compare, profile, project,
// scenario, checkpoint, hosts
// (and the hidden `rank` and `scenario-rank`).
// Output contract: progress lines on stderr, a final `N passed, N failed, N skipped` line and the paths written on stdout.
#include <CLI/CLI.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness/checkpoint_cmd.h"
#include "harness/cli.h"
#include "harness/cli_checks.h"
#include "harness/analyze_cmd.h"
#include "harness/compare_cmd.h"
#include "harness/project_cmd.h"
#include "harness/distributed.h"
#include "harness/estimate_cmd.h"
#include "harness/hosts_cmd.h"
#include "harness/profile_cmd.h"
#include "harness/launcher.h"
#include "harness/output_file.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "harness/scenario_cmd.h"

#ifndef TB_VERSION
#define TB_VERSION "unknown"
#endif

namespace tb::harness {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::vector<std::string> suites;
  std::string filter;
  std::string json;
  int threads = 0;
  int repetitions = 5;
  double min_time = 0.1;
  bool no_report = false;
  std::string report_out;
  std::vector<std::string> inputs;  // report
  bool allow_empty = false;         // test / bench / all: a selection without cases is not an error
  double peak_gflops = 0, peak_gbps = 0;
  double launch_timeout = 1800;      // distributed suites: seconds per world size
  std::string hostfile;              // distributed suites / launch: mpirun's hostfile
  std::string launcher;              // distributed suites / launch: mpirun or srun (TRAINBENCH_LAUNCHER)
  int nodes = 0;                     // distributed suites / launch under srun: -N (TRAINBENCH_LAUNCH_NODES)
  RankOptions rank;                  // the hidden `rank` subcommand
  int ranks = 2;                     // launch
  bool dry_run = false;              // launch
  std::vector<std::string> program;  // launch
};

void add_selection(CLI::App* sub, Options& o) {
  sub->add_option("--suite", o.suites, "Suite to run (repeatable); default: the default suites")->type_name("NAME");
  sub->add_option("--filter", o.filter, "Regex searched in case names (ECMAScript)")->type_name("REGEX");
}

// How ranks start: mpirun, or Slurm's srun (harness/launcher.h, Note [Ranks under srun]). Applied
// as TRAINBENCH_LAUNCHER / TRAINBENCH_LAUNCH_NODES, so every launch of the run (suites, scenarios)
// uses it.
void add_launcher_options(CLI::App* sub, Options& o) {
  sub->add_option("--launcher", o.launcher,
                  "How ranks start: mpirun, or srun (a step in the Slurm cluster srun reaches); default "
                  "$TRAINBENCH_LAUNCHER, else mpirun")
      ->check(CLI::IsMember({"mpirun", "srun"}))
      ->type_name("NAME");
  sub->add_option("--nodes", o.nodes, "With --launcher srun: spread the ranks over N nodes (srun -N N)")
      ->check(between(1, 4096, "nodes", true))
      ->type_name("N");
}

void add_run_options(CLI::App* sub, Options& o, const std::string& name) {
  add_selection(sub, o);
  sub->add_option("--json", o.json, "Result file; default: results/" + name + "-<timestamp>.json")->type_name("PATH");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  sub->add_option("--threads", o.threads,
                  "Threads for the engine and LibTorch; default: all cores (" + std::to_string(cores) + ")")
      ->check(between(1, 4096, "threads", true))
      ->type_name("N");
  sub->add_option("--launch-timeout", o.launch_timeout,
                  "Distributed suites: seconds one world size may run before its ranks are killed")
      ->capture_default_str()
      ->check(between(1, 86400, "seconds"))
      ->type_name("S");
  sub->add_option("--hostfile", o.hostfile,
                  "Distributed suites: mpirun hostfile to spread ranks over hosts (default: this host)")
      ->check(hostfile_check())
      ->type_name("PATH");
  add_launcher_options(sub, o);
  sub->add_flag("--allow-empty", o.allow_empty,
                "Succeed when --suite/--filter select no case (default: an error, so a typo cannot pass)");
}

void add_bench_options(CLI::App* sub, Options& o) {
  sub->add_option("--repetitions", o.repetitions, "Timed repetitions per side")
      ->type_name("N")
      ->capture_default_str()
      ->check(between(1, 1000, "repetitions", true));
  sub->add_option("--min-time", o.min_time, "Minimum seconds per repetition")
      ->capture_default_str()
      ->check(between(0.001, 3600, "seconds"))
      ->type_name("S");
}

void add_peak_options(CLI::App* sub, Options& o) {
  sub->add_option("--peak-gflops", o.peak_gflops,
                  "Machine peak GFLOP/s drawn on the throughput plot (report default: 234, or 175 for AVX2 results)")
      ->type_name("X")
      ->check(between(0.001, 1e9, "GFLOP/s"));
  sub->add_option("--peak-gbps", o.peak_gbps, "Machine memory bandwidth GB/s drawn on the plot (report default: 50)")
      ->type_name("X")
      ->check(between(0.001, 1e9, "GB/s"));
}

std::string join_argv(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

fs::path default_json(const std::string& sub) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream os;
  os << "results/" << sub << '-' << std::put_time(&tm, "%Y%m%d-%H%M%S") << ".json";
  return os.str();
}

Selection selection(const Options& o) { return Selection{o.suites, o.filter, false}; }

// Without --suite: one line per suite (its kind and case counts); with --suite: those suites'
// cases. --filter narrows both.
int cmd_list(const Options& o) {
  Selection sel = selection(o);
  sel.include_non_default = true;  // list shows everything there is
  const std::vector<const Suite*> chosen = select_suites(sel);
  if (chosen.empty()) {
    std::cout << "no suites registered\n";
    return 0;
  }
  struct Listed {
    const Suite* suite;
    std::vector<std::string> tests, benches;
  };
  std::vector<Listed> listed;
  std::size_t total = 0, name_width = 5;
  for (const Suite* s : chosen) {
    // Collected per suite so the listing keeps registration order within each suite.
    Listed l{s, {}, {}};
    Selection one{{s->name}, o.filter, true};
    for (const auto& t : collect_tests(one)) l.tests.push_back(t.test.name);
    for (const auto& b : collect_benches(one)) l.benches.push_back(b.bench.name);
    for (const auto& t : collect_timed(one)) l.benches.push_back(t.test.name);
    // A distributed suite's rank cases, per world size (they run inside launched ranks).
    for (int w : s->world_sizes) {
      for (const TestCase& t : rank_cases(*s, w, false, o.filter)) l.tests.push_back(t.name);
      for (const TestCase& t : rank_cases(*s, w, true, o.filter)) l.benches.push_back(t.name);
    }
    total += l.tests.size() + l.benches.size();
    name_width = std::max(name_width, s->name.size());
    listed.push_back(std::move(l));
  }

  if (o.suites.empty()) {
    auto kind = [](const Suite& s) {
      if (s.world_sizes.empty()) return std::string("in-process");
      std::string k = "ranks";
      for (int w : s.world_sizes) k += " " + std::to_string(w);
      return k;
    };
    std::size_t kind_width = 10;
    for (const Listed& l : listed) kind_width = std::max(kind_width, kind(*l.suite).size());
    std::cout << std::left << std::setw(int(name_width)) << "suite"
              << "  " << std::setw(int(kind_width)) << "kind" << std::right << std::setw(8) << "tests" << std::setw(12)
              << "benchmarks"
              << "  default  description\n";
    for (const Listed& l : listed)
      std::cout << std::left << std::setw(int(name_width)) << l.suite->name << "  " << std::setw(int(kind_width))
                << kind(*l.suite) << std::right << std::setw(8) << l.tests.size() << std::setw(12) << l.benches.size()
                << "  " << (l.suite->run_by_default ? "yes      " : "no       ") << l.suite->description << '\n';
    std::cerr << total << " cases" << (o.filter.empty() ? "" : " matching --filter '" + o.filter + "'") << " in "
              << listed.size() << " suites; `trainbench list --suite NAME` lists a suite's cases\n";
    return 0;
  }

  for (const Listed& l : listed) {
    const Suite* s = l.suite;
    std::cout << s->name;
    if (!s->description.empty()) std::cout << " - " << s->description;
    std::cout << " (" << l.tests.size() << " tests, " << l.benches.size() << " benchmarks";
    if (!s->world_sizes.empty()) {
      std::cout << ", ranks:";
      for (int w : s->world_sizes) std::cout << ' ' << w;
    }
    std::cout << (s->run_by_default ? "" : ", not in the default run") << ")\n";
    for (const auto& t : l.tests) std::cout << "  test   " << t << '\n';
    for (const auto& b : l.benches) std::cout << "  bench  " << b << '\n';
  }
  std::cerr << total << " cases in " << listed.size() << " suites\n";
  return 0;
}

// A selection that runs nothing is almost always a typo (`--filter layer/GELU`, a suite without
// benchmarks): in CI it would pass silently. Each suite named by --suite must select at least one
// case, and so must the whole run; --allow-empty accepts an empty selection.
void check_selection_not_empty(const Options& o, const std::string& sub,
                               const std::vector<std::pair<std::string, std::size_t>>& per_suite) {
  const char* what = sub == "test" ? "test cases" : sub == "bench" ? "benchmarks" : "cases";
  const std::string filter = o.filter.empty() ? "" : " match --filter '" + o.filter + "'";
  std::vector<std::string> empty;
  std::size_t total = 0;
  for (const auto& [name, n] : per_suite) {
    total += n;
    if (n == 0 && !o.suites.empty()) empty.push_back(name);
  }
  if (total > 0 && empty.empty()) return;
  std::string where;
  if (empty.empty()) {
    where = "the default suites";
  } else {
    where = (empty.size() == 1 ? "suite " : "suites ");
    for (std::size_t i = 0; i < empty.size(); ++i) where += (i ? ", '" : "'") + empty[i] + "'";
  }
  const std::string msg = std::string("no ") + what + " in " + where + (filter.empty() ? "" : filter) +
                          "; `trainbench list" + (empty.size() == 1 ? " --suite " + empty[0] : std::string()) +
                          (o.filter.empty() ? "" : " --filter '" + o.filter + "'") + "` shows what there is";
  if (!o.allow_empty) throw UsageError(msg + " (--allow-empty accepts an empty selection)");
  std::cerr << "trainbench: warning: " << msg << '\n';
}

// test / bench / all share this: run, write the JSON, summarise, maybe report.
int cmd_run(const Options& o, const std::string& sub, int argc, char** argv) {
  const bool do_tests = sub != "bench", do_benches = sub != "test";
  const Selection sel = selection(o);
  // A --json the run could not write (a directory, a read-only folder) fails now, not after the
  // cases have run.
  const fs::path json = o.json.empty() ? default_json(sub) : fs::path(o.json);
  try {
    check_output_path(json);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--json ") + e.what());
  }
  std::vector<PlannedTest> tests;
  std::vector<PlannedBench> benches;
  if (do_tests) tests = collect_tests(sel);
  if (do_benches)  // benchmarks that time themselves run as cases (register_timed_benches)
    for (PlannedTest& t : collect_timed(sel)) tests.push_back(std::move(t));
  if (do_benches) benches = collect_benches(sel);

  const int threads = apply_threads(o.threads);
  // Distributed suites: their rank cases run in launched ranks, one launch per world size.
  DistRunOptions dopt;
  dopt.filter = o.filter;
  dopt.tests = do_tests;
  dopt.benches = do_benches;
  dopt.threads = threads;
  dopt.launch_timeout = std::chrono::seconds(static_cast<long>(o.launch_timeout));
  dopt.hostfile = o.hostfile;
  // Rank logs go beside the JSON, unless it is a device or FIFO (`--json /dev/null` must not
  // create /dev/ranks).
  const bool beside_json = !o.json.empty() && is_plain_output_path(o.json);
  dopt.work_dir = (beside_json ? fs::path(o.json).parent_path() : fs::path("results")) / "ranks";
  std::vector<const Suite*> distributed;
  std::size_t rank_total = 0;
  std::vector<std::pair<std::string, std::size_t>> per_suite;
  for (const Suite* s : select_suites(sel)) {
    std::size_t n = 0;
    for (const PlannedTest& t : tests) n += t.suite == s->name;
    for (const PlannedBench& b : benches) n += b.suite == s->name;
    if (!s->world_sizes.empty()) {
      distributed.push_back(s);
      const std::size_t ranked = count_rank_cases(*s, dopt);
      rank_total += ranked;
      n += ranked;
    }
    per_suite.emplace_back(s->name, n);
  }
  // `all` without --suite also runs the short scenario set (harness/scenario_cmd.h), --filter narrowing it.
  std::vector<std::string> quick;
  if (sub == "all" && o.suites.empty()) {
    quick = quick_scenarios(o.filter);
    per_suite.emplace_back("scenarios", quick.size());
  }
  check_selection_not_empty(o, sub, per_suite);

  Progress progress(&std::cerr, tests.size() + benches.size() + rank_total);
  std::vector<Record> records = run_tests(tests, &progress);
  BenchOptions bo{o.repetitions, o.min_time, threads};
  std::vector<Record> brecs = run_benches(benches, bo, &progress);
  records.insert(records.end(), std::make_move_iterator(brecs.begin()), std::make_move_iterator(brecs.end()));
  for (const Suite* s : distributed) {
    std::vector<Record> drecs = run_distributed(*s, dopt, &progress);
    records.insert(records.end(), std::make_move_iterator(drecs.begin()), std::make_move_iterator(drecs.end()));
  }
  if (!quick.empty()) {
    ScenarioRunOptions so;
    so.names = quick;
    so.timeout_s = 3;
    so.work_dir = dopt.work_dir.parent_path() / "scenarios";
    so.progress = &std::cerr;
    std::vector<Record> srecs = run_scenarios(so);
    records.insert(records.end(), std::make_move_iterator(srecs.begin()), std::make_move_iterator(srecs.end()));
  }

  // The tally first: it is the line CI logs are read for, even if the JSON cannot be written.
  const Counts c = count(records);
  std::cout << c.passed << " passed, " << c.failed + c.errors << " failed, " << c.skipped << " skipped" << std::endl;
  if (c.errors) std::cout << "(" << c.errors << " of the failures are errors: a case threw or could not run)\n";

  write_result(json, make_result(RunInfo{join_argv(argc, argv), threads}, records));
  std::cout << "results: " << json.string() << std::endl;

  bool report_ok = true;
  if (sub == "all" && !o.no_report) {
    try {
      ReportRequest req{{json}, o.report_out, o.peak_gflops, o.peak_gbps};
      const fs::path html = run_report(req);
      std::cout << "report: " << html.string() << std::endl;
    } catch (const ReportError& e) {
      if (!e.reported) std::cerr << "trainbench: " << e.what() << '\n';
      report_ok = false;
    }
  }
  return c.ok() && report_ok ? 0 : 1;
}

// Whether execvp would run `prog` on this host, as a shell decides it: 0 yes, 127 not found (no
// such file, or not on PATH), 126 found but not runnable (a folder, no execute permission).
int find_program(const std::string& prog, std::string& why) {
  auto check = [&why](const fs::path& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return 127;
    if (S_ISDIR(st.st_mode)) {
      why = "is a directory: " + p.string();
      return 126;
    }
    if (::access(p.c_str(), X_OK) != 0) {
      why = "not executable: " + p.string();
      return 126;
    }
    return 0;
  };
  if (prog.empty()) {
    why = "not found: (empty program name)";
    return 127;
  }
  if (prog.find('/') != std::string::npos) {
    const int rc = check(prog);
    if (rc == 127) why = "not found: " + prog;
    return rc;
  }
  const char* env = std::getenv("PATH");
  const std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  int best = 127;
  std::string found_why;
  for (std::size_t at = 0; at <= path.size();) {
    const std::size_t colon = std::min(path.find(':', at), path.size());
    const std::string dir = path.substr(at, colon - at);
    at = colon + 1;
    const int rc = check(fs::path(dir.empty() ? "." : dir) / prog);
    if (rc == 0) return 0;
    if (rc == 126 && best == 127) {
      best = 126;  // execvp reports EACCES only if nothing later on PATH runs
      found_why = why;
    }
  }
  why = best == 126 ? found_why : "not found: " + prog + " (not a path, and not on PATH)";
  return best;
}

// `trainbench launch -n N -- PROGRAM ARGS`: any program on N ranks, with the timeout and the
// per-rank logs of the suites' launches.
int cmd_launch(const Options& o) {
  LaunchSpec spec;
  spec.ranks = o.ranks;
  spec.argv = o.program;
  spec.timeout = std::chrono::seconds(static_cast<long>(o.launch_timeout));
  spec.hostfile = o.hostfile;
  const std::time_t t = std::time(nullptr);
  spec.run_dir = fs::path("results") / "ranks" / ("launch-" + std::to_string(t) + "-" + std::to_string(getpid()));
  if (o.dry_run) {
    for (const std::string& a : launch_command(spec)) std::cout << a << ' ';
    std::cout << '\n';
    return 0;
  }
  // A program that cannot start is the shell's 127 / 126, not mpirun's 131-134, which read as
  // signals. With a hostfile the program is looked up on the other hosts, so only mpirun knows.
  std::string why;
  if (spec.hostfile.empty()) {
    if (const int rc = find_program(spec.argv.front(), why)) {
      std::cerr << "trainbench: launch: " << why << '\n';
      return rc;
    }
  }
  spec.echo = &std::cout;
  const LaunchResult res = launch(spec);
  if (!res.ok() && !res.timed_out) {
    if (res.launcher_output.find("unable to find the specified executable") != std::string::npos) {
      std::cerr << "trainbench: launch: not found: " << spec.argv.front() << " (on a host of " << spec.hostfile
                << ")\n";
      return 127;
    }
    // mpirun says "could not access or execute" for a path that is not there at all: on these
    // hosts (one machine's file system) that is the shell's "not found".
    std::error_code ec;
    if (res.launcher_output.find("could not access") != std::string::npos &&
        spec.argv.front().find('/') != std::string::npos && !fs::exists(spec.argv.front(), ec)) {
      std::cerr << "trainbench: launch: not found: " << spec.argv.front() << " (on a host of " << spec.hostfile
                << ")\n";
      return 127;
    }
    if (res.launcher_output.find("could not access") != std::string::npos) {
      std::cerr << "trainbench: launch: cannot execute " << spec.argv.front() << " (on a host of " << spec.hostfile
                << ")\n";
      return 126;
    }
  }
  std::cerr << "launch: " << (res.timed_out ? "timed out" : "finished") << " after " << res.seconds
            << " s, exit status " << res.exit_code << "; rank logs in " << spec.run_dir.string() << '\n';
  if (!res.ok()) std::cerr << res.diagnosis() << '\n';
  return res.timed_out ? 124 : res.exit_code;
}

int cmd_report(const Options& o) {
  ReportRequest req;
  for (const std::string& p : o.inputs) req.inputs.emplace_back(p);
  req.out_dir = o.report_out;
  req.peak_gflops = o.peak_gflops;
  req.peak_gbps = o.peak_gbps;
  try {
    const fs::path html = run_report(req);
    std::cout << "report: " << html.string() << std::endl;
    return 0;
  } catch (const ReportError& e) {
    if (!e.reported) std::cerr << "trainbench: " << e.what() << '\n';
    return e.exit_code == 2 ? 2 : 1;  // 2: a bad input or --out, as for a bad command line
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trainbench: correctness tests and benchmarks of the engine against LibTorch", "trainbench"};
  app.set_version_flag("--version", TB_VERSION);
  app.require_subcommand(1);
  Options o;

  CLI::App* list =
      app.add_subcommand("list", "List the suites (kind, case counts), or the cases of the suites named by --suite");
  add_selection(list, o);
  list->get_option("--suite")->description("Suite whose cases to list (repeatable); default: the table of suites");

  CLI::App* test = app.add_subcommand("test", "Run correctness cases, write result JSON");
  add_run_options(test, o, "test");

  CLI::App* bench = app.add_subcommand("bench", "Run benchmarks (engine vs LibTorch), write JSON");
  add_run_options(bench, o, "bench");
  add_bench_options(bench, o);

  CLI::App* report = app.add_subcommand("report", "Make the HTML/PNG/Markdown report from JSON");
  report->add_option("--out", o.report_out, "Report folder; default: report/ beside the first JSON")->type_name("DIR");
  add_peak_options(report, o);
  report->add_option("json", o.inputs, "Result JSON files")->required()->type_name("JSON");

  CLI::App* all = app.add_subcommand(
      "all",
      "The main job: tests and benchmarks of the default suites and the short scenario set, one JSON, the report");
  add_run_options(all, o, "all");
  add_bench_options(all, o);
  all->add_option("--out", o.report_out, "Report folder; default: report/ beside the JSON")->type_name("DIR");
  all->add_flag("--no-report", o.no_report, "Write the JSON only");
  add_peak_options(all, o);

  CLI::App* launch = app.add_subcommand("launch",
                                        "Run a program on N ranks through mpirun (this host unless --hostfile) or srun "
                                        "(--launcher srun), with a timeout and per-rank logs");
  launch->add_option("-n,--ranks", o.ranks, "Number of ranks")
      ->capture_default_str()
      ->check(between(1, 4096, "ranks", true))
      ->type_name("N");
  launch
      ->add_option("--timeout", o.launch_timeout,
                   "Seconds before every rank's stack is printed and the ranks and all they started are killed")
      ->capture_default_str()
      ->check(between(1, 86400, "seconds"))
      ->type_name("S");
  launch->add_option("--hostfile", o.hostfile, "mpirun hostfile (default: every rank on this host)")
      ->check(hostfile_check())
      ->type_name("PATH");
  add_launcher_options(launch, o);
  launch->add_flag("--dry-run", o.dry_run, "Print the mpirun (srun) command instead of running it");
  launch
      ->add_option("program", o.program,
                   "The program and its arguments (after --); exit 127 if it is not found, 126 if it cannot run")
      ->required()
      ->type_name("PROGRAM");

  EstimateOptions estimate_options;
  CLI::App* estimate = add_estimate_command(app, estimate_options);
  AnalyzeOptions analyze_options;
  CLI::App* analyze = add_analyze_command(app, analyze_options);
  CompareCmdOptions compare_options;
  CLI::App* compare = add_compare_command(app, compare_options);
  ProfileOptions profile_options;
  CLI::App* profile = add_profile_command(app, profile_options);
  ProjectOptions project_options;
  CLI::App* project = add_project_command(app, project_options);
  ScenarioOptions scenario_options;
  CLI::App* scenario = add_scenario_command(app, scenario_options);
  HostsCmdOptions hosts_options;
  CLI::App* hosts = add_hosts_command(app, hosts_options);

  CheckpointOptions checkpoint_options;
  CLI::App* checkpoint = add_checkpoint_command(app, checkpoint_options);

  // Started by the harness inside mpirun for distributed suites; not for users (hidden).
  CLI::App* rank = app.add_subcommand("rank", "");
  rank->group("");
  rank->add_option("--suite", o.rank.suite)->required();
  rank->add_option("--world", o.rank.world)->required();
  rank->add_option("--threads", o.rank.threads);
  rank->add_option("--filter", o.rank.filter);
  rank->add_option("--out", o.rank.out_dir)->required();
  rank->add_flag("--benches", o.rank.benches);
  rank->add_option("--progress-start", o.rank.progress_start);
  rank->add_option("--progress-total", o.rank.progress_total);

  // A scenario's rank body (harness/scenario.h), started by launch_scenario_ranks; hidden too.
  std::string scenario_rank_name;
  ScenarioContext scenario_rank_ctx;
  CLI::App* scenario_rank = app.add_subcommand("scenario-rank", "");
  scenario_rank->group("");
  scenario_rank->add_option("name", scenario_rank_name)->required();
  scenario_rank->add_option("--seed", scenario_rank_ctx.seed);
  scenario_rank->add_option("--backend", scenario_rank_ctx.backend);
  scenario_rank->add_option("--timeout", scenario_rank_ctx.timeout_s);

  // CLI11 reads an unknown first word as a stray positional and says "A subcommand is required".
  std::vector<std::string> names;  // the visible ones, for the message
  bool known = false;
  const std::string word = argc < 2 ? "" : argv[1];
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    known = known || sub->get_name() == word;
    if (!sub->get_group().empty()) names.push_back(sub->get_name());
  }
  if (word.empty() || word[0] != '-') {
    if (!known) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      std::cerr << "trainbench: "
                << (word.empty() ? std::string("a subcommand is required") : "unknown subcommand '" + word + "'")
                << "; valid subcommands: " << list << " (trainbench --help)\n";
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : 2;
  }

  if (!o.launcher.empty()) ::setenv("TRAINBENCH_LAUNCHER", o.launcher.c_str(), 1);
  if (o.nodes > 0) ::setenv("TRAINBENCH_LAUNCH_NODES", std::to_string(o.nodes).c_str(), 1);
  try {
    if (*list) return cmd_list(o);
    if (*report) return cmd_report(o);
    if (*launch) return cmd_launch(o);
    if (*estimate) return run_estimate(*estimate, estimate_options, join_argv(argc, argv));
    if (*analyze) return run_analyze(analyze_options);
    if (*compare) return run_compare(compare_options);
    if (*profile) return run_profile(profile_options, join_argv(argc, argv));
    if (*project) return run_project(project_options);
    if (*scenario) return run_scenario_command(*scenario, scenario_options, join_argv(argc, argv));
    if (*checkpoint) return run_checkpoint(*checkpoint, checkpoint_options);
    if (*hosts) return run_hosts(*hosts, hosts_options);
    if (*rank) return rank_main(o.rank);
    if (*scenario_rank) {
      if (const char* dir = std::getenv("TRAINBENCH_DIST_DIR")) scenario_rank_ctx.run_dir = dir;
      return scenario_rank_main(scenario_rank_name, scenario_rank_ctx);
    }
    if (*test) return cmd_run(o, "test", argc, argv);
    if (*bench) return cmd_run(o, "bench", argc, argv);
    if (*all) return cmd_run(o, "all", argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "trainbench: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    // Not a case's failure (those are records) but the harness's own: e.g. the JSON not writable.
    std::cerr << "trainbench: error: " << e.what() << '\n';
    return 2;
  }
  return 2;
}

}  // namespace tb::harness
