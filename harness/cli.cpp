// `trainbench` subcommands: list, test, bench, report, all, launch (and the hidden `rank`).
// Output contract: progress lines on stderr, a final `N passed, N failed, N skipped` line and the paths written on stdout.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness/cli.h"
#include "harness/distributed.h"
#include "harness/launcher.h"
#include "harness/runner.h"

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
  double peak_gflops = 0, peak_gbps = 0;
  double launch_timeout = 1800;     // distributed suites: seconds per world size
  std::string hostfile;             // distributed suites / launch: mpirun's hostfile
  RankOptions rank;                 // the hidden `rank` subcommand
  int ranks = 2;                    // launch
  bool dry_run = false;             // launch
  std::vector<std::string> program; // launch
};

void add_selection(CLI::App* sub, Options& o) {
  sub->add_option("--suite", o.suites, "Suite to run (repeatable); default: the default suites")
      ->type_name("NAME");
  sub->add_option("--filter", o.filter, "Regex searched in case names (ECMAScript)")
      ->type_name("REGEX");
}

void add_run_options(CLI::App* sub, Options& o, const std::string& name) {
  add_selection(sub, o);
  sub->add_option("--json", o.json, "Result file; default: results/" + name + "-<timestamp>.json")
      ->type_name("PATH");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  sub->add_option("--threads", o.threads,
                  "Threads for the engine and LibTorch; default: all cores (" +
                      std::to_string(cores) + ")")
      ->check(CLI::Range(1, 4096))
      ->type_name("N");
  sub->add_option("--launch-timeout", o.launch_timeout,
                  "Distributed suites: seconds one world size may run before its ranks are killed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->type_name("S");
  sub->add_option("--hostfile", o.hostfile,
                  "Distributed suites: mpirun hostfile to spread ranks over hosts (default: this host)")
      ->type_name("PATH");
}

void add_bench_options(CLI::App* sub, Options& o) {
  sub->add_option("--repetitions", o.repetitions, "Timed repetitions per side")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sub->add_option("--min-time", o.min_time, "Minimum seconds per repetition")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->type_name("S");
}

void add_peak_options(CLI::App* sub, Options& o) {
  sub->add_option("--peak-gflops", o.peak_gflops,
                  "Machine peak GFLOP/s drawn on the throughput plot (report default: 234, or 175 for AVX2 results)")
      ->type_name("X")
      ->check(CLI::PositiveNumber);
  sub->add_option("--peak-gbps", o.peak_gbps,
                  "Machine memory bandwidth GB/s drawn on the plot (report default: 50)")
      ->type_name("X")
      ->check(CLI::PositiveNumber);
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

int cmd_list(const Options& o) {
  Selection sel = selection(o);
  sel.include_non_default = true;  // list shows everything there is
  const std::vector<const Suite*> chosen = select_suites(sel);
  // Collected per suite so the listing keeps registration order within each suite.
  std::size_t total = 0;
  for (const Suite* s : chosen) {
    Selection one{{s->name}, o.filter, true};
    std::vector<std::string> tests, benches;
    for (const auto& t : collect_tests(one)) tests.push_back(t.test.name);
    for (const auto& b : collect_benches(one)) benches.push_back(b.bench.name);
    // A distributed suite's rank cases, per world size (they run inside launched ranks).
    for (int w : s->world_sizes) {
      for (const TestCase& t : rank_cases(*s, w, false, o.filter)) tests.push_back(t.name);
      for (const TestCase& t : rank_cases(*s, w, true, o.filter)) benches.push_back(t.name);
    }
    std::cout << s->name;
    if (!s->description.empty()) std::cout << " - " << s->description;
    std::cout << " (" << tests.size() << " tests, " << benches.size() << " benchmarks";
    if (!s->world_sizes.empty()) {
      std::cout << ", ranks:";
      for (int w : s->world_sizes) std::cout << ' ' << w;
    }
    std::cout << (s->run_by_default ? "" : ", not in the default run") << ")\n";
    for (const auto& t : tests) std::cout << "  test   " << t << '\n';
    for (const auto& b : benches) std::cout << "  bench  " << b << '\n';
    total += tests.size() + benches.size();
  }
  if (chosen.empty()) std::cout << "no suites registered\n";
  std::cerr << total << " cases in " << chosen.size() << " suites\n";
  return 0;
}

// test / bench / all share this: run, write the JSON, summarise, maybe report.
int cmd_run(const Options& o, const std::string& sub, int argc, char** argv) {
  const bool do_tests = sub != "bench", do_benches = sub != "test";
  const Selection sel = selection(o);
  std::vector<PlannedTest> tests;
  std::vector<PlannedBench> benches;
  if (do_tests) tests = collect_tests(sel);
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
  dopt.work_dir = (o.json.empty() ? fs::path("results") : fs::path(o.json).parent_path()) / "ranks";
  std::vector<const Suite*> distributed;
  std::size_t rank_total = 0;
  for (const Suite* s : select_suites(sel))
    if (!s->world_sizes.empty()) {
      distributed.push_back(s);
      rank_total += count_rank_cases(*s, dopt);
    }
  if (tests.empty() && benches.empty() && rank_total == 0)
    std::cerr << "trainbench: warning: no cases match the selection\n";

  Progress progress(&std::cerr, tests.size() + benches.size() + rank_total);
  std::vector<Record> records = run_tests(tests, &progress);
  BenchOptions bo{o.repetitions, o.min_time, threads};
  std::vector<Record> brecs = run_benches(benches, bo, &progress);
  records.insert(records.end(), std::make_move_iterator(brecs.begin()),
                 std::make_move_iterator(brecs.end()));
  for (const Suite* s : distributed) {
    std::vector<Record> drecs = run_distributed(*s, dopt, &progress);
    records.insert(records.end(), std::make_move_iterator(drecs.begin()),
                   std::make_move_iterator(drecs.end()));
  }

  // The tally first: it is the line CI logs are read for, even if the JSON cannot be written.
  const Counts c = count(records);
  std::cout << c.passed << " passed, " << c.failed + c.errors << " failed, " << c.skipped
            << " skipped" << std::endl;
  if (c.errors)
    std::cout << "(" << c.errors << " of the failures are errors: a case threw or could not run)\n";

  const fs::path json = o.json.empty() ? default_json(sub) : fs::path(o.json);
  write_result(json, make_result(RunInfo{join_argv(argc, argv), threads}, records));
  std::cout << "results: " << json.string() << std::endl;

  bool report_ok = true;
  if (sub == "all" && !o.no_report) {
    try {
      ReportRequest req{{json}, o.report_out, o.peak_gflops, o.peak_gbps};
      const fs::path html = run_report(req);
      std::cout << "report: " << html.string() << std::endl;
    } catch (const std::exception& e) {
      std::cerr << "trainbench: " << e.what() << '\n';
      report_ok = false;
    }
  }
  return c.ok() && report_ok ? 0 : 1;
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
    for (const std::string& a : mpirun_command(spec)) std::cout << a << ' ';
    std::cout << '\n';
    return 0;
  }
  spec.echo = &std::cout;
  const LaunchResult res = launch(spec);
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
  } catch (const std::exception& e) {
    std::cerr << "trainbench: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trainbench: correctness tests and benchmarks of the engine against LibTorch",
               "trainbench"};
  app.set_version_flag("--version", TB_VERSION);
  app.require_subcommand(1);
  Options o;

  CLI::App* list = app.add_subcommand("list", "List suites and their cases");
  add_selection(list, o);

  CLI::App* test = app.add_subcommand("test", "Run correctness cases, write result JSON");
  add_run_options(test, o, "test");

  CLI::App* bench = app.add_subcommand("bench", "Run benchmarks (engine vs LibTorch), write JSON");
  add_run_options(bench, o, "bench");
  add_bench_options(bench, o);

  CLI::App* report = app.add_subcommand("report", "Make the HTML/PNG/Markdown report from JSON");
  report->add_option("--out", o.report_out, "Report folder; default: report/ beside the first JSON")
      ->type_name("DIR");
  add_peak_options(report, o);
  report->add_option("json", o.inputs, "Result JSON files")->required()->type_name("JSON");

  CLI::App* all = app.add_subcommand(
      "all", "The main job: tests and benchmarks of the default suites, one JSON, the report");
  add_run_options(all, o, "all");
  add_bench_options(all, o);
  all->add_option("--out", o.report_out, "Report folder; default: report/ beside the JSON")
      ->type_name("DIR");
  all->add_flag("--no-report", o.no_report, "Write the JSON only");
  add_peak_options(all, o);

  CLI::App* launch = app.add_subcommand(
      "launch",
      "Run a program on N ranks through mpirun (this host unless --hostfile), with a timeout and per-rank logs");
  launch->add_option("-n,--ranks", o.ranks, "Number of ranks")->capture_default_str()->check(CLI::Range(1, 4096));
  launch->add_option("--timeout", o.launch_timeout, "Seconds before the ranks are killed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  launch->add_option("--hostfile", o.hostfile, "mpirun hostfile (default: every rank on this host)");
  launch->add_flag("--dry-run", o.dry_run, "Print the mpirun command instead of running it");
  launch->add_option("program", o.program, "The program and its arguments (after --)")->required();

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the error
    return rc == 0 ? 0 : 2;
  }

  try {
    if (*list) return cmd_list(o);
    if (*report) return cmd_report(o);
    if (*launch) return cmd_launch(o);
    if (*rank) return rank_main(o.rank);
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
