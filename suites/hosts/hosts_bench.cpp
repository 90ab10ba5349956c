// The hosts suite's benchmarks (`trainbench bench --suite hosts`): the comm benchmark's all_reduce,
// all_gather and reduce_scatter size sweep inside one host (1 x 2, 1 x 4 ranks) and across two per link profile (2 x 1, 2 x 2),
// and the DDP and FSDP (FULL_SHARD) benchmarks at 2 hosts x 1 and x 2 ranks per profile: samples/s,
// step time, the time the step waited on communication (comm_wait_ms), the collectives' own run
// time (comm_busy_ms), the training thread's and the whole process's CPU time per step (main_thread_cpu_ms,
// cpu_ms), and each collective's process CPU per call (cpu_us), as those
// suites' benchmarks measure them (kFolded). Each case brings
// its own hosts up, measures the link between two of them (TCP probe: measured next to the
// profile's nominal figures), runs the other suite's rank benchmarks once across the hosts and
// folds their figures into one record, with `hosts` and `link_profile` saying where it ran.
#include <regex>
#include <sstream>

#include "harness/delay_line.h"
#include "harness/hosts.h"
#include "harness/runner.h"
#include "suites/hosts/hosts_suite.h"
#include "suites/hosts/hosts_util.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace {

// all_reduce, all_gather and reduce_scatter (DDP's collective, and FSDP's two: the projection
// fits each on each link) at 8 B, 1 KiB, 64 KiB, 1 MiB, 4 MiB and 16 MiB (the sizes the DDP and
// FSDP steps send: buckets of 1 and up to 25 MiB, units of a few MiB), the engine on MPI (in
// lockstep and out of cache: Note [Collectives out of cache]) and on Gloo, at `world`.
std::string comm_filter(int world) {
  return "^(all_reduce|all_gather|reduce_scatter)/float32/(8|1024|65536|1048576|4194304|16777216)/w" +
         std::to_string(world) + "/(engine|engine-cold|engine-gloo)$";
}

// Where the record ran (reports/trainbench_reports/projection.py's LINK_KEYS: `hosts`,
// `link_profile`), the profile's nominal figures and the TCP probe's between two hosts.
void link_metrics(harness::Record& rec, const harness::HostsFixture& f) {
  rec.metrics["hosts"] = int(f.hosts().size());
  rec.metrics["ranks_per_host"] = f.ranks_per_host();
  rec.metrics["link_profile"] = f.profile().name;
  rec.metrics["nominal_rate_gbit"] = f.profile().rate_gbit;
  rec.metrics["nominal_delay_us"] = f.profile().delay_us;
  rec.metrics["latency_shaped"] = f.latency_shaped() ? 1 : 0;
  rec.metrics["latency_shaping"] = harness::latency_shaping_name(f.latency_shaping());
  if (f.hosts().size() < 2) return;
  const std::vector<int> lines = f.delay_line_pids();
  const double cpu0 = harness::process_cpu_seconds(lines);
  const harness::LinkMeasurement m = f.measure_link(0, 1);
  if (!lines.empty())  // the delay lines' CPU time over the probe
    rec.metrics["delay_line_cpu_s"] = harness::process_cpu_seconds(lines) - cpu0;
  rec.metrics["link_bandwidth_gbit"] = m.bandwidth_gbit;
  rec.metrics["link_rtt_us"] = m.rtt_us;
  rec.metrics["link_latency_us"] = m.latency_us;
}

// "all_reduce/float32/1048576/w2/engine-gloo" -> "all_reduce_1048576B_engine-gloo"
std::string comm_key(const std::string& case_name) {
  static const std::regex re(R"(^(\w+)/float32/(\d+)/w\d+/([\w-]+)$)");
  std::smatch m;
  return std::regex_match(case_name, m, re) ? m[1].str() + "_" + m[2].str() + "B_" + m[3].str() : case_name;
}

harness::TestCase comm_case(const std::string& profile, int hosts, int ranks_per_host) {
  const std::string name = "comm/" + profile + "/" + (hosts == 1 ? "intra" : "inter") + "/" + std::to_string(hosts) +
                           "x" + std::to_string(ranks_per_host);
  return {name, [=] {
            return run_recorded(
                "hosts", name,
                [&](harness::Record& rec) {
                  rec.kind = "benchmark";
                  if (skip_without_hosts(rec)) return;
                  harness::HostsFixture f = harness::HostsFixture::up({hosts, ranks_per_host, profile, false});
                  link_metrics(rec, f);
                  const std::vector<harness::Record> inner =
                      run_suite_on_hosts(f, "comm", comm_filter(hosts * ranks_per_host), true, 0,
                                         {{"TRAINBENCH_COMM_SWEEP", "quick"}, {"TRAINBENCH_COMM_MAX_BYTES", "16M"}});
                  for (const harness::Record& r : inner) {
                    check(r.status == harness::Status::Pass, r.case_name + ": " + r.message);
                    const std::string k = comm_key(r.case_name);
                    rec.metrics[k + "_time_us"] = r.metrics.value("time_s", 0.0) * 1e6;
                    rec.metrics[k + "_busbw_gbps"] = r.metrics.value("busbw_gbps", 0.0);
                    if (r.metrics.contains("cpu_s"))
                      rec.metrics[k + "_cpu_us"] = r.metrics["cpu_s"].get<double>() * 1e6;
                  }
                  check(!inner.empty(), "the comm benchmark produced no record");
                },
                false);
          }};
}

// The figures of each model's step a training case folds, as <model>_<figure>.
constexpr const char* kFolded[] = {"samples_per_s",      "step_ms", "comm_wait_ms", "comm_busy_ms",
                                   "main_thread_cpu_ms", "cpu_ms"};

// The DDP benchmark (or FSDP's FULL_SHARD one) of the MLP and GPT models at 2 hosts x K ranks.
harness::TestCase training_case(const std::string& suite, const std::string& profile, int ranks_per_host) {
  const std::string name = suite + "/" + profile + "/2x" + std::to_string(ranks_per_host);
  const std::string w = "/w" + std::to_string(2 * ranks_per_host) + "/";
  const std::string filter = suite == "ddp" ? "^ddp/(mlp|gpt)" + w + "engine$"
                                            : "^fsdp/(mlp|gpt)/full_shard" + w + "engine$";
  return {name, [=] {
            return run_recorded(
                "hosts", name,
                [&](harness::Record& rec) {
                  rec.kind = "benchmark";
                  if (skip_without_hosts(rec)) return;
                  harness::HostsFixture f = harness::HostsFixture::up({2, ranks_per_host, profile, false});
                  link_metrics(rec, f);
                  const std::vector<harness::Record> inner = run_suite_on_hosts(f, suite, filter, true, 0,
                                                                                {{"TRAINBENCH_DDP_BENCH_S", "1"}});
                  for (const harness::Record& r : inner) {
                    check(r.status == harness::Status::Pass, r.case_name + ": " + r.message);
                    const std::string model = r.case_name.find("/gpt/") != std::string::npos ? "gpt" : "mlp";
                    for (const char* m : kFolded)
                      if (r.metrics.contains(m)) rec.metrics[model + "_" + m] = r.metrics[m];
                  }
                  check(!inner.empty(), "the " + suite + " benchmark produced no record");
                },
                false);
          }};
}

}  // namespace

std::vector<harness::TestCase> hosts_benches() {
  // Inside one host (no link between hosts: the profile does not apply), then across two per profile.
  std::vector<harness::TestCase> out = {comm_case("unshaped", 1, 2), comm_case("unshaped", 1, 4)};
  for (const harness::LinkProfile& p : harness::link_profiles())
    for (int k : {1, 2}) out.push_back(comm_case(p.name, 2, k));
  for (const harness::LinkProfile& p : harness::link_profiles())
    for (const char* suite : {"ddp", "fsdp"})
      for (int k : {1, 2}) out.push_back(training_case(suite, p.name, k));
  return out;
}

void register_hosts_suite() {
  harness::Suite s;
  s.name = "hosts";
  s.description =
      "across hosts of our own (network namespaces on a bridge; needs root, else skips): the fixture (names, "
      "links, tear-down, a killed owner's hosts reaped), TRAINBENCH_/NCCL_/OMPI_ variables on every rank of "
      "every host, the collectives, DDP, FSDP and DCP cases at 2 hosts x 2 ranks, a checkpoint saved at 2 x 2 and "
      "loaded by other jobs at 1 x 2 and 2 x 1, a whole host failing mid-collective; benchmarks: comm intra- vs "
      "inter-host, DDP and FSDP samples/s, comm wait and CPU time per link profile";
  s.tests = [] { return hosts_tests(); };  // each case makes its own hosts and launches its ranks
  s.rank_tests = [](int world) { return hosts_rank_tests(world); };  // no world_sizes: only its cases launch them
  s.run_by_default = false;                                          // root, and minutes of launches
  harness::register_suite(std::move(s));
  harness::register_timed_benches("hosts", [] { return hosts_benches(); });
}

}  // namespace tb::suites
