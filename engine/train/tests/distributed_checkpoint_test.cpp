// load_distributed_state (engine/train/distributed_checkpoint.h) writes the checkpoint into the
// live parameters in place. Whatever trusts a parameter's version must see that write: here the
// autocast weight shadow (Note [Autocast weight shadows] in engine/autograd/autocast.h), which the
// fused AdamW step leaves valid for the next bfloat16 forward. Were the load to keep the
// parameters' versions, the forward after it would run on the bfloat16 rounding of the weights
// from before the load: a silent wrong answer after a rollback or an in-process restore. Nor may
// an FSDP unit gathered at the load keep the old values in its layers' weights.
#include <gtest/gtest.h>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/rng.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/nn/models.h"
#include "engine/nn/linear.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"
#include "engine/train/distributed_checkpoint.h"

namespace tb {
namespace {

namespace A = tb::autograd;

TEST(DistributedCheckpoint, ALoadIntoTrainedWeightsIsWhatTheNextAutocastForwardSees) {
  const testing::ScratchDir dir("tb_train_dcp_");
  dist::Options o;
  o.run_dir = dir.path().string();
  o.watchdog = false;
  testing::WorldOfOne group(o);

  core::manual_seed(5);
  nn::Linear layer(96, 48);
  optim::AdamW opt(layer.parameters(), {.lr = 0.05});
  core::Generator g(6);
  const Tensor x = randn({8, 96}, DType::Float32, &g);
  const Tensor saved_weight = layer.weight.detach().clone();
  checkpoint::save_distributed(train::distributed_state(layer, &opt, 0), (dir / "ckpt").string(), group);

  A::autocast_shadows_clear();
  for (int step = 0; step < 2; ++step) {  // the second step's forward registers, its step writes the shadow
    opt.zero_grad();
    Tensor loss;
    {
      A::AutocastGuard ag;
      loss = sum(layer(x).to(DType::Float32));
    }
    loss.backward();
    opt.step();
  }
  ASSERT_TRUE(A::autocast_valid_shadow(layer.weight).defined());  // the case this test is about
  ASSERT_FALSE(testing::bitwise_equal(layer.weight.detach(), saved_weight));

  train::load_distributed_state(layer, &opt, (dir / "ckpt").string(), group);
  ASSERT_TRUE(testing::bitwise_equal(layer.weight.detach(), saved_weight));
  EXPECT_FALSE(A::autocast_valid_shadow(layer.weight).defined());
  Tensor y;
  {
    A::AutocastGuard ag;
    EXPECT_TRUE(testing::bitwise_equal(A::autocast_lower(layer.weight), saved_weight.to(DType::BFloat16)));
    y = layer(x);
  }
  // The forward is the loaded weights' forward: the same layer, fresh from the checkpoint's values.
  nn::Linear fresh(96, 48);
  {
    A::NoGradGuard ng;
    fresh.weight.copy_(saved_weight);
    fresh.bias.copy_(layer.bias.detach());
  }
  A::AutocastGuard ag;
  EXPECT_TRUE(testing::bitwise_equal(y, fresh(x)));
  A::autocast_shadows_clear();
}

TEST(DistributedCheckpoint, ALoadIntoAGatheredFsdpUnitIsWhatItGathersNext) {
  const testing::ScratchDir dir("tb_train_dcp_fsdp_");
  dist::Options o;
  o.run_dir = dir.path().string();
  o.watchdog = false;
  auto group = std::make_shared<testing::WorldOfOne>(o);
  nn::GPTConfig c;
  c.vocab = 40, c.d_model = 16, c.n_layers = 1, c.n_heads = 2, c.max_seq = 8;
  core::manual_seed(8);
  auto model = std::make_shared<nn::GPT>(c);
  dist::FSDPOptions fo;
  fo.param_dtype = DType::BFloat16;  // P is a gathered bfloat16 copy of the float32 master S
  auto root = dist::fully_shard_tree(model, group, dist::wrap_module_types({"TransformerBlock"}), fo);
  Tensor S = *model->state_dict().find("head.weight");
  const Tensor saved = S.detach().clone();
  checkpoint::save_distributed(train::distributed_state(*model, nullptr, 0), (dir / "ckpt").string(), *group);
  {
    A::NoGradGuard ng;
    tb::add_(S, S, 1.0);  // training moved on
  }
  dist::fsdp_unit(*model)->unshard();  // gathered: P holds the moved values
  ASSERT_TRUE(testing::bitwise_equal(model->head->weight, S.detach().to(DType::BFloat16)));
  train::load_distributed_state(*model, nullptr, (dir / "ckpt").string(), *group);
  ASSERT_TRUE(testing::bitwise_equal(S.detach(), saved));
  dist::fsdp_unit(*model)->unshard();
  EXPECT_TRUE(testing::bitwise_equal(model->head->weight, saved.to(DType::BFloat16)));
}

}  // namespace
}  // namespace tb
