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

// --params is parsed exactly, in integers: 2^53 + 1 is not a double's 2^53. The documented forms
// (plain, an exponent, a fraction with a suffix) give exact counts.
TEST(EstimateCli, ParamsAreExact) {
  const tb::testing::ScratchDir dir("tb_estimate_");
  const fs::path json = dir / "estimate.json";
  CliRun r = run({"estimate", "--params", "9007199254740993", "--strategy", "ddp", "--json", json.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "9,007,199,254,740,993 parameters")) << r.out;
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["records"][0]["metrics"]["parameters"].get<int64_t>(), 9007199254740993);
  EXPECT_EQ(j["records"][0]["case"], "params9007199254740993/ddp/w1");
  const std::vector<std::pair<std::string, std::string>> forms = {
      {"7e9", "7,000,000,000 parameters"},
      {"1.5B", "1,500,000,000 parameters"},
      {"125M", "125,000,000 parameters"},
      {"350k", "350,000 parameters"},
      {"2T", "2,000,000,000,000 parameters"},
      {"1.25E+3", "1,250 parameters"},
      {"150e-1", "15 parameters"},
      {"0.000001234567891234567e21", "1,234,567,891,234,567 parameters"},
      {"007", "7 parameters"},
  };
  for (const auto& [text, shown] : forms) {
    r = run({"estimate", "--params", text, "--strategy", "ddp", "--optimizer", "sgd"});
    EXPECT_EQ(r.code, 0) << text << ": " << r.err;
    EXPECT_TRUE(has(r.out, "model: " + shown)) << text << ": " << r.out;
  }
}

// Near int64 the figures are exact; past it any sum (here a phase's total) is an error rather than
// a wrapped total that loses to a smaller phase. One parameter at world 1: 4 B + 8 B of AdamW.
TEST(EstimateCli, PastInt64IsAnError) {
  const tb::testing::ScratchDir dir("tb_estimate_");
  const fs::path json = dir / "estimate.json";
  CliRun r = run({"estimate", "--params", "1", "--activation-bytes", "9223372036854775000", "--json", json.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  std::ifstream in(json);
  const nlohmann::json m = nlohmann::json::parse(in)["records"][0]["metrics"];
  EXPECT_EQ(m["peak_bytes"].get<int64_t>(), 9223372036854775012);
  EXPECT_EQ(m["peak_phase"], "forward");
  r = run({"estimate", "--params", "1", "--activation-bytes", "9223372036854775807", "--json", json.string() + "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "byte count past int64")) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(json.string() + "2"));
}

// A million units (the bound) in linear time: SHARD_GRAD_OP over 2 ranks, 1000 parameters per
// unit, a shard of 500 (2,000 B master and gradient, 4,000 B AdamW state) and 4,000 B gathered,
// unsharded and in the reduce buffer. The peak is the last unit's reduction: 2 GB of shards and
// 4 GB gathered, 4 GB of state, that unit's gradient and reduce buffer.
TEST(EstimateCli, AMillionUnits) {
  const tb::testing::ScratchDir dir("tb_estimate_");
  const fs::path json = dir / "estimate.json";
  const CliRun r = run({"estimate", "--params", "1e9", "--units", "1000000", "--world", "2", "--strategy",
                        "shard_grad_op", "--json", json.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "1,000,000,000 parameters (1000000 equal units)")) << r.out;
  std::ifstream in(json);
  const nlohmann::json m = nlohmann::json::parse(in)["records"][0]["metrics"];
  EXPECT_EQ(m["peak_bytes"].get<int64_t>(), 10'000'008'000);
  EXPECT_EQ(m["peak_phase"], "backward");
  EXPECT_EQ(m["forward_total_bytes"].get<int64_t>(), 10'000'000'000);
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
      {{"estimate", "--params", "9223372036854775807"}, "past int64"},
      {{"estimate", "--params", "1", "--activation-bytes", "9223372036854775807"}, "past int64"},
      {{"estimate", "--model", "gpt", "--hidden", "4611686018427387904", "--heads", "1"}, "past int64"},
      // Only the documented forms of --params, and only whole counts up to int64.
      {{"estimate", "--params", "0x10"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", " 5"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "5 "}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "+5"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "inf"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "5."}, "--params: expected a positive whole number"},
      {{"estimate", "--params", ".5k"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "1e3k"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "15e-1"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "1e-400"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "0.0001k"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "9223372036854775808"}, "--params: expected a positive whole number"},
      {{"estimate", "--params", "1e99999999999999999999"}, "--params: expected a positive whole number"},
      // The bounds on what sizes an allocation.
      {{"estimate", "--params", "1e9", "--units", "1000001"}, "--units: at most 1000000 (got 1000001)"},
      {{"estimate", "--params", "1e15", "--units", "1000000000000000"}, "--units: at most 1000000"},
      {{"estimate", "--model", "gpt", "--layers", "1000000000000"}, "--layers: at most 100000 (got 1000000000000)"},
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
