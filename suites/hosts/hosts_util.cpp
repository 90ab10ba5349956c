#include "suites/hosts/hosts_util.h"

#include <unistd.h>

#include <atomic>

#include "harness/distributed.h"
#include "harness/subprocess.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace fs = std::filesystem;

bool skip_without_hosts(harness::Record& rec) {
  const std::string why = harness::hosts_unavailable_reason();
  if (why.empty()) return false;
  rec.status = harness::Status::Skip;
  rec.message = "no hosts of our own here: " + why;
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string run_capture(const std::vector<std::string>& argv) {
  harness::SubprocessSpec s;
  s.argv = argv;
  s.timeout = std::chrono::seconds(20);
  s.output = harness::SubprocessSpec::Output::Merge;
  const harness::SubprocessResult r = harness::run_subprocess(s);
  if (!r.ok()) throw std::runtime_error("`" + harness::shell_join(argv) + "` " + r.describe() + ": " + r.out);
  return r.out;
}

fs::path fresh_run_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const fs::path d = fs::temp_directory_path() /
                     ("trainbench-hosts-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<harness::Record> run_suite_on_hosts(const harness::HostsFixture& f, const std::string& suite,
                                                const std::string& filter, bool benches, int world,
                                                const std::map<std::string, std::string>& env) {
  const harness::Suite* found = nullptr;
  for (const harness::Suite& s : harness::suites())
    if (s.name == suite) found = &s;
  if (!found) throw std::runtime_error("hosts: no suite named " + suite);
  harness::Suite s = *found;
  s.world_sizes = {world ? world : int(f.hosts().size()) * f.ranks_per_host()};
  s.peer = nullptr;  // the peer (PyTorch on one host) is not what runs across hosts
  harness::DistRunOptions o;
  o.filter = filter;
  o.tests = !benches;
  o.benches = benches;
  o.threads = 1;
  o.launch_timeout = std::chrono::seconds(900);
  o.hostfile = f.hostfile();
  o.env = f.launch_env();
  for (const auto& [k, v] : env) o.env[k] = v;
  o.work_dir = fresh_run_dir(suite);
  std::vector<harness::Record> out = harness::run_distributed(s, o, nullptr);
  bool ok = true;
  for (const harness::Record& r : out)
    ok = ok && (r.status == harness::Status::Pass || r.status == harness::Status::Skip);
  if (ok) fs::remove_all(o.work_dir);  // kept for a failure: rank logs and dumps
  return out;
}

void summarize_inner(harness::Record& rec, const std::vector<harness::Record>& inner) {
  int passed = 0, failed = 0, skipped = 0;
  std::string failures;
  for (const harness::Record& r : inner) {
    if (r.status == harness::Status::Pass) ++passed;
    else if (r.status == harness::Status::Skip) ++skipped;
    else {
      ++failed;
      if (failed <= 5)
        failures += "\n" + r.case_name + ": " + std::string(to_string(r.status)) + ": " + r.message.substr(0, 2000);
    }
  }
  rec.metrics["cases"] = int(inner.size());
  rec.metrics["passed"] = passed;
  rec.metrics["failed"] = failed;
  rec.metrics["skipped"] = skipped;
  check(failed == 0,
        std::to_string(failed) + " of " + std::to_string(inner.size()) + " case(s) failed across hosts:" + failures);
  check(passed > 0, "no case passed across hosts (" + std::to_string(inner.size()) + " ran, " +
                        std::to_string(skipped) + " skipped)");
}

}  // namespace tb::suites
