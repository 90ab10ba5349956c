// Collectives in a profile (engine/core/profiler.h) carry what the flight recorder knows of them:
// the call-site label (a user's CallSite, DDP's buckets), op, dtype, bytes and sequence numbers as
// event args, on the rank's lane; key_averages keeps one row per op and label. On a world of one
// in process (world_of_one.h), as the call-site tests in dist_debug_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/autograd/functions.h"
#include "engine/core/profiler.h"
#include "engine/core/rng.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/dist/call_site.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/nn/container.h"
#include "engine/nn/linear.h"
#include "engine/tensor/factories.h"

namespace tb::dist {
namespace {

namespace fs = std::filesystem;
using profiler::Category;

std::shared_ptr<ProcessGroup> world_of_one(const fs::path& dir) {
  Options o;
  o.run_dir = dir.string();
  o.watchdog = false;
  return std::make_shared<testing::WorldOfOne>(o);
}

std::vector<const profiler::Event*> collectives(const profiler::Trace& t) {
  std::vector<const profiler::Event*> out;
  for (const profiler::Event& e : t.events)
    if (e.cat == Category::Collective) out.push_back(&e);
  return out;
}

TEST(ProfileCollectives, CarryTheirCallSiteLabelAndTheRecordersFields) {
  const testing::ScratchDir dir("tb_dist_profile_");
  auto g = world_of_one(dir);
  Tensor t = zeros({4});  // float32: 16 bytes
  g->barrier()->wait();   // seq 1, before the profile
  profiler::Trace trace;
  {
    profiler::Profile p(profiler::Profile::Options{.rank = 5});
    {
      CallSite site("eval/accuracy");
      g->all_reduce(t)->wait();                  // seq 2
      g->all_reduce(t)->wait();                  // seq 3
      Tensor ids = zeros({2, 3}, DType::Int64);  // 48 bytes
      g->broadcast(ids, 0)->wait();              // seq 4
    }
    g->all_reduce(t)->wait();  // seq 5, no label
    trace = p.stop();
  }
  EXPECT_EQ(trace.rank, 5);
  const std::vector<const profiler::Event*> c = collectives(trace);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(std::string(c[0]->name), "all_reduce");
  EXPECT_EQ(c[0]->label, "eval/accuracy");
  EXPECT_EQ(c[2]->label, "eval/accuracy");
  EXPECT_EQ(c[3]->label, "");
  const nlohmann::json a0 = nlohmann::json::parse("{" + c[0]->args + "}");
  EXPECT_EQ(a0["op"], "all_reduce");
  EXPECT_EQ(a0["dtype"], "float32");
  EXPECT_EQ(a0["bytes"], 16);
  EXPECT_EQ(a0["seq"], 2);
  EXPECT_EQ(a0["collective_seq"], 2);
  const nlohmann::json a2 = nlohmann::json::parse("{" + c[2]->args + "}");
  EXPECT_EQ(a2["op"], "broadcast");
  EXPECT_EQ(a2["dtype"], "int64");
  EXPECT_EQ(a2["bytes"], 48);
  EXPECT_EQ(a2["seq"], 4);

  // The trace: on the rank's lane (pid), the label among the args.
  const nlohmann::json j = nlohmann::json::parse(profiler::chrome_trace_json({trace}));
  int labelled = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "collective") continue;
    EXPECT_EQ(e["pid"], 5);
    if (e["args"].value("label", "") == "eval/accuracy") ++labelled;
  }
  EXPECT_EQ(labelled, 3);

  // key_averages: one row per op and label.
  std::map<std::string, int64_t> calls;
  for (const profiler::OpStat& s : profiler::key_averages(trace.events))
    if (s.cat == Category::Collective) calls[s.name + " [" + s.label + "]"] = s.calls;
  EXPECT_EQ(calls, (std::map<std::string, int64_t>{{"all_reduce []", 1},
                                                   {"all_reduce [eval/accuracy]", 2},
                                                   {"broadcast [eval/accuracy]", 1}}));
}

TEST(ProfileCollectives, DdpBucketsAreLabelled) {
  const testing::ScratchDir dir("tb_dist_profile_ddp_");
  auto g = world_of_one(dir);
  core::manual_seed(1);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(4, 3));
  model->push_back(std::make_shared<nn::Linear>(3, 2));
  DDPOptions o;
  o.first_bucket_cap_mb = 1e-6;  // 1 byte: the first bucket closes at its first parameter
  auto ddp = std::make_shared<DistributedDataParallel>(model, g, o);
  profiler::Profile p;
  tb::sum((*ddp)(ones({5, 4}))).backward();
  const profiler::Trace trace = p.stop();
  std::vector<std::string> labels;
  for (const profiler::Event* e : collectives(trace)) labels.push_back(e->label);
  EXPECT_EQ(labels, (std::vector<std::string>{"ddp/bucket 0 (1 param, 0.0 MiB)", "ddp/bucket 1 (3 params, 0.0 MiB)"}));
}

}  // namespace
}  // namespace tb::dist
