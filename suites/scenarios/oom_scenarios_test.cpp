// The OOM scenarios through the registry (harness/scenario.h): each passes, and each runs out of
// memory at the same step, phase, tag, op and request size for 10 seeds out of 10. This program
// is its own rank executable: launch_scenario_ranks relaunches it as `<this> scenario-rank NAME`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "harness/scenario.h"
#include "suites/scenarios/oom_scenarios.h"

namespace {

namespace fs = std::filesystem;
using tb::harness::Record;
using tb::harness::ScenarioContext;

constexpr int kSeeds = 10;

ScenarioContext context(int seed) {
  ScenarioContext ctx;
  ctx.seed = seed;
  ctx.timeout_s = 10;
  ctx.run_dir = fs::temp_directory_path() / ("tb_oom_test_" + std::to_string(getpid()) + "_" + std::to_string(seed));
  fs::remove_all(ctx.run_dir);
  return ctx;
}

Record run(const std::string& name, int seed) {
  const tb::harness::Scenario* sc = tb::harness::find_scenario(name);
  EXPECT_NE(sc, nullptr) << name;
  if (!sc) return {};
  const ScenarioContext ctx = context(seed);
  Record rec = sc->run(ctx);
  std::printf("%s seed %d (%.1f s)\n%s\n", name.c_str(), seed, rec.duration_s, rec.message.c_str());
  if (rec.status == tb::harness::Status::Pass) fs::remove_all(ctx.run_dir);
  return rec;
}

std::string signature(const Record& r) { return r.metrics.value("oom_signature", std::string("none")); }

class OomScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(OomScenario, DiagnosedAtTheSamePlaceForEverySeed) {
  const Record first = run(GetParam(), 0);
  ASSERT_EQ(first.status, tb::harness::Status::Pass) << first.message;
  EXPECT_EQ(first.kind, "scenario");
  EXPECT_EQ(first.metrics.value("orphans", -1), 0);
  EXPECT_GE(first.metrics.value("ranks_ended", 0), 1);
  EXPECT_GT(first.metrics.value("time_to_diagnosis_s", 0.0), 0.0);
  EXPECT_NE(signature(first), "no OOM");
  if (GetParam() == "oom/ddp_one_rank") {  // its OOM rank exits: one launch per seed
    for (int seed = 1; seed < 3; ++seed) {
      const Record again = run(GetParam(), seed);
      ASSERT_EQ(again.status, tb::harness::Status::Pass) << "seed " << seed << ": " << again.message;
      EXPECT_EQ(signature(again), signature(first)) << "seed " << seed;
    }
    return;
  }
  const ScenarioContext ctx = context(0);
  const std::vector<std::string> sigs = tb::suites::oom_fault_signatures(GetParam(), ctx, kSeeds);
  ASSERT_EQ(sigs.size(), size_t(kSeeds));
  for (int seed = 0; seed < kSeeds; ++seed) EXPECT_EQ(sigs[size_t(seed)], signature(first)) << "seed " << seed;
  fs::remove_all(ctx.run_dir);
}

INSTANTIATE_TEST_SUITE_P(All, OomScenario,
                         ::testing::Values("oom/batch_too_large", "oom/long_sequence_activations",
                                           "oom/optimizer_state_step1", "oom/fragmentation", "oom/leak",
                                           "oom/ddp_one_rank"),
                         [](const auto& info) { return info.param.substr(4); });

}  // namespace

int main(int argc, char** argv) {
  tb::suites::register_oom_scenarios();
  if (argc >= 3 && std::string(argv[1]) == "scenario-rank") {  // as `trainbench scenario-rank`
    ScenarioContext ctx;
    for (int i = 3; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--seed") ctx.seed = std::stoi(v);
      else if (k == "--backend") ctx.backend = v;
      else if (k == "--timeout") ctx.timeout_s = std::stod(v);
    }
    if (const char* dir = std::getenv("TRAINBENCH_DIST_DIR")) ctx.run_dir = dir;
    try {
      return tb::harness::scenario_rank_main(argv[2], ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scenario-rank %s: %s\n", argv[2], e.what());
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
