// DDP's reducer with activation checkpointing (autograd/checkpoint.h, nn/activation_checkpoint.h):
// it reduces from the parameters' AccumulateGrad post-hooks, which a checkpointed region must fire
// once per backward in the enclosing engine, and with find_unused_parameters it walks the graph
// from the outputs, which must reach the parameters through the region's node. On a world of one
// (a backend whose all_reduce is the identity, written here) the averaged gradients are the
// local ones, so a GPT with checkpointed blocks under DDP must give bitwise the gradients of the
// same GPT under DDP without checkpointing, step after step (the second step with gradient
// buckets offered to the accumulators: Note [Gradient buffers]).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "engine/autograd/functions.h"
#include "engine/core/rng.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/dist/ddp/ddp.h"
#include "engine/dist/tests/world_of_one.h"
#include "engine/nn/activation_checkpoint.h"
#include "engine/nn/models.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb::dist {
namespace {

using testing::values;
using V = std::vector<double>;

using testing::WorldOfOne;

Tensor tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  core::Generator g(seed);
  return tb::mul(rand({B, T}, DType::Float32, &g), double(vocab)).to(DType::Int64);
}

TEST(DdpWithActivationCheckpointing, GptBlocksGiveThePlainGradientsEveryStep) {
  const testing::ScratchDir dir("tb_engine_dist_ckpt_");
  nn::GPTConfig c;
  c.n_layers = 2;
  c.dropout = 0.1;
  const Tensor idx = tokens(2, 16, c.vocab, 1), targets = tokens(2, 16, c.vocab, 2);

  auto train = [&](bool checkpointed) {
    core::manual_seed(3);
    auto gpt = std::make_shared<nn::GPT>(c);
    if (checkpointed) nn::checkpoint_blocks(*gpt);
    Options o;
    o.run_dir = dir.path().string();
    o.watchdog = false;
    DDPOptions d;
    d.find_unused_parameters = true;  // the walk from the loss must reach every parameter
    d.gradient_as_bucket_view = true;
    d.first_bucket_cap_mb = 0.01;  // several buckets, launched from the hooks during backward
    auto ddp = std::make_shared<DistributedDataParallel>(gpt, std::make_shared<WorldOfOne>(o), d);
    std::vector<std::map<std::string, V>> steps;
    for (int step = 0; step < 2; ++step) {
      gpt->zero_grad();
      core::manual_seed(10 + uint64_t(step));
      Tensor loss = nn::GPT::loss((*ddp)(idx), targets);
      loss.backward();
      std::map<std::string, V> grads;
      for (const auto& [name, p] : gpt->named_parameters()) {
        EXPECT_TRUE(p.grad().defined()) << name;
        if (p.grad().defined()) grads[name] = values(p.grad());
      }
      grads["rng offset"] = {double(core::default_generator().offset())};
      steps.push_back(std::move(grads));
    }
    EXPECT_GT(ddp->last_stats().buckets, 1);
    return steps;
  };
  const auto plain = train(false), ckpt = train(true);
  ASSERT_EQ(plain.size(), ckpt.size());
  for (size_t s = 0; s < plain.size(); ++s)
    for (const auto& [name, g] : plain[s]) EXPECT_EQ(g, ckpt[s].at(name)) << "step " << s << " " << name;
}

}  // namespace
}  // namespace tb::dist
