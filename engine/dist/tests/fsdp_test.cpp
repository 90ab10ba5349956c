// fully_shard on a world of one, in process (no MPI, no LibTorch): the bookkeeping that does not
// need a second rank -- shards registered in the parameters' place, the plain model's state dict
// keys, training bit for bit the plain model's, the bf16 gather path, and the errors. The ranks
// themselves are checked by the fsdp suite (suites/fsdp) against LibTorch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/core/rng.h"
#include "engine/core/tests/error_of.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/nn/models.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb::dist {
namespace {

using testing::WorldOfOne;

std::shared_ptr<ProcessGroup> world_of_one() {
  Options o;
  o.run_dir = std::filesystem::temp_directory_path().string();
  o.watchdog = false;
  return std::make_shared<WorldOfOne>(o);
}

nn::GPTConfig small_gpt() {
  nn::GPTConfig c;
  c.vocab = 40, c.d_model = 16, c.n_layers = 2, c.n_heads = 2, c.max_seq = 8;
  return c;
}

std::pair<Tensor, Tensor> batch(int64_t step) {
  core::Generator g(50 + uint64_t(step));
  return {randint(0, 40, {2, 8}, DType::Int64, &g), randint(0, 40, {2, 8}, DType::Int64, &g)};
}

TEST(Fsdp, ShardsTakeTheParametersPlaceAndTheStateDictKeepsItsKeys) {
  auto g = world_of_one();
  core::manual_seed(1);
  auto plain = std::make_shared<nn::GPT>(small_gpt());
  core::manual_seed(1);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  auto root = fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}));
  // The layer computes with its own handle; the module lists the shard.
  EXPECT_FALSE(model->head->weight.is_same(*model->state_dict().find("head.weight")));
  EXPECT_EQ(fsdp_unit(*model->blocks->child("0"))->sharded_parameters().size(),
            model->blocks->child("0")->parameters().size());
  const nn::StateDict full = full_state_dict(*model);
  EXPECT_EQ(full.keys(), plain->state_dict().keys());
  for (auto& [k, t] : plain->state_dict()) EXPECT_TRUE(tb::testing::bitwise_equal(*full.find(k), t)) << k;
  for (auto& [k, s] : sharded_state_dict(*model)) EXPECT_EQ(s.row_offset, 0) << k;
}

TEST(Fsdp, TrainingOnAWorldOfOneIsThePlainModelsBitForBit) {
  auto g = world_of_one();
  core::manual_seed(2);
  auto plain = std::make_shared<nn::GPT>(small_gpt());
  core::manual_seed(2);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  auto root = fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}));
  // Plain SGD by hand (dist/ sits left of optim/, so its tests do not link optimizers).
  auto step = [](nn::Module& m) {
    autograd::NoGradGuard ng;
    for (Tensor p : m.parameters()) tb::add_(p, p.grad(), -0.1);
  };
  for (int64_t s = 0; s < 3; ++s) {
    auto [x, y] = batch(s);
    plain->zero_grad();
    model->zero_grad();
    const Tensor la = nn::GPT::loss((*plain)(x), y), lb = nn::GPT::loss((*model)(x), y);
    la.backward();
    lb.backward();
    EXPECT_EQ(la.item_double(), lb.item_double()) << "step " << s;
    step(*plain);
    step(*model);
  }
  const nn::StateDict full = full_state_dict(*model);
  for (auto& [k, t] : plain->state_dict()) EXPECT_TRUE(tb::testing::bitwise_equal(*full.find(k), t)) << k;
}

// bf16 compute copies at a shard size of one take the gather path (a copy in bfloat16) and the
// gradients come back to the float32 masters: the loss is the plain float32 loss to bf16 accuracy.
TEST(Fsdp, Bf16ComputeCopiesAndFloat32Masters) {
  auto g = world_of_one();
  core::manual_seed(3);
  auto plain = std::make_shared<nn::GPT>(small_gpt());
  core::manual_seed(3);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  FSDPOptions o;
  o.param_dtype = DType::BFloat16;
  o.output_dtype = DType::Float32;
  fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}), o);
  auto [x, y] = batch(0);
  const double want = nn::GPT::loss((*plain)(x), y).item_double();
  Tensor loss = nn::GPT::loss((*model)(x), y);
  EXPECT_EQ(loss.dtype(), DType::Float32);
  EXPECT_NEAR(loss.item_double(), want, 2e-2 * std::abs(want));  // bf16: 8 bits of mantissa
  loss.backward();
  for (auto& [k, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << k;
    EXPECT_EQ(p.grad().dtype(), DType::Float32) << k;
    EXPECT_EQ(p.dtype(), DType::Float32) << k;
  }
}

// The same recipe by hand over three steps: a bfloat16 copy of the float32 master computes, its
// gradients step the master (plain SGD). At a world of one nothing is reduced, so the two agree
// bit for bit.
TEST(Fsdp, Bf16StepsAreTheHandWrittenRecipe) {
  auto g = world_of_one();
  core::manual_seed(4);
  auto master = std::make_shared<nn::GPT>(small_gpt());
  core::manual_seed(4);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  FSDPOptions o;
  o.param_dtype = DType::BFloat16;
  o.reduce_dtype = DType::Float32;
  o.output_dtype = DType::Float32;
  fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}), o);
  for (int64_t s = 0; s < 3; ++s) {
    auto [x, y] = batch(s);
    nn::GPTConfig c = small_gpt();
    c.dtype = DType::BFloat16;
    auto compute = std::make_shared<nn::GPT>(c);
    {
      autograd::NoGradGuard ng;
      nn::StateDict sd;
      for (auto& [k, t] : master->state_dict()) sd.insert(k, t.to(DType::BFloat16));
      compute->load_state_dict(sd);
    }
    Tensor want = nn::GPT::loss((*compute)(x).to(DType::Float32), y);
    want.backward();
    model->zero_grad();
    Tensor got = nn::GPT::loss((*model)(x), y);
    got.backward();
    EXPECT_EQ(got.item_double(), want.item_double()) << "step " << s;
    autograd::NoGradGuard ng;
    const auto cg = compute->named_parameters();
    const auto mp = master->named_parameters();
    for (size_t i = 0; i < mp.size(); ++i) {
      Tensor p = mp[i].second;
      tb::add_(p, cg[i].second.grad().to(DType::Float32), -0.1);
    }
    for (Tensor p : model->parameters()) tb::add_(p, p.grad(), -0.1);
  }
  const nn::StateDict full = full_state_dict(*model);
  for (auto& [k, t] : master->state_dict()) EXPECT_TRUE(tb::testing::bitwise_equal(*full.find(k), t)) << k;
}

// The layer computes on P, the optimizer writes the master S: whatever trusts P's version must
// see S's writes. NO_SHARD in float32 (a world of one) shares S's memory with P, and P its version
// counter: autocast's weight cache over a step (a guard around the loop) casts the new values.
TEST(Fsdp, AStepOnTheMasterIsANewVersionOfTheLayersWeight) {
  auto g = world_of_one();
  core::manual_seed(6);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}));
  const Tensor P = model->head->weight;
  Tensor S = *model->state_dict().find("head.weight");
  ASSERT_FALSE(P.is_same(S));
  autograd::AutocastGuard ag;
  const Tensor before = autograd::autocast_lower(P);
  {
    autograd::NoGradGuard ng;
    tb::add_(S, S, 1.0);  // the optimizer's step, in place on the master
  }
  const Tensor after = autograd::autocast_lower(P);
  EXPECT_TRUE(tb::testing::bitwise_equal(after, P.detach().to(DType::BFloat16)));
  EXPECT_FALSE(tb::testing::bitwise_equal(after, before));
}

// Gathered into P (bfloat16 compute): a step on the masters between a forward and its backward
// changes the values FULL_SHARD gathers again for backward, under what the forward saved. That is
// an error, as an in-place write to a saved tensor is; the re-gather of unchanged masters is not.
TEST(Fsdp, AStepBetweenForwardAndBackwardIsTheInPlaceError) {
  auto g = world_of_one();
  core::manual_seed(7);
  auto model = std::make_shared<nn::GPT>(small_gpt());
  FSDPOptions o;
  o.param_dtype = DType::BFloat16;
  o.output_dtype = DType::Float32;
  fully_shard_tree(model, g, wrap_module_types({"TransformerBlock"}), o);
  auto [x, y] = batch(0);
  nn::GPT::loss((*model)(x), y).backward();  // forward, re-gather, backward: no error
  Tensor loss = nn::GPT::loss((*model)(x), y);
  {
    autograd::NoGradGuard ng;
    for (Tensor p : model->parameters()) tb::add_(p, p, 1.0);
  }
  testing::expect_contains(testing::error_of([&] { loss.backward(); }), {"modified by an inplace operation"});
}

TEST(Fsdp, ClearErrors) {
  auto g = world_of_one();
  auto model = std::make_shared<nn::GPT>(small_gpt());
  fully_shard(model->blocks->child("0"), g);
  testing::expect_contains(testing::error_of([&] { fully_shard(model->blocks->child("0"), g); }), {"already sharded"});
  // A tied parameter whose users sit in two units.
  auto a = std::make_shared<nn::Linear>(4, 4);
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(a);
  auto b = std::make_shared<nn::Linear>(4, 4);
  b->set_parameter("weight", a->weight);
  b->weight = a->weight;
  seq->push_back(b);
  fully_shard(a, g);
  testing::expect_contains(testing::error_of([&] { fully_shard(seq, g); }), {"tied"});
  FSDPOptions half;
  half.param_dtype = DType::Float16;
  testing::expect_contains(testing::error_of([&] { fully_shard(std::make_shared<nn::Linear>(2, 2), g, half); }),
                           {"param_dtype"});
  FSDPOptions hybrid;
  hybrid.strategy = ShardingStrategy::HybridShard;
  hybrid.shard_group_size = 3;
  testing::expect_contains(testing::error_of([&] { fully_shard(std::make_shared<nn::Linear>(2, 2), g, hybrid); }),
                           {"does not divide"});
  testing::expect_contains(testing::error_of([] { parse_sharding_strategy("sharded"); }), {"full_shard"});
}

}  // namespace
}  // namespace tb::dist
