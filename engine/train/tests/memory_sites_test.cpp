// Where the allocator says memory came from (engine/memory/site.h) in a real training step: a
// GPT's forward names each allocation's op (the differentiable op's name) and module path
// ("blocks.1.mlp.0"), backward names its nodes ("MmBackward0"), AdamW's step "adamw.step"; an
// OOM inside a forward names the op and module that asked, and training goes on after it.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "engine/autograd/functions.h"
#include "engine/memory/allocator.h"
#include "engine/memory/oom.h"
#include "engine/memory/snapshot.h"
#include "engine/nn/linear.h"
#include "engine/nn/models.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

using memory::Action;
using memory::Tag;

std::string str(const char* s) { return s ? s : ""; }

Tensor step(nn::GPT& model, optim::AdamW& opt, int64_t batch, const nn::GPTConfig& c) {
  Tensor idx = randint(0, c.vocab, {batch, c.max_seq});
  Tensor logits = model(idx);
  Tensor loss = tb::cross_entropy(logits.reshape({batch * c.max_seq, c.vocab}), idx.reshape({batch * c.max_seq}));
  opt.zero_grad();
  loss.backward();
  opt.step();
  return loss;
}

TEST(MemorySites, ATrainingStepNamesOpsModulesNodesAndTheOptimizer) {
  auto& a = memory::cpu_allocator();
  nn::GPTConfig c;
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), optim::AdamW::Options{});
  memory::record_history(a, 100000);
  step(model, opt, 4, c);
  const memory::Snapshot s = memory::snapshot(a);
  memory::record_history(a, 0);
  std::set<std::pair<std::string, std::string>> op_module;  // of forward activations
  std::set<std::string> backward_ops, optimizer_ops, other_ops;
  for (const memory::Event& e : s.events) {
    if (e.action != Action::Alloc) continue;
    if (e.tag == Tag::Other) other_ops.insert(str(e.site.op));
    if (e.tag == Tag::Activation) op_module.insert({str(e.site.op), str(e.site.module)});
    if (e.tag == Tag::Gradient) backward_ops.insert(str(e.site.op));
    if (e.tag == Tag::OptimizerState) optimizer_ops.insert(str(e.site.op));
  }
  ASSERT_EQ(s.dropped_events, 0);
  // The MLP's first Linear of the second block, its LayerNorm, the attention and the embedding.
  for (const auto& want : std::set<std::pair<std::string, std::string>>{{"linear", "blocks.1.mlp.0"},
                                                                        {"gelu", "blocks.1.mlp.1"},
                                                                        {"layer_norm", "blocks.0.ln1"},
                                                                        {"embedding", "tok_emb"},
                                                                        {"linear", "head"}})
    EXPECT_TRUE(op_module.count(want)) << want.first << " in " << want.second;
  // Every activation is named by an op or a module (a loss outside any module by its op; a copy a
  // module's forward makes outside a differentiable op, such as attention's, by the module), and
  // no op is named after a lambda.
  for (const auto& [op, module] : op_module) {
    EXPECT_FALSE(op.empty() && module.empty()) << "an activation named by nothing";
    EXPECT_NE(op, "operator()") << "an op named after a lambda, in " << module;
  }
  EXPECT_TRUE(backward_ops.count("MmBackward0") || backward_ops.count("LinearBackward0"));
  for (const std::string& op : backward_ops)
    EXPECT_TRUE(op.find("Backward") != std::string::npos || op == "AccumulateGrad") << "[" << op << "]";
  EXPECT_EQ(optimizer_ops, std::set<std::string>{"adamw.step"}) << "its zeros keep the step's name";
  EXPECT_TRUE(other_ops.count("randint")) << "the batch, made by a factory";
}

// The modules' activations seen while `f` runs: (op, module) pairs.
template <typename F>
std::set<std::pair<std::string, std::string>> activation_sites(F&& f) {
  auto& a = memory::cpu_allocator();
  memory::record_history(a, 100000);
  f();
  const memory::Snapshot s = memory::snapshot(a);
  memory::record_history(a, 0);
  std::set<std::pair<std::string, std::string>> out;
  for (const memory::Event& e : s.events)
    if (e.action == Action::Alloc && e.tag == Tag::Activation) out.insert({str(e.site.op), str(e.site.module)});
  return out;
}

TEST(MemorySites, AForwardCalledDirectlyStillNamesItsChildrenByTheirPaths) {
  nn::GPTConfig c;
  auto model = std::make_shared<nn::GPT>(c);
  Tensor idx = randint(0, c.vocab, {2, c.max_seq});
  // GPT::forward itself, not through operator(): no module runs around the blocks, whose paths
  // come from where they were registered.
  const auto sites = activation_sites([&] { model->forward(idx); });
  EXPECT_TRUE(sites.count({"linear", "blocks.1.mlp.0"}));
  EXPECT_TRUE(sites.count({"layer_norm", "blocks.0.ln2"}));
  // A module registered nowhere is named by its type; a dead model's registrations are gone, so
  // a fresh module is not given a path of the old one.
  model.reset();
  auto lone = std::make_shared<nn::Linear>(c.d_model, 8);
  Tensor x = randn({4, c.d_model}, DType::Float32);
  EXPECT_EQ(activation_sites([&] { (*lone)(x); }),
            (std::set<std::pair<std::string, std::string>>{{"linear", "Linear"}}));
}

TEST(MemorySites, AnOomInAForwardNamesItsOpAndModuleAndTrainingGoesOn) {
  auto& a = memory::cpu_allocator();
  nn::GPTConfig c;
  nn::GPT model(c);
  optim::AdamW opt(model.parameters(), optim::AdamW::Options{});
  step(model, opt, 2, c);  // the optimizer state exists
  a.empty_cache();
  const int64_t old = a.limit();
  a.set_limit(a.stats().reserved_bytes + (256 << 10));
  const memory::Stats before = a.stats();
  std::string op, module, msg;
  try {
    step(model, opt, 64, c);  // 64 x 16 x 4*32 floats per MLP activation: over 256 KiB
  } catch (const memory::OutOfMemoryError& e) {
    msg = e.what();
    const memory::OomReport* r = memory::oom_report(e);
    ASSERT_NE(r, nullptr) << msg;
    op = str(r->site.op);
    module = str(r->site.module);
    EXPECT_EQ(r->tag, Tag::Activation);
    EXPECT_EQ(r->limit, before.reserved_bytes + (256 << 10));
    EXPECT_EQ(r->largest_live.size(), 5u);
  }
  ASSERT_FALSE(msg.empty()) << "expected an OutOfMemoryError";
  EXPECT_FALSE(op.empty()) << msg;
  EXPECT_FALSE(module.empty()) << msg;
  EXPECT_NE(msg.find("for " + op + " in " + module), std::string::npos) << msg;
  // The failed step's graph is gone with its tensors: the held bytes are back where they were.
  EXPECT_EQ(a.stats().allocated_bytes, before.allocated_bytes);
  a.set_limit(old);
  const Tensor loss = step(model, opt, 2, c);  // training goes on
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
}

}  // namespace
}  // namespace tb
