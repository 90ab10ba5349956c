// Note [Watchdog check]
// World sizes 2 and 3 on each CPU backend: every rank runs a few all_reduces; rank 1 skips
// all_reduce #4 and then sleeps past the timeout (suites/collectives: watchdog_demo_main). The other ranks' watchdogs (timeout 3 s)
// must fire: the launch must end long before its own deadline, with a non-zero status, and the
// diagnosis must name rank 1 and #4. When the first watchdog exits, mpirun kills the remaining
// ranks, possibly before their own watchdog speaks, so at least one waiting rank must print the
// diagnosis and every rank that prints one must name the right rank and sequence number.
#include "suites/collectives/watchdog_launch.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "harness/launcher.h"
#include "suites/collectives/collectives_suite.h"
#include "suites/recorded.h"

namespace tb::suites {

namespace fs = std::filesystem;

int watchdog_demo_from_env(const char* spec) {
  // mismatch:BACKEND | sigterm:BACKEND:PHASE | dead:BACKEND:HOW:SKIP_RANK:SEQ | BACKEND:SKIP_RANK:SEQ,
  // written by the cases below; numbers are parsed strictly (core/env.h).
  const char* var = "TRAINBENCH_WATCHDOG_DEMO";
  std::vector<std::string> f;
  std::istringstream is(spec);
  for (std::string part; std::getline(is, part, ':');) f.push_back(part);
  auto number = [&](size_t i, int64_t hi) {
    if (i >= f.size()) throw core::Error(var, "'" + std::string(spec) + "' is missing field " + std::to_string(i + 1));
    return int(core::parse_int64(var, f[i], 0, hi));
  };
  if (f.empty()) throw core::Error(var, "empty value; expected e.g. mpi:1:4");
  if (f[0] == "mismatch" && f.size() == 2) return mismatch_demo_main(f[1]);
  if (f[0] == "sigterm" && f.size() == 3) return sigterm_demo_main(f[1], f[2]);
  if (f[0] == "dead" && f.size() == 5) return dead_rank_demo_main(f[1], f[2], number(3, 1 << 20), number(4, INT32_MAX));
  if (f.size() != 3)
    throw core::Error(var, "'" + std::string(spec) +
                               "' is not BACKEND:SKIP_RANK:SEQ (e.g. mpi:1:4), mismatch:BACKEND, "
                               "sigterm:BACKEND:PHASE or dead:BACKEND:HOW:SKIP_RANK:SEQ");
  return watchdog_demo_main(f[0], number(1, 1 << 20), number(2, INT32_MAX));
}

std::vector<harness::TestCase> watchdog_tests() {
  std::vector<harness::TestCase> out;
  for (const std::string backend : {"mpi", "gloo"}) {
    for (int world : {2, 3}) {
      const std::string name = "watchdog/" + backend + "/skipped_collective/w" + std::to_string(world);
      out.push_back(recorded_case(
          "collectives", name,
          [backend, world](harness::Record& rec) {
            constexpr int kSkipRank = 1, kSeq = 4;
            constexpr double kTimeout = 3.0, kSlack = 20.0;  // slack: starting 3 LibTorch-linked ranks on 2 cores
            harness::LaunchSpec spec;
            spec.ranks = world;
            spec.run_dir = fs::temp_directory_path() /
                           ("tb_watchdog_" + backend + "_w" + std::to_string(world) + "_" + std::to_string(getpid()));
            fs::remove_all(spec.run_dir);
            spec.timeout = std::chrono::seconds(120);
            spec.env["TRAINBENCH_WATCHDOG_DEMO"] = backend + ":" + std::to_string(kSkipRank) + ":" +
                                                   std::to_string(kSeq);
            spec.env["TRAINBENCH_DIST_TIMEOUT"] = "3";
            spec.argv = {harness::self_exe(), "list"};  // register_all runs the demo before the CLI
            const harness::LaunchResult res = harness::launch(spec);
            rec.metrics["launch_seconds"] = res.seconds;
            rec.metrics["timeout_s"] = kTimeout;
            rec.tolerances["max_seconds"] = kTimeout + kSlack;
            const std::string all = res.diagnosis(40);
            if (backend == "gloo" && all.find("backend gloo not built") != std::string::npos) {
              rec.status = harness::Status::Skip;
              rec.message = "gloo backend not built";
              return;
            }
            check(!res.timed_out, "the ranks hung until the launch deadline: " + all);
            check(res.exit_code != 0, "the job exited 0 although a rank skipped a collective: " + all);
            check(res.seconds < kTimeout + kSlack, "the ranks took " + std::to_string(res.seconds) +
                                                       " s to exit (timeout " + std::to_string(kTimeout) +
                                                       " s): " + all);
            const std::string want = "rank " + std::to_string(kSkipRank) + " never arrived at #" + std::to_string(kSeq);
            int diagnosed = 0;
            for (int r = 0; r < world; ++r) {
              const std::string& o = res.rank_output[std::size_t(r)];
              const bool says = o.find("did not complete") != std::string::npos;  // the watchdog's line
              if (r == kSkipRank) {
                check(!says, "the rank that skipped claims a hang itself: " + o);
                continue;
              }
              if (!says) continue;  // killed by mpirun after another rank's watchdog exited first
              check(o.find(want) != std::string::npos,
                    "rank " + std::to_string(r) + "'s diagnosis does not say '" + want + "': " + o);
              ++diagnosed;
            }
            check(diagnosed >= 1, "no rank printed a watchdog diagnosis: " + all);
            rec.metrics["ranks_diagnosed"] = diagnosed;
            // The flight recorder dump of a diagnosing rank: JSON with the collective it was stuck in.
            bool dump_ok = false;
            for (const auto& e : fs::directory_iterator(spec.run_dir)) {
              const std::string f = e.path().filename().string();
              if (f.rfind("flight_recorder_rank", 0) != 0) continue;
              std::ifstream in(e.path());
              const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
              check(!j.is_discarded(), "the dump " + e.path().string() + " is not JSON");
              dump_ok = j.dump().find("all_reduce") != std::string::npos;
              if (dump_ok) break;
            }
            check(dump_ok, "no flight recorder dump naming the all_reduce in " + spec.run_dir.string());
            fs::remove_all(spec.run_dir);
          },
          /*with_seed=*/false));
    }
  }
  for (harness::TestCase& t : mismatch_tests()) out.push_back(std::move(t));
  for (harness::TestCase& t : dead_rank_tests()) out.push_back(std::move(t));
  for (harness::TestCase& t : sigterm_tests()) out.push_back(std::move(t));
  for (harness::TestCase& t : place_tests()) out.push_back(std::move(t));
  return out;
}

}  // namespace tb::suites
