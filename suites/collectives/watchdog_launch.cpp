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
  // BACKEND:SKIP_RANK:SEQ, written by watchdog_tests below.
  const std::string s = spec;
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  if (b == std::string::npos)
    throw core::Error("TRAINBENCH_WATCHDOG_DEMO", "'" + s + "' is not BACKEND:SKIP_RANK:SEQ (e.g. mpi:1:4)");
  const int skip_rank = int(core::parse_int64("TRAINBENCH_WATCHDOG_DEMO", s.substr(a + 1, b - a - 1), 0, 1 << 20));
  const int seq = int(core::parse_int64("TRAINBENCH_WATCHDOG_DEMO", s.substr(b + 1), 0, INT32_MAX));
  return watchdog_demo_main(s.substr(0, a), skip_rank, seq);
}

std::vector<harness::TestCase> watchdog_tests() {
  std::vector<harness::TestCase> out;
  for (const std::string backend : {"mpi", "gloo"}) {
    for (int world : {2, 3}) {
      const std::string name = "watchdog/" + backend + "/skipped_collective/w" + std::to_string(world);
      out.push_back(recorded_case("collectives", name, [backend, world](harness::Record& rec) {
        constexpr int kSkipRank = 1, kSeq = 4;
        constexpr double kTimeout = 3.0, kSlack = 20.0;  // slack: starting 3 LibTorch-linked ranks on 2 cores
        harness::LaunchSpec spec;
        spec.ranks = world;
        spec.run_dir = fs::temp_directory_path() /
                       ("tb_watchdog_" + backend + "_w" + std::to_string(world) + "_" + std::to_string(getpid()));
        fs::remove_all(spec.run_dir);
        spec.timeout = std::chrono::seconds(120);
        spec.env["TRAINBENCH_WATCHDOG_DEMO"] = backend + ":" + std::to_string(kSkipRank) + ":" + std::to_string(kSeq);
        spec.env["TRAINBENCH_DIST_TIMEOUT"] = "3";
        spec.argv = {harness::self_exe(), "list"};  // register_all runs the demo before the CLI
        const harness::LaunchResult res = harness::launch(spec);
        rec.metrics["launch_seconds"] = res.seconds;
        rec.metrics["timeout_s"] = kTimeout;
        rec.tolerances["max_seconds"] = kTimeout + kSlack;
        const std::string all = res.diagnosis(40);
        if (backend == "gloo" && all.find("backend gloo not built") != std::string::npos) {
          rec.status = "skip";
          rec.message = "gloo backend not built";
          return;
        }
        check(!res.timed_out, "the ranks hung until the launch deadline: " + all);
        check(res.exit_code != 0, "the job exited 0 although a rank skipped a collective: " + all);
        check(res.seconds < kTimeout + kSlack, "the ranks took " + std::to_string(res.seconds) +
                                                   " s to exit (timeout " + std::to_string(kTimeout) + " s): " + all);
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
          check(o.find(want) != std::string::npos, "rank " + std::to_string(r) + "'s diagnosis does not say '" +
                                                       want + "': " + o);
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
      }, /*with_seed=*/false));
    }
  }
  return out;
}

}  // namespace tb::suites
