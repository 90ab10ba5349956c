// The profiler's hooks in a real training step (engine/core/profiler.h): forward ops with their
// input shapes, backward nodes, the optimizer step, the DataLoader's waits and its workers' lanes,
// and the Chrome trace JSON of it all parsed back with every event's fields.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/profiler.h"
#include "engine/data/dataloader.h"
#include "engine/nn/models.h"
#include "engine/ops/elementwise.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

using profiler::Category;

profiler::Trace profile_mlp_steps(int64_t workers, int steps) {
  core::manual_seed(0);
  nn::MLP model(8, 16, 3);
  optim::AdamW opt(model.parameters(), {});
  auto ds = std::make_shared<data::TensorDataset>(randn({4 * steps, 8}), randint(0, 3, {4 * steps}));
  data::DataLoader loader(ds, {.batch_size = 4, .num_workers = workers});
  profiler::Profile p;
  for (const data::Batch& b : loader) {
    profiler::RecordFunction step("step", Category::Step);
    opt.zero_grad(true);
    tb::cross_entropy(model(b.input), b.target).backward();
    opt.step();
  }
  return p.stop();
}

TEST(ProfilerHooks, ATrainingStepRecordsOpsNodesOptimizerAndData) {
  const profiler::Trace t = profile_mlp_steps(0, 3);
  std::map<Category, std::set<std::string>> names;
  for (const profiler::Event& e : t.events) names[e.cat].insert(e.name);
  EXPECT_TRUE(names[Category::Op].count("linear") || names[Category::Op].count("linear_relu"));
  EXPECT_TRUE(names[Category::Op].count("cross_entropy"));
  bool node = false;
  for (const std::string& n : names[Category::Backward]) node |= n.find("Backward") != std::string::npos;
  EXPECT_TRUE(node) << "no backward node among " << names[Category::Backward].size() << " backward names";
  EXPECT_TRUE(names[Category::Optimizer].count("adamw.step"));
  EXPECT_TRUE(names[Category::Data].count("dataloader.next"));
  EXPECT_TRUE(names[Category::Data].count("dataloader.build"));
  // Without workers the batch is built inside the consumer's wait.
  const std::vector<profiler::OpStat> stats = profiler::key_averages(t.events);
  for (const profiler::OpStat& s : stats) {
    EXPECT_LE(s.self_ns, s.total_ns) << s.name;
    EXPECT_GE(s.self_ns, 0) << s.name;
    if (s.name == "adamw.step" || s.name == "step") {
      EXPECT_EQ(s.calls, 3) << s.name;
    }
  }
  // The op events carry their inputs' shapes and dtypes.
  bool shaped = false;
  for (const profiler::Event& e : t.events)
    if (e.cat == Category::Op && e.args.find("\"input_shapes\":[[4, 8]") != std::string::npos)
      shaped = e.args.find("\"input_dtypes\":[\"float32\"") != std::string::npos;
  EXPECT_TRUE(shaped);
  ASSERT_EQ(t.threads.size(), 1u);
  EXPECT_EQ(t.threads[0].name, "main");
}

// Bare kernels are op events of their own where nothing else names them: inside a backward node
// (the kernels its formula runs), called directly, and the filling factories; inside the
// differentiable op of the same name they add nothing (one call, one event).
TEST(ProfilerHooks, BareKernelsAreEventsInsideNodesAndOnceInsideTheirOp) {
  Tensor a = randn({4, 8}).requires_grad_(true), b = randn({4, 8}).requires_grad_(true);
  profiler::Profile p;
  Tensor y = tb::mul(a, b);  // forward: one "mul"
  y.backward(ones({4, 8}));  // MulBackward0 runs ops::mul twice
  Tensor direct;
  {
    autograd::NoGradGuard no_grad;
    direct = ops::mul(a, b);  // a bare call: its own "mul" event
  }
  Tensor z = zeros({3, 5});
  const profiler::Trace t = p.stop();

  const profiler::Event* node = nullptr;
  for (const profiler::Event& e : t.events)
    if (std::string_view(e.name) == "MulBackward0") node = &e;
  ASSERT_NE(node, nullptr);
  int inside = 0, outside = 0, full = 0;
  for (const profiler::Event& e : t.events) {
    if (e.cat == Category::Op && std::string_view(e.name) == "full") ++full;
    if (e.cat != Category::Op || std::string_view(e.name) != "mul") continue;
    EXPECT_NE(e.args.find("\"input_shapes\":[[4, 8],[4, 8]]"), std::string::npos) << e.args;
    const bool in_node = e.tid == node->tid && e.start_ns >= node->start_ns && e.end_ns <= node->end_ns;
    (in_node ? inside : outside) += 1;
  }
  EXPECT_EQ(inside, 2);   // the two gradients
  EXPECT_EQ(outside, 2);  // tb::mul's kernel (not twice) and the direct ops::mul
  EXPECT_GE(full, 1);     // zeros (and backward's ones seed) fill through full
  // The node's self time excludes the kernels now shown inside it.
  for (const profiler::OpStat& s : profiler::key_averages(t.events)) {
    if (s.name == "MulBackward0") {
      EXPECT_LT(s.self_ns, s.total_ns);
    }
  }
}

// Note [Backward kernels]: a kernel only backward formulas call is an event inside its node,
// with its inputs' shapes, and only there.
TEST(ProfilerHooks, BackwardKernelsAreEventsInsideTheirNodes) {
  Tensor x = randn({6, 16}).requires_grad_(true), w = randn({16}).requires_grad_(true);
  profiler::Profile p;
  Tensor y = tb::layer_norm(tb::gelu(x), {16}, w);
  y.backward(ones({6, 16}));
  const profiler::Trace t = p.stop();

  const auto find = [&](std::string_view name) {
    std::vector<const profiler::Event*> found;
    for (const profiler::Event& e : t.events)
      if (std::string_view(e.name) == name) found.push_back(&e);
    return found;
  };
  const auto inside = [](const profiler::Event& e, const profiler::Event& node) {
    return e.tid == node.tid && e.start_ns >= node.start_ns && e.end_ns <= node.end_ns;
  };
  for (const auto& [kernel, node_name, shapes] :
       {std::tuple{"gelu_backward", "GeluBackward0", "[[6, 16],[6, 16]]"},
        std::tuple{"layer_norm_backward", "NativeLayerNormBackward0", "[[6, 16],[6, 16],[6],[6],[16]]"}}) {
    const auto kernels = find(kernel), nodes = find(node_name);
    ASSERT_EQ(nodes.size(), 1u) << node_name;
    ASSERT_EQ(kernels.size(), 1u) << kernel;  // once: not in forward, not twice in backward
    EXPECT_EQ(kernels[0]->cat, Category::Op);
    EXPECT_TRUE(inside(*kernels[0], *nodes[0])) << kernel << " outside " << node_name;
    EXPECT_NE(kernels[0]->args.find(std::string("\"input_shapes\":") + shapes), std::string::npos)
        << kernel << ": " << kernels[0]->args;
  }
}

// The optimizers' fused updates are op events of their own, one per parameter with its shapes,
// inside the step, so the table lists them instead of leaving their time as the step's self time.
TEST(ProfilerHooks, FusedOptimizerUpdatesAreEventsInsideTheirStep) {
  Tensor w = randn({4, 8}).requires_grad_(true), b = randn({8}).requires_grad_(true);
  Tensor u = randn({5}).requires_grad_(true);
  optim::AdamW adamw({w, b}, {});
  optim::SGD sgd({u}, {.lr = 0.1, .momentum = 0.9});
  tb::sum(tb::add(tb::mul(w, w), b)).backward();
  tb::sum(tb::mul(u, u)).backward();
  profiler::Profile p;
  adamw.step();
  sgd.step();
  const profiler::Trace t = p.stop();

  for (const auto& [kernel, step_name, shapes] :
       {std::tuple{"_fused_adamw_", "adamw.step",
                   std::vector<std::string>{"[[4, 8],[4, 8],[4, 8],[4, 8]]", "[[8],[8],[8],[8]]"}},
        std::tuple{"_fused_sgd_", "sgd.step", std::vector<std::string>{"[[5],[5],[5]]"}}}) {
    const profiler::Event* step = nullptr;
    std::vector<const profiler::Event*> kernels;
    for (const profiler::Event& e : t.events) {
      if (std::string_view(e.name) == step_name) step = &e;
      if (std::string_view(e.name) == kernel) kernels.push_back(&e);
    }
    ASSERT_NE(step, nullptr) << step_name;
    ASSERT_EQ(kernels.size(), shapes.size()) << kernel;  // one per parameter
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(kernels[i]->cat, Category::Op);
      EXPECT_TRUE(kernels[i]->tid == step->tid && kernels[i]->start_ns >= step->start_ns &&
                  kernels[i]->end_ns <= step->end_ns)
          << kernel << " outside " << step_name;
      EXPECT_NE(kernels[i]->args.find("\"input_shapes\":" + shapes[i]), std::string::npos)
          << kernel << ": " << kernels[i]->args;
    }
  }
  // And a row of the top-ops table, its time no longer the step's self time.
  const std::vector<profiler::OpStat> stats = profiler::key_averages(t.events);
  const auto row = [&](std::string_view name) {
    for (const profiler::OpStat& s : stats)
      if (s.name == name) return s;
    return profiler::OpStat{};
  };
  EXPECT_EQ(row("_fused_adamw_").calls, 2);
  EXPECT_EQ(row("_fused_sgd_").calls, 1);
  EXPECT_LT(row("adamw.step").self_ns, row("adamw.step").total_ns);
  EXPECT_NE(profiler::table(stats, profiler::SortBy::SelfTime).find("_fused_adamw_"), std::string::npos);
}

TEST(ProfilerHooks, DataLoaderWorkersHaveTheirOwnLanes) {
  const profiler::Trace t = profile_mlp_steps(2, 4);
  std::set<int> build_tids;
  int main_tid = -1;
  for (const profiler::Thread& th : t.threads)
    if (th.name == "main") main_tid = th.tid;
  for (const profiler::Event& e : t.events)
    if (std::string_view(e.name) == "dataloader.build") build_tids.insert(e.tid);
  ASSERT_FALSE(build_tids.empty());
  EXPECT_FALSE(build_tids.count(main_tid));
  for (const profiler::Thread& th : t.threads)
    if (build_tids.count(th.tid)) {
      EXPECT_EQ(th.name, "dataloader worker");
    }
}

TEST(ProfilerHooks, TraceJsonParsesWithEveryEventsFields) {
  profiler::Trace a = profile_mlp_steps(0, 2);
  profiler::Trace b = a;
  b.rank = 1;
  const nlohmann::json j = nlohmann::json::parse(profiler::chrome_trace_json({a, b}));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::set<int> pids;
  std::size_t complete = 0;
  std::map<int, std::string> process_names;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.at("ph");
    if (ph == "M") {
      if (e.at("name") == "process_name") process_names[e.at("pid")] = e.at("args").at("name");
      continue;
    }
    ASSERT_EQ(ph, "X");
    ++complete;
    pids.insert(e.at("pid").get<int>());
    EXPECT_TRUE(e.at("name").is_string());
    EXPECT_TRUE(e.at("cat").is_string());
    EXPECT_TRUE(e.at("tid").is_number_integer());
    EXPECT_GT(e.at("ts").get<double>(), 0);
    EXPECT_GE(e.at("dur").get<double>(), 0);
    EXPECT_TRUE(e.at("args").is_object());
  }
  EXPECT_EQ(complete, a.events.size() + b.events.size());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(process_names[1], "rank 1");
}

}  // namespace
}  // namespace tb
