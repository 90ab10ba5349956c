// `trainbench estimate` through the CLI's main (harness/cli.h), in process: the guide's figures in
// the table, the JSON record (and its schema, where the project's Python is), `--help`, and every
// bad input as a one-line usage error with exit status 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tests/scratch_dir.h"
#include "harness/cli.h"
#include "harness/tests/cli_run.h"

namespace {

namespace fs = std::filesystem;

using tb::harness::testing::CliRun;
using tb::harness::testing::run;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(EstimateCli, GuideDdp) {
  const CliRun r = run({"estimate", "--params", "7e9", "--world", "8", "--strategy", "ddp"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "7,000,000,000 parameters")) << r.out;
  // 4 + 4 + 8 bytes per parameter.
  EXPECT_TRUE(has(r.out, "112,000,000,000     112.000     104.308")) << r.out;
  EXPECT_TRUE(has(r.out, "gradient buckets (communication)")) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(EstimateCli, GuideFullShardOver8) {
  const CliRun r = run({"estimate", "--params", "7B", "--world", "8", "--strategy", "full_shard"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "each parameter split 8 ways")) << r.out;
  EXPECT_TRUE(has(r.out, "14,000,000,000      14.000      13.039")) << r.out;  // 112 GB / 8
  EXPECT_TRUE(has(r.out, "3,500,000,000       3.500       3.260")) << r.out;   // the fp32 shards
}

TEST(EstimateCli, OneBillionInBf16) {
  CliRun r = run({"estimate", "--params", "1e9", "--strategy", "ddp", "--param-dtype", "bf16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "parameters (bf16)")) << r.out;
  EXPECT_TRUE(has(r.out, "2,000,000,000       2.000       1.863")) << r.out;
  r = run({"estimate", "--params", "1e9", "--strategy", "ddp"});
  EXPECT_TRUE(has(r.out, "parameters (fp32)                                  4,000,000,000       4.000")) << r.out;
}

TEST(EstimateCli, GptWithActivationsToJson) {
  const tb::testing::ScratchDir dir("tb_estimate_");
  const fs::path json = dir / "estimate.json";
  const CliRun r = run({"estimate", "--model", "gpt", "--batch", "2", "--world", "8", "--strategy", "hybrid_shard",
                        "--shard-group", "4", "--json", json.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "30,080 parameters")) << r.out;
  EXPECT_TRUE(has(r.out, "4 ranks per shard group x 2 replicas")) << r.out;
  EXPECT_TRUE(has(r.out, "results: " + json.string())) << r.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["schema"], "trainbench.result/1");
  ASSERT_EQ(j["records"].size(), 1u);
  const nlohmann::json& rec = j["records"][0];
  EXPECT_EQ(rec["suite"], "estimate");
  EXPECT_EQ(rec["case"], "gpt/hybrid_shard/w8");
  EXPECT_EQ(rec["kind"], "estimate");
  EXPECT_EQ(rec["metrics"]["parameters"], 30080);
  EXPECT_EQ(rec["metrics"]["shard_group"], 4);
  // B 2, T 16: two blocks of 74,240 bytes and a root of 24,832 (engine/dist/tests/estimate_test.cpp).
  EXPECT_EQ(rec["metrics"]["activation_bytes"], 2 * 74240 + 24832);
  const std::string python = TB_TEST_PYTHON;
  if (!python.empty() && fs::exists(python)) {
    const std::string cmd = "'" + python + "' '" + TB_SOURCE_DIR + "/reports/tests/validate.py' '" + json.string() +
                            "' > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

TEST(EstimateCli, ListedInHelp) {
  CliRun r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "estimate")) << r.out;
  r = run({"estimate", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(has(r.out, "--shard-group")) << r.out;
}

// Each bad input: exit 2, one line on stderr that names the problem, nothing on stdout.
TEST(EstimateCli, BadInput) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"estimate"}, "give either --params N or --model gpt|mlp"},
      {{"estimate", "--params", "7e9", "--model", "gpt"}, "give either --params N or --model"},
      {{"estimate", "--params", "-5"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "0"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "1.5"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "lots"}, "(got 'lots')"},
      {{"estimate", "--params", "1e30"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "1e6", "--world", "0"}, "--world: must be at least 1 (got 0)"},
      {{"estimate", "--params", "1e6", "--world", "-2"}, "--world: must be at least 1 (got -2)"},
      {{"estimate", "--params", "1e6", "--strategy", "zero3"}, "unknown strategy 'zero3'"},
      {{"estimate", "--params", "1e6", "--world", "8", "--strategy", "hybrid_shard", "--shard-group", "3"},
       "--shard-group 3 does not divide --world 8"},
      {{"estimate", "--params", "1e6", "--world", "8", "--strategy", "hybrid_shard", "--shard-group", "0"},
       "--shard-group 0 does not divide --world 8"},
      {{"estimate", "--params", "1e6", "--world", "8", "--strategy", "hybrid_shard"}, "needs --shard-group"},
      {{"estimate", "--params", "1e6", "--world", "8", "--shard-group", "2"}, "only for --strategy hybrid_shard"},
      {{"estimate", "--params", "1e6", "--param-dtype", "int8"}, "--param-dtype: unknown dtype 'int8'"},
      {{"estimate", "--params", "1e6", "--optimizer", "lion"}, "unknown optimizer 'lion'"},
      {{"estimate", "--params", "1e6", "--layers", "4"}, "--layers describes a --model"},
      {{"estimate", "--params", "1e6", "--batch", "4"}, "--batch needs --model"},
      {{"estimate", "--params", "10", "--units", "11"}, "--units: at most the parameter count 10"},
      {{"estimate", "--model", "resnet"}, "unknown model 'resnet'"},
      {{"estimate", "--model", "gpt", "--hidden", "30", "--heads", "4"}, "not divisible by --heads 4"},
      {{"estimate", "--model", "gpt", "--layers", "-1"}, "--layers: must be positive (got -1)"},
      {{"estimate", "--model", "gpt", "--batch", "-1"}, "--batch: must not be negative"},
      {{"estimate", "--model", "mlp", "--vocab", "100"}, "--vocab does not apply to --model mlp"},
      {{"estimate", "--model", "gpt", "--world", "abc"}, "--world"},
      {{"estimate", "--params", "1e6", "--json", "/"}, "--json"},
      {{"estimate", "--params", "1e6", "--gradient-as-bucket-view"}, "is for --strategy ddp"},
      {{"estimate", "--params", "1e6", "--strategy", "ddp", "--reduce-dtype", "bf16"}, "for the FSDP strategies"},
      // Past int64 bytes: the estimator refuses it rather than wrapping around.
      {{"estimate", "--params", "4e18", "--strategy", "ddp"}, "past int64"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = run(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.code, 2) << line << "\n" << r.out << r.err;
    EXPECT_TRUE(has(r.err, message)) << line << ": stderr was: " << r.err;
    EXPECT_EQ(r.out, "") << line;
  }
}

}  // namespace
