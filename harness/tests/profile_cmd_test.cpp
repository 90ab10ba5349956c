// `trainbench profile` as users run it: the built command in a child process. At world 2 (MPI,
// DDP) the merged trace has a process lane per rank with the collectives in it, the table and
// the step breakdown are printed, and the result file holds the breakdown record; under
// --autocast bfloat16 the casts are op events and the record names the recipe; bad input is a
// usage error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/subprocess.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

tb::harness::SubprocessResult trainbench(std::vector<std::string> args) {
  tb::harness::SubprocessSpec spec;
  args.insert(args.begin(), TB_TRAINBENCH);
  spec.argv = std::move(args);
  spec.timeout = std::chrono::seconds(150);
  return tb::harness::run_subprocess(spec);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ProfileCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("tb_profile_cli_" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(dir); }
};

TEST_F(ProfileCli, MlpAtWorldTwoHasARankLaneEachWithCollectives) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not found";
  const auto res = trainbench(
      {"profile", "--model", "mlp", "--steps", "2", "--warmup", "1", "--world", "2", "--out", dir.string()});
  ASSERT_EQ(res.exit_code, 0) << res.out << res.err;
  EXPECT_TRUE(has(res.out, "Top ops by self time")) << res.out;
  EXPECT_TRUE(has(res.out, "adamw.step")) << res.out;
  EXPECT_TRUE(has(res.out, "Step breakdown")) << res.out;
  EXPECT_TRUE(has(res.out, "all_reduce [ddp/bucket 0 (")) << "collectives by op and label: " << res.out;

  std::ifstream f(dir / "trace.json");
  const json trace = json::parse(f);
  std::map<int, std::set<std::string>> cats;  // pid -> categories of its complete events
  std::set<int> named;
  int steps = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") {
      if (e.at("name") == "process_name") named.insert(e.at("pid").get<int>());
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X");
    cats[e.at("pid").get<int>()].insert(e.at("cat").get<std::string>());
    if (e.at("cat") == "collective") {  // DDP's bucket all-reduces, with their call site
      EXPECT_GT(e.at("args").at("bytes").get<int64_t>(), 0);
      EXPECT_EQ(e.at("args").at("label").get<std::string>().rfind("ddp/bucket ", 0), 0u) << e.dump();
    }
    if (e.at("cat") == "step") ++steps;
  }
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  ASSERT_EQ(cats.size(), 2u);
  for (auto& [pid, c] : cats)
    for (const char* want : {"op", "backward", "optimizer", "collective", "data", "step"})
      EXPECT_TRUE(c.count(want)) << "rank " << pid << " has no " << want << " event";
  EXPECT_EQ(steps, 4);  // 2 recorded steps on each rank

  std::ifstream r(dir / "profile.json");
  const json result = json::parse(r);
  ASSERT_EQ(result.at("records").size(), 1u);
  const json& rec = result["records"][0];
  EXPECT_EQ(rec.at("suite"), "profile");
  EXPECT_EQ(rec.at("case"), "mlp/w2");
  const json& m = rec.at("metrics");
  EXPECT_GT(m.at("step_ms").get<double>(), 0);
  EXPECT_GT(m.at("communication_ms").get<double>(), 0);
  // Each rank's threads: the cores shared out among the ranks, at least one.
  EXPECT_EQ(m.at("threads").get<int>(), std::max(1, int(std::max(1u, std::thread::hardware_concurrency())) / 2));
  const double parts = m.at("forward_ms").get<double>() + m.at("backward_ms").get<double>() +
                       m.at("optimizer_ms").get<double>() + m.at("data_ms").get<double>() +
                       m.at("other_ms").get<double>();
  EXPECT_NEAR(parts, m.at("step_ms").get<double>(), 1e-6 * m.at("step_ms").get<double>() + 1e-9);
}

TEST_F(ProfileCli, AutocastProfilesTheBfloat16Step) {
  const auto res = trainbench({"profile", "--model", "mlp", "--steps", "2", "--warmup", "1", "--autocast", "bfloat16",
                               "--threads", "3", "--out", dir.string()});
  ASSERT_EQ(res.exit_code, 0) << res.out << res.err;
  EXPECT_TRUE(has(res.out, "mlp under bfloat16 autocast, world 1")) << res.out;
  EXPECT_TRUE(has(res.out, "3 engine threads")) << "--threads reaches the engine: " << res.out;
  std::ifstream f(dir / "trace.json");
  const json trace = json::parse(f);
  // float32 tensors cast to bfloat16 in the two recorded steps: the input batch (256, 784) in each;
  // the weights and biases not at all, as the warm-up step's AdamW wrote their bfloat16 copies
  // (Note [Autocast weight shadows] in engine/autograd/autocast.h).
  const json weight_shapes = json::array({json::array({1024, 784}), json::array({1024}), json::array({1024, 1024}),
                                          json::array({10, 1024}), json::array({10})});
  int input_casts = 0, weight_casts = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("name") != "to" || e.at("args").at("input_dtypes") != json::array({"float32"}))
      continue;
    const json& shape = e.at("args").at("input_shapes").at(0);
    if (shape == json::array({256, 784})) ++input_casts;
    for (const json& w : weight_shapes) weight_casts += shape == w;
  }
  EXPECT_EQ(input_casts, 2) << "autocast's casts are op events";
  EXPECT_EQ(weight_casts, 0) << "a weight was cast again instead of taken from its shadow";
  std::ifstream r(dir / "profile.json");
  const json result = json::parse(r);
  EXPECT_EQ(result.at("records").at(0).at("case"), "mlp/bfloat16/w1");
  EXPECT_EQ(result.at("records").at(0).at("metrics").at("threads"), 3);
  auto bad = trainbench({"profile", "--autocast", "float8"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
}

TEST_F(ProfileCli, BadInputIsAUsageError) {
  auto res = trainbench({"profile", "--model", "resnet"});
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
  res = trainbench({"profile", "--steps", "0"});
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
  res = trainbench({"profile", "--threads", "0"});
  EXPECT_EQ(res.exit_code, 2) << res.out << res.err;
}

}  // namespace
