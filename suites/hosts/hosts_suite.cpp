// The hosts suite's correctness cases (hosts_suite.h); the benchmarks are in hosts_bench.cpp.
#include "suites/hosts/hosts_suite.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "engine/dist/process_group.h"
#include "engine/tensor/factories.h"
#include "harness/delay_line.h"
#include "harness/distributed.h"
#include "harness/hosts.h"
#include "harness/launcher.h"
#include "harness/subprocess.h"
#include "suites/hosts/hosts_util.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace fs = std::filesystem;
using harness::HostsFixture;

namespace {

// Names of this machine's network namespaces and links that belong to fixture `id`.
std::vector<std::string> leftovers(int id) {
  const std::string prefix = "tb" + std::to_string(id);
  std::vector<std::string> left;
  std::error_code ec;
  for (const char* dir : {"/run/netns", "/sys/class/net"})
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      // tb<id>h<k> and tb<id>br, not tb<id><digit>... of another fixture
      if (n.rfind(prefix, 0) == 0 && n.size() > prefix.size() && (n[prefix.size()] == 'h' || n[prefix.size()] == 'b'))
        left.push_back(std::string(dir) + "/" + n);
    }
  return left;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

harness::TestCase fixture_case() {
  return recorded_case(
      "hosts", "fixture/2x2",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        const auto t0 = std::chrono::steady_clock::now();
        std::optional<HostsFixture> f = HostsFixture::up({2, 2, "unshaped", false});
        rec.metrics["up_s"] = seconds_since(t0);
        const int id = f->id();
        for (int h = 0; h < 2; ++h) {
          const harness::Host& me = f->hosts()[std::size_t(h)];
          const harness::Host& other = f->hosts()[std::size_t(1 - h)];
          std::vector<std::string> argv = f->exec_prefix(h);
          for (const char* a :
               {"sh", "-c", "hostname; getent hosts \"$0\"; ip -4 -o addr show dev eth0; ip -o link show lo"})
            argv.push_back(a);
          argv.push_back(other.name);
          const std::string out = run_capture(argv);
          check(out.rfind(me.name + "\n", 0) == 0, me.name + ": hostname inside is not its name: " + out);
          check(out.find(other.address + " ") != std::string::npos ||
                    out.find(other.address + "\t") != std::string::npos,
                me.name + " does not resolve " + other.name + " to " + other.address + ": " + out);
          check(out.find("inet " + me.address + "/24") != std::string::npos,
                me.name + ": eth0 lacks its address: " + out);
          check(out.find("UP") != std::string::npos, me.name + ": loopback not up: " + out);
        }
        const harness::LinkMeasurement m = f->measure_link(0, 1);
        rec.metrics["rtt_us"] = m.rtt_us;
        rec.metrics["bandwidth_gbit"] = m.bandwidth_gbit;
        check(m.rtt_us > 0 && m.bandwidth_gbit > 0, "the TCP probe between the hosts measured nothing");
        const fs::path dir = f->state_dir();
        const auto t1 = std::chrono::steady_clock::now();
        f.reset();  // tear-down
        rec.metrics["down_s"] = seconds_since(t1);
        check(leftovers(id).empty(), "left behind after down: " + joined(leftovers(id)));
        check(!fs::exists(dir), "the state folder " + dir.string() + " is still there");
      },
      false);
}

// A profile's one-way delay between two hosts, however it is shaped here (netem, or the NFQUEUE
// delay line: Note [The delay line] in harness/hosts.cpp). The TCP probe's one-way latency (half
// the median round trip) can never be below the delay a working shaper adds, so at least 0.95 x
// nominal fails when shaping is off; at most 2 x nominal + 1 ms (the machine is shared and every
// host's wake-ups wait for its 2 cores). The stream stays within the tbf rate, a host's own
// loopback is not delayed (checked at 200 us), and tear-down leaves no delay line process,
// namespace or rule.
harness::TestCase latency_case(const std::string& profile) {
  return recorded_case(
      "hosts", "fixture/latency/" + profile,
      [profile](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        std::optional<HostsFixture> f = HostsFixture::up({2, 1, profile, false});
        const harness::LinkProfile& p = f->profile();
        rec.metrics["latency_shaping"] = harness::latency_shaping_name(f->latency_shaping());
        if (!f->latency_shaped()) {
          rec.status = harness::Status::Skip;
          rec.message = "latency " + f->latency_note();
          return;
        }
        const std::vector<int> pids = f->delay_line_pids();
        if (f->latency_shaping() == harness::LatencyShaping::DelayLine) {
          check(pids.size() == 2, "expected a delay line per host, found " + std::to_string(pids.size()));
          for (int h = 0; h < 2; ++h) {
            const std::string name = f->hosts()[std::size_t(h)].name;
            const std::string inside = run_capture({"ip", "netns", "pids", name});
            std::istringstream is(inside);
            bool found = false;
            for (int pid = 0; is >> pid;) found = found || pid == pids[std::size_t(h)];
            check(found, name + ": its delay line (pid " + std::to_string(pids[std::size_t(h)]) +
                             ") is not inside it: " + inside);
            const std::string rules = run_capture({"ip", "netns", "exec", name, "iptables", "-w", "-S", "OUTPUT"});
            check(rules.find("-o eth0 -j NFQUEUE") != std::string::npos, name + ": no NFQUEUE rule: " + rules);
          }
        }
        const double cpu0 = harness::process_cpu_seconds(pids);
        const harness::LinkMeasurement m = f->measure_link(0, 1);
        rec.metrics["delay_line_cpu_s"] = harness::process_cpu_seconds(pids) - cpu0;
        const harness::LinkMeasurement lo = f->measure_link(0, 0);
        rec.metrics["nominal_delay_us"] = p.delay_us;
        rec.metrics["latency_us"] = m.latency_us;
        rec.metrics["bandwidth_gbit"] = m.bandwidth_gbit;
        rec.metrics["loopback_latency_us"] = lo.latency_us;
        check(m.latency_us >= 0.95 * p.delay_us, "one way " + std::to_string(m.latency_us) +
                                                     " us is below 0.95 x the " + std::to_string(p.delay_us) +
                                                     " us delay: not shaped");
        check(m.latency_us <= 2 * p.delay_us + 1000,
              "one way " + std::to_string(m.latency_us) + " us is above 2 x nominal + 1 ms");
        check(m.bandwidth_gbit <= 1.05 * p.rate_gbit,
              std::to_string(m.bandwidth_gbit) + " Gb/s is above the tbf rate of " + std::to_string(p.rate_gbit));
        // Only where the delay stands well above the load's noise (loopback took 8-30 us here at load 5).
        if (p.delay_us >= 100)
          check(lo.latency_us < 0.5 * p.delay_us,
                "a host's own loopback is delayed: " + std::to_string(lo.latency_us) + " us one way");
        const int id = f->id();
        f.reset();
        for (int pid : pids)
          check(::kill(pid, 0) != 0, "delay line " + std::to_string(pid) + " is still there after down");
        check(leftovers(id).empty(), "left behind after down: " + joined(leftovers(id)));
      },
      false);
}

// A fixture whose owner is SIGKILLed is torn down by the next reap (any up, down or status),
// with its delay lines where latency is shaped by them (a delayed profile, for that).
harness::TestCase reap_case() {
  return recorded_case(
      "hosts", "fixture/killed_owner_reaped",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        int p[2];
        check(::pipe(p) == 0, "pipe failed");
        const pid_t child = ::fork();
        if (child == 0) {
          ::close(p[0]);
          int id = -1;
          try {
            HostsFixture f = HostsFixture::up({2, 1, "1g-200us", false});
            id = f.id();
            ::write(p[1], &id, sizeof id);
            ::raise(SIGKILL);  // no destructor runs
          } catch (...) {
          }
          ::write(p[1], &id, sizeof id);
          ::_exit(1);
        }
        ::close(p[1]);
        int id = -1;
        const bool got = ::read(p[0], &id, sizeof id) == sizeof id;
        ::close(p[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        check(got && id >= 0, "the child could not bring hosts up");
        check(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child was not killed");
        check(!leftovers(id).empty(), "the killed owner's hosts vanished before any reap");
        std::vector<int> lines;  // the delay lines' pids, from the state folder
        for (const harness::FixtureRecord& r : harness::list_fixtures())
          if (r.id == id) lines = r.delay_line_pids;
        rec.metrics["delay_lines"] = int(lines.size());
        const int reaped = harness::reap_fixtures(false, nullptr);
        rec.metrics["reaped"] = reaped;
        check(reaped >= 1, "reap_fixtures removed nothing");
        check(leftovers(id).empty(), "left behind after the reap: " + joined(leftovers(id)));
        check(!fs::exists(harness::hosts_state_root() / std::to_string(id)), "the state folder is still there");
        // Ended: gone, or a zombie. Its parent (the killed owner) is gone, so init holds its exit
        // status, and this machine's init (a sandbox's process_api) can take seconds to reap it.
        for (int pid : lines)
          check(!harness::process_running(pid),
                "delay line " + std::to_string(pid) + " is still running after the reap");
      },
      false);
}

// A namespace named like the next fixture's second host, someone else's (with a process in it):
// the fixture takes another id, and neither its up nor its down touches that namespace or process.
harness::TestCase names_in_use_case() {
  return recorded_case(
      "hosts", "fixture/names_in_use_left_alone",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        int id = 0;  // the id the next fixture would take, were its names free
        while (fs::exists(harness::hosts_state_root() / std::to_string(id)) ||
               fs::exists("/sys/class/net/tb" + std::to_string(id) + "br"))
          ++id;
        const std::string theirs = "tb" + std::to_string(id) + "h2";
        run_capture({"ip", "netns", "add", theirs});
        harness::SubprocessSpec sleeper;
        sleeper.argv = {"ip", "netns", "exec", theirs, "sleep", "60"};
        sleeper.timeout = std::chrono::seconds(90);
        std::thread inside([&] { harness::run_subprocess(sleeper); });
        struct Cleanup {  // theirs goes however the case ends (the last case checks for strays)
          std::string name;
          std::thread& t;
          ~Cleanup() {
            harness::SubprocessSpec k;
            k.argv = {"ip", "netns", "pids", name};
            k.timeout = std::chrono::seconds(20);
            std::istringstream pids(harness::run_subprocess(k).out);
            for (int pid = 0; pids >> pid;) ::kill(pid, SIGKILL);
            t.join();
            k.argv = {"ip", "netns", "delete", name};
            harness::run_subprocess(k);
          }
        } cleanup{theirs, inside};
        std::string pids;
        for (int i = 0; i < 100 && pids.empty(); ++i) {  // the sleep inside, once it has started
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          pids = run_capture({"ip", "netns", "pids", theirs});
        }
        check(!pids.empty(), "the process in " + theirs + " did not start");
        std::optional<HostsFixture> f = HostsFixture::up({2, 1, "unshaped", false});
        rec.metrics["id_taken"] = f->id();
        check(f->id() != id, "the fixture took id " + std::to_string(id) + ", whose " + theirs + " is in use");
        f.reset();
        check(fs::exists("/run/netns/" + theirs), theirs + " was deleted");
        check(run_capture({"ip", "netns", "pids", theirs}) == pids, "the process in " + theirs + " was killed");
      },
      false);
}

// `trainbench hosts down` that cannot delete (no CAP_NET_ADMIN / CAP_SYS_ADMIN) fails, and keeps
// the fixture recorded, so a later down removes it. In a state folder of the case's own, so no one
// else's fixture is touched.
harness::TestCase down_fails_case() {
  return recorded_case(
      "hosts", "fixture/down_that_fails_keeps_state",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        if (std::system("command -v setpriv > /dev/null 2>&1") != 0) {
          rec.status = harness::Status::Skip;
          rec.message = "setpriv (util-linux) not found";
          return;
        }
        const char* before = std::getenv("TRAINBENCH_HOSTS_DIR");
        const std::string saved = before ? before : "";
        const fs::path root = fresh_run_dir("hosts_down_fails");
        ::setenv("TRAINBENCH_HOSTS_DIR", root.c_str(), 1);
        struct Restore {
          bool had;
          std::string value;
          ~Restore() {
            harness::reap_fixtures(true, nullptr);
            if (had) ::setenv("TRAINBENCH_HOSTS_DIR", value.c_str(), 1);
            else ::unsetenv("TRAINBENCH_HOSTS_DIR");
          }
        } restore{before != nullptr, saved};
        HostsFixture f = HostsFixture::up({2, 1, "unshaped", true});  // persistent, as `hosts up` makes it
        f.detach();
        const int id = f.id();
        harness::SubprocessSpec down;
        down.argv = {"setpriv",           "--inh-caps=-all", "--bounding-set=-net_admin,-sys_admin",
                     harness::self_exe(), "hosts",           "down"};
        down.timeout = std::chrono::seconds(60);
        const harness::SubprocessResult r = harness::run_subprocess(down);
        rec.metrics["down_exit_code"] = r.exit_code;
        check(r.exit_code == 1,
              "down without the capabilities exited " + std::to_string(r.exit_code) + ": " + r.out + r.err);
        check(r.out.find("could not remove") != std::string::npos,
              "down did not say what it could not remove: " + r.out);
        check(!leftovers(id).empty(), "the hosts vanished");
        bool listed = false;
        for (const harness::FixtureRecord& x : harness::list_fixtures()) listed = listed || x.id == id;
        check(listed, "the fixture was forgotten while its hosts are up");
        check(harness::reap_fixtures(true, nullptr) == 1, "the second down did not remove it");
        check(leftovers(id).empty(), "left behind after the second down: " + joined(leftovers(id)));
      },
      false);
}

// TRAINBENCH_*, NCCL_* and OMPI_* variables set in the launcher's environment reach every rank on
// every host, and each rank runs on the host the hostfile's slots put it on.
harness::TestCase forwarding_case() {
  return recorded_case(
      "hosts", "forwarding/2x2",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        HostsFixture f = HostsFixture::up({2, 2, "unshaped", false});
        const std::string tag = std::to_string(::getpid());
        const std::map<std::string, std::string> vars = {{"TRAINBENCH_HOSTS_FORWARD_CHECK", "tb-" + tag},
                                                         {"NCCL_TB_HOSTS_FORWARD_CHECK", "nccl-" + tag},
                                                         {"OMPI_TB_HOSTS_FORWARD_CHECK", "ompi-" + tag}};
        for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
        harness::LaunchSpec spec;
        spec.ranks = 4;
        spec.run_dir = fresh_run_dir("forwarding");
        spec.timeout = std::chrono::seconds(60);
        f.apply(spec);
        spec.argv = {"/bin/sh", "-c",
                     "echo \"host=$(hostname) rank=$OMPI_COMM_WORLD_RANK tb=$TRAINBENCH_HOSTS_FORWARD_CHECK "
                     "nccl=$NCCL_TB_HOSTS_FORWARD_CHECK ompi=$OMPI_TB_HOSTS_FORWARD_CHECK\""};
        const harness::LaunchResult res = harness::launch(spec);
        for (const auto& [k, v] : vars) ::unsetenv(k.c_str());
        check(res.ok(), "the launch across hosts failed: " + res.diagnosis());
        for (int r = 0; r < 4; ++r) {
          const std::string want = "host=" + f.host_of(r).name + " rank=" + std::to_string(r) + " tb=tb-" + tag +
                                   " nccl=nccl-" + tag + " ompi=ompi-" + tag;
          check(res.rank_output[std::size_t(r)].find(want) != std::string::npos,
                "rank " + std::to_string(r) + " printed '" + res.rank_output[std::size_t(r)] + "', expected '" + want +
                    "'");
        }
        check(res.orphans == 0, std::to_string(res.orphans) + " orphan process(es)");
        fs::remove_all(spec.run_dir);
      },
      false);
}

// Cases of another distributed suite, at 2 hosts x 2 ranks: one record with the counts.
harness::TestCase across_hosts_case(const std::string& name, const std::string& suite, const std::string& filter) {
  return recorded_case(
      "hosts", name,
      [suite, filter](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        HostsFixture f = HostsFixture::up({2, 2, "unshaped", false});
        const std::vector<harness::Record> recs = run_suite_on_hosts(f, suite, filter, /*benches=*/false);
        summarize_inner(rec, recs);
      },
      false);
}

// Note [A host failing]
// 2 hosts x 2 ranks all_reduce in a loop (hosts_demo_main) with a collective timeout of 5 s; once
// every rank has done a few, the second host fails: its ranks are SIGKILLed, or its link is set
// down (both ends of its veth pair) so its ranks live on but nothing reaches them. The survivors
// must end within the timeout + 15 s, and the launch's diagnosis (HostsFixture::diagnose) must
// name the host and exactly its ranks.
harness::TestCase host_failure_case(const std::string& backend, const std::string& how) {
  return recorded_case(
      "hosts", "host_failure/" + backend + "/" + how + "/2x2",
      [backend, how](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        constexpr double kTimeout = 5, kSlack = 15;
        HostsFixture f = HostsFixture::up({2, 2, "unshaped", false});
        harness::LaunchSpec spec;
        spec.ranks = 4;
        spec.run_dir = fresh_run_dir("host_failure_" + backend + "_" + how);
        spec.timeout = std::chrono::seconds(120);
        f.apply(spec);
        spec.env["TRAINBENCH_HOSTS_DEMO"] = backend;
        spec.env["TRAINBENCH_DIST_TIMEOUT"] = "5";
        spec.argv = {harness::self_exe(), "list"};  // register_all runs the demo before the CLI
        harness::LaunchResult res;
        std::thread runner([&] { res = harness::launch(spec); });
        bool ready = false;
        for (int i = 0; i < 600 && !ready; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          ready = true;
          for (int r = 0; r < 4; ++r)
            ready = ready && fs::exists(spec.run_dir / ("hosts_demo_rank" + std::to_string(r) + ".ready"));
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (ready) {
          if (how == "link_down") {
            f.set_link(1, false);
          } else {
            for (int r = 2; r < 4; ++r) {
              std::ifstream in(spec.run_dir / ("hosts_demo_rank" + std::to_string(r) + ".pid"));
              long pid = 0;
              if (in >> pid && pid > 1) ::kill(pid_t(pid), SIGKILL);
            }
          }
        }
        runner.join();
        const double s = seconds_since(t0);
        rec.metrics["seconds_to_end"] = s;
        const std::string why = f.diagnose(res);
        rec.message = why;
        check(ready, "the ranks never all reached their loop: " + res.diagnosis());
        check(!res.ok(), "the job succeeded although a host failed");
        check(s <= kTimeout + kSlack, "the survivors took " + std::to_string(s) + " s to end (limit " +
                                          std::to_string(kTimeout + kSlack) + " s): " + res.diagnosis());
        const std::string want = "host " + f.hosts()[1].name + " (ranks 2, 3)";
        check(why.find(want) != std::string::npos, "the diagnosis does not name '" + want + "': " + why);
        check(why.find(f.hosts()[0].name + " (") == std::string::npos,
              "the diagnosis blames the healthy host too: " + why);
        check(res.orphans == 0, std::to_string(res.orphans) + " orphan process(es)");
        fs::remove_all(spec.run_dir);
      },
      false);
}

// Last: nothing of this run's fixtures is left, and no namespace or link of the fixtures' names
// exists without a live fixture recording it.
harness::TestCase nothing_left_case() {
  return recorded_case(
      "hosts", "cleanup/nothing_left",
      [](harness::Record& rec) {
        if (skip_without_hosts(rec)) return;
        std::set<int> live;
        for (const harness::FixtureRecord& f : harness::list_fixtures()) {
          check(f.owner_pid != int(::getpid()), "fixture " + std::to_string(f.id) + " of this run is still up");
          live.insert(f.id);
        }
        static const std::regex ours(R"(^tb(\d+)(h\d+|br)$)");
        std::vector<std::string> stray;
        std::error_code ec;
        for (const char* dir : {"/run/netns", "/sys/class/net"})
          for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string n = it->path().filename().string();
            std::smatch m;
            if (std::regex_match(n, m, ours) && !live.count(std::stoi(m[1])))
              stray.push_back(std::string(dir) + "/" + n);
          }
        rec.metrics["fixtures_up"] = int(live.size());
        check(stray.empty(), "namespaces or links of no recorded fixture: " + joined(stray));
      },
      false);
}

}  // namespace

int hosts_demo_main(const std::string& backend) {
  dist::Options opt;
  opt.timeout = std::chrono::seconds(60);  // TRAINBENCH_DIST_TIMEOUT overrides
  std::shared_ptr<dist::ProcessGroup> pg = dist::new_group(backend, opt);
  const int r = pg->rank();
  const char* dir = std::getenv("TRAINBENCH_DIST_DIR");
  const fs::path run_dir = dir ? dir : ".";
  std::ofstream(run_dir / ("hosts_demo_rank" + std::to_string(r) + ".pid")) << ::getpid() << '\n';
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int i = 1; std::chrono::steady_clock::now() < until; ++i) {
    Tensor t = full({1 << 16}, 1.0);
    pg->all_reduce(t)->wait();
    if (i == 5) std::ofstream(run_dir / ("hosts_demo_rank" + std::to_string(r) + ".ready")) << i << '\n';
  }
  std::fprintf(stderr, "trainbench: hosts demo: rank %d looped for 120 s without a failure\n", r);
  return 5;
}

std::vector<harness::TestCase> hosts_tests() {
  std::vector<harness::TestCase> out = {fixture_case(),   latency_case("10g-50us"), latency_case("1g-200us"),
                                        reap_case(),      names_in_use_case(),      down_fails_case(),
                                        forwarding_case()};
  // A short set (the ctest's) and everything of each suite at world 4 on both CPU backends.
  out.push_back(across_hosts_case(
      "collectives/quick/2x2", "collectives",
      "^(mpi|gloo)/(all_reduce/sum/float32/n(1|1001|65537)/|broadcast/float32/|all_gather/float32/|reduce_scatter/sum/"
      "float32/|barrier|send_recv)"));
  out.push_back(across_hosts_case("collectives/all/2x2", "collectives", "^(mpi|gloo)/"));
  out.push_back(across_hosts_case("ddp/equivalence/2x2", "ddp", "^(mpi|gloo)/equivalence/"));
  out.push_back(across_hosts_case("ddp/all/2x2", "ddp", "^(mpi|gloo)/"));
  out.push_back(across_hosts_case("fsdp/all/2x2", "fsdp", "^(mpi|gloo)/"));
  out.push_back(across_hosts_case("dcp/all/2x2", "dcp", "."));
  for (harness::TestCase& t : hosts_dcp_tests()) out.push_back(std::move(t));
  for (const std::string backend : {"mpi", "gloo"})
    for (const std::string how : {"ranks_killed", "link_down"}) out.push_back(host_failure_case(backend, how));
  out.push_back(nothing_left_case());
  return out;
}

}  // namespace tb::suites
