// `trainbench hosts`. See hosts_cmd.h and docs/distributed.md, "Hosts of our own".
#include "harness/hosts_cmd.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "harness/hosts.h"
#include "harness/runner.h"
#include "harness/subprocess.h"

namespace tb::harness {

CLI::App* add_hosts_command(CLI::App& app, HostsCmdOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "hosts",
      "Hosts of our own: N network namespaces on a bridge (private 10.213.<id>.0/24), each with its hostname, "
      "links shaped to a profile, for mpirun --hostfile runs across hosts (needs root)");
  sub->require_subcommand(1);
  CLI::App* up = sub->add_subcommand("up",
                                     "Make N hosts and leave them up; prints the hostfile and the launch "
                                     "environment (export it, then trainbench test|bench|launch --hostfile)");
  up->add_option("hosts", o.hosts, "Number of hosts")->required()->check(CLI::Range(1, 64))->type_name("N");
  up->add_option("--profile", o.profile, "Link profile: unshaped, 10g-50us, 1g-200us")
      ->capture_default_str()
      ->type_name("NAME");
  up->add_option("--ranks-per-host", o.ranks_per_host, "Slots per host in the hostfile")
      ->capture_default_str()
      ->check(CLI::Range(1, 256))
      ->type_name("K");
  up->add_flag("--measure", o.measure, "Measure the link between the first two hosts (TCP probe) and record it");
  sub->add_subcommand("down", "Remove the hosts made by `hosts up`, and any fixture whose owner process is gone");
  CLI::App* status = sub->add_subcommand("status",
                                         "List the fixtures that are up (removing those whose owner is gone)");
  status->add_flag("--measure", o.measure, "Measure each fixture's link between its first two hosts and record it");
  return sub;
}

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// "measured 9.41 Gb/s, 31.2 us one way (rtt 62.4 us); nominal 10 Gb/s, 50 us (latency not shaped: no netem)"
std::string measured_line(const LinkMeasurement& m, const LinkProfile& p, bool latency_shaped) {
  std::string line = "measured " + fixed(m.bandwidth_gbit, 2) + " Gb/s, " + fixed(m.latency_us, 1) +
                     " us one way (rtt " + fixed(m.rtt_us, 1) + " us); nominal ";
  line += p.rate_gbit > 0 ? fixed(p.rate_gbit, 0) + " Gb/s" : std::string("unshaped bandwidth");
  line += p.delay_us > 0 ? ", " + fixed(p.delay_us, 0) + " us" : std::string(", no added delay");
  if (p.delay_us > 0 && !latency_shaped) line += " (latency not shaped: this kernel has no netem qdisc)";
  return line;
}

std::string measure_and_record(const std::vector<Host>& hosts, const std::string& profile, bool latency_shaped,
                               const std::filesystem::path& dir) {
  if (hosts.size() < 2) return "not measured: one host has no link to another";
  const std::string line = measured_line(measure_link(hosts[0], hosts[1]), link_profile(profile), latency_shaped);
  std::ofstream(dir / "measured") << line << '\n';
  return line;
}

}  // namespace

int run_hosts(const CLI::App& sub, const HostsCmdOptions& o) {
  if (sub.got_subcommand("down")) {
    const int n = reap_fixtures(true, &std::cout);
    std::cout << "hosts: " << n << " fixture(s) removed\n";
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
      std::string measured = r.measured;
      if (o.measure) {
        std::ifstream info(r.dir / "info");
        bool shaped = false;
        for (std::string k; info >> k;)
          if (k == "latency_shaped") info >> shaped;
        measured = measure_and_record(r.hosts, r.profile, shaped, r.dir);
      }
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
    if (f.profile().delay_us > 0 && !f.latency_shaped())
      std::cout << "  latency is not shaped: this kernel has no netem qdisc (bandwidth is, with tbf)\n";
    if (o.measure)
      std::cout << "  link " << measure_and_record(f.hosts(), f.profile().name, f.latency_shaped(), f.state_dir())
                << '\n';
    std::cout << "hostfile: " << f.hostfile() << "\nlaunch environment (export it, then pass --hostfile):\n";
    for (const auto& [k, v] : f.launch_env()) std::cout << "  export " << k << "=" << shell_quote(v) << '\n';
    std::cout << "e.g. trainbench test --suite collectives --hostfile " << f.hostfile()
              << "\nremove with: trainbench hosts down\n";
    return 0;
  } catch (const HostsUnavailable& e) {
    std::cerr << "trainbench hosts: cannot make hosts here: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace tb::harness
