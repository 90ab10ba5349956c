// `trainbench hosts`. See hosts_cmd.h and docs/distributed.md, "Hosts of our own".
#include "harness/hosts_cmd.h"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>

#include "harness/hosts.h"
#include "harness/runner.h"
#include "harness/subprocess.h"

namespace tb::harness {

CLI::App* add_hosts_command(CLI::App& app, HostsCmdOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "hosts",
      "Hosts of our own: N network namespaces on a bridge (private 10.213.<id>.0/24), each with its hostname, "
      "links shaped to a profile (rate with tbf; one-way delay with netem, or where the kernel lacks it an "
      "NFQUEUE delay line in each host), for mpirun --hostfile runs across hosts (needs root)");
  sub->require_subcommand(1);
  CLI::App* up = sub->add_subcommand("up",
                                     "Make N hosts and leave them up; prints the hostfile and the launch "
                                     "environment (export it, then trainbench test|bench|launch --hostfile)");
  up->add_option("hosts", o.hosts, "Number of hosts")->required()->check(CLI::Range(1, 64))->type_name("N");
  up->add_option("--profile", o.profile,
                 "Link profile: unshaped, 10g-50us, 1g-200us (the delay with netem, else the NFQUEUE delay line, "
                 "which needs iptables and the nfnetlink_queue module)")
      ->capture_default_str()
      ->type_name("NAME");
  up->add_option("--ranks-per-host", o.ranks_per_host, "Slots per host in the hostfile")
      ->capture_default_str()
      ->check(CLI::Range(1, 256))
      ->type_name("K");
  up->add_flag("--measure", o.measure, "Measure the link between the first two hosts (TCP probe) and record it");
  CLI::App* down = sub->add_subcommand(
      "down",
      "Remove the hosts made by `hosts up` (every such fixture, or the IDs named), and any fixture whose owner "
      "process is gone");
  down->add_option("ids", o.down_ids, "Fixture ids to remove (as `hosts status` lists them); none: all")
      ->check(CLI::Range(0, 999))
      ->type_name("ID");
  CLI::App* status = sub->add_subcommand("status",
                                         "List the fixtures that are up (removing those whose owner is gone)");
  status->add_flag("--measure", o.measure,
                   "Measure each fixture's link between its first two hosts and record it (with the delay lines' "
                   "CPU time over the probe)");
  // Started by HostsFixture inside each host where netem is missing; not for users (hidden).
  CLI::App* line = sub->add_subcommand("delay-line", "");
  line->group("");
  line->add_option("--netns", o.delay_line.netns);
  line->add_option("--queue", o.delay_line.queue)->check(CLI::Range(0, 65535));  // a uint16 queue number
  line->add_option("--delay-ns", o.delay_ns)->required()->check(CLI::Range(0LL, 10'000'000'000LL));  // <= 10 s
  line->add_option("--stats", o.delay_line.stats);
  line->add_option("--ready-fd", o.ready_fd);
  return sub;
}

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// "measured 0.94 Gb/s, 212.3 us one way (rtt 424.6 us); nominal 1 Gb/s, 200 us (delay: the NFQUEUE
// delay line ...)"
std::string measured_line(const LinkMeasurement& m, const LinkProfile& p, LatencyShaping shaping,
                          const std::string& note) {
  std::string line = "measured " + fixed(m.bandwidth_gbit, 2) + " Gb/s, " + fixed(m.latency_us, 1) +
                     " us one way (rtt " + fixed(m.rtt_us, 1) + " us); nominal ";
  line += p.rate_gbit > 0 ? fixed(p.rate_gbit, 0) + " Gb/s" : std::string("unshaped bandwidth");
  line += p.delay_us > 0 ? ", " + fixed(p.delay_us, 0) + " us" : std::string(", no added delay");
  if (p.delay_us > 0) line += shaping == LatencyShaping::None ? " (latency " + note + ")" : " (delay: " + note + ")";
  return line;
}

// The probe, and with delay lines their CPU time over it and what they report of their lateness
// (their statistics file is rewritten a second after traffic stops: read 1.5 s after the probe).
std::string measure_and_record(const FixtureRecord& r) {
  if (r.hosts.size() < 2) return "not measured: one host has no link to another";
  const double cpu0 = process_cpu_seconds(r.delay_line_pids);
  const auto t0 = std::chrono::steady_clock::now();
  const LinkMeasurement m = measure_link(r.hosts[0], r.hosts[1]);
  const double probe_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_s = process_cpu_seconds(r.delay_line_pids) - cpu0;
  std::string line = measured_line(m, link_profile(r.profile), r.latency_shaping, r.latency_note);
  if (!r.delay_line_pids.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    line += "\n  delay lines: " + fixed(cpu_s, 2) + " CPU s over the " + fixed(probe_s, 2) + " s probe";
    for (const Host& h : {r.hosts[0], r.hosts[1]}) {
      std::ifstream f(r.dir / ("delay_line." + h.name + ".stats"));
      const DelayLineStats st = DelayLineStats::parse(std::string(std::istreambuf_iterator<char>(f), {}));
      line += "; " + h.name + ": " + std::to_string(st.packets) + " packets, late by " + fixed(st.late_mean_us, 1) +
              " us mean, " + fixed(st.late_max_us, 0) + " us max, " + std::to_string(st.late_over_10us) +
              " over 10 us, " + std::to_string(st.overruns) + " overruns";
    }
  }
  std::ofstream(r.dir / "measured") << line << '\n';
  return line;
}

}  // namespace

int run_hosts(const CLI::App& sub, const HostsCmdOptions& o) {
  if (sub.got_subcommand("delay-line")) {
    DelayLineOptions d = o.delay_line;
    d.delay = std::chrono::nanoseconds(o.delay_ns);
    return run_delay_line(d, o.ready_fd);
  }
  if (sub.got_subcommand("down")) {
    const std::vector<int>* only = o.down_ids.empty() ? nullptr : &o.down_ids;
    if (only) {  // a named id that is not up is a typo, not a removal
      std::string up, missing;
      const std::vector<FixtureRecord> all = list_fixtures();
      for (const FixtureRecord& r : all) up += (up.empty() ? "" : ", ") + std::to_string(r.id);
      for (int id : o.down_ids) {
        bool found = false;
        for (const FixtureRecord& r : all) found = found || r.id == id;
        if (!found) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
      }
      if (!missing.empty())
        throw UsageError("hosts down: no fixture " + missing + " (up: " + (up.empty() ? "none" : up) +
                         "; `trainbench hosts status` lists them)");
    }
    int failed = 0;
    const int n = reap_fixtures(true, &std::cout, &failed, only);
    std::cout << "hosts: " << n << " fixture(s) removed\n";
    if (failed) {
      std::cerr << "trainbench hosts down: " << failed
                << " fixture(s) could not be removed (above); they stay recorded for the next `hosts down`\n";
      return 1;
    }
    if (only) {  // one still owned by a live process (being made, or a test's) was asked for and stays
      std::string left;
      for (const FixtureRecord& r : list_fixtures())
        for (int id : o.down_ids)
          if (r.id == id) left += (left.empty() ? "" : ", ") + std::to_string(id);
      if (!left.empty()) {
        std::cerr << "trainbench hosts down: fixture " << left << " not removed (above)\n";
        return 1;
      }
    }
    return 0;
  }
  if (sub.got_subcommand("status")) {
    reap_fixtures(false, &std::cout);
    if (std::string why = hosts_unavailable_reason(); !why.empty())
      std::cout << "hosts: unavailable here: " << why << '\n';
    const std::vector<FixtureRecord> all = list_fixtures();
    if (all.empty()) std::cout << "hosts: none up (state in " << hosts_state_root().string() << ")\n";
    for (const FixtureRecord& r : all) {
      std::cout << "fixture " << r.id << ": " << r.hosts.size() << " host(s) x " << r.ranks_per_host
                << " slots, profile " << r.profile << ", "
                << (r.owner_pid ? "owned by process " + std::to_string(r.owner_pid) : std::string("persistent"))
                << "\n  hostfile " << (r.dir / "hostfile").string() << "\n";
      for (const Host& h : r.hosts) std::cout << "  " << h.name << "  " << h.address << "  (link " << h.link << ")\n";
      if (!r.latency_note.empty()) std::cout << "  latency: " << r.latency_note << '\n';
      std::string measured = r.measured;
      if (o.measure) measured = measure_and_record(r);
      if (!measured.empty()) std::cout << "  link " << measured << '\n';
    }
    return 0;
  }
  HostsOptions ho;
  ho.hosts = o.hosts;
  ho.ranks_per_host = o.ranks_per_host;
  ho.profile = o.profile;
  ho.persistent = true;
  try {
    link_profile(o.profile);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("hosts up --profile: ") + e.what());
  }
  reap_fixtures(false, &std::cout);
  try {
    HostsFixture f = HostsFixture::up(ho);
    f.detach();
    std::cout << "hosts: fixture " << f.id() << " up: " << f.hosts().size() << " host(s) on bridge " << f.bridge()
              << " (" << f.subnet() << "), profile " << f.profile().name << " (" << f.profile().what << ")\n";
    for (const Host& h : f.hosts()) std::cout << "  " << h.name << "  " << h.address << '\n';
    if (f.profile().delay_us > 0) std::cout << "  latency: " << f.latency_note() << '\n';
    if (o.measure) {
      for (const FixtureRecord& r : list_fixtures())
        if (r.id == f.id()) std::cout << "  link " << measure_and_record(r) << '\n';
    }
    std::cout << "hostfile: " << f.hostfile() << "\nlaunch environment (export it, then pass --hostfile):\n";
    for (const auto& [k, v] : f.launch_env()) std::cout << "  export " << k << "=" << shell_quote(v) << '\n';
    std::cout << "e.g. trainbench test --suite collectives --hostfile " << f.hostfile()
              << "\nremove with: trainbench hosts down " << f.id() << '\n';
    return 0;
  } catch (const HostsUnavailable& e) {
    std::cerr << "trainbench hosts: cannot make hosts here: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace tb::harness
