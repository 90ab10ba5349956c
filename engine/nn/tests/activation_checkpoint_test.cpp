// Checkpointed modules (engine/nn/activation_checkpoint.h) against the same model run without
// checkpointing: the GPT-style model with each block checkpointed and an MLP of checkpointed
// blocks, both with dropout on, give bitwise the plain run's loss, every parameter's gradient and
// the default generator's state after backward; the state_dict keys and module names do not
// change; the module's own hooks run once and those inside it again in the recomputation; the
// activation memory of the GPT is measured lower by at least what the blocks' largest saved
// tensors, worked out from the sizes, account for.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/core/rng.h"
#include "engine/core/tests/error_of.h"
#include "engine/memory/allocator.h"
#include "engine/nn/activation_checkpoint.h"
#include "engine/nn/models.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb::nn {
namespace {

namespace A = autograd;
using testing::values;
using V = std::vector<double>;

struct Result {
  V loss;
  std::map<std::string, V> grads;
  uint64_t rng_offset = 0;
};

// One forward and backward from a fixed generator state; `loss_of` maps the model to its loss.
template <typename F>
Result step(Module& model, const F& loss_of) {
  model.zero_grad();
  core::manual_seed(2024);
  Tensor loss = loss_of();
  loss.backward();
  Result r;
  r.loss = values(loss);
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(p.grad().defined()) << name;
    r.grads[name] = p.grad().defined() ? values(p.grad()) : V{};
  }
  r.rng_offset = core::default_generator().offset();
  return r;
}

void expect_same(const Result& a, const Result& b) {
  EXPECT_EQ(a.loss, b.loss);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [name, g] : a.grads) EXPECT_EQ(g, b.grads.at(name)) << name;
  EXPECT_EQ(a.rng_offset, b.rng_offset);
}

GPTConfig small_gpt() {
  GPTConfig c;
  c.vocab = 64;
  c.d_model = 32;
  c.n_layers = 3;
  c.n_heads = 4;
  c.max_seq = 16;
  c.dropout = 0.1;  // after the embeddings and on the attention weights
  return c;
}

Tensor tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  core::Generator g(seed);
  return tb::mul(rand({B, T}, DType::Float32, &g), double(vocab)).to(DType::Int64);
}

TEST(ActivationCheckpoint, GptBlocksBitwiseThePlainRun) {
  core::manual_seed(1);
  auto gpt = std::make_shared<GPT>(small_gpt());
  const Tensor idx = tokens(2, 16, 64, 5), targets = tokens(2, 16, 64, 6);
  auto loss_of = [&] { return GPT::loss((*gpt)(idx), targets); };
  const std::vector<std::string> keys = gpt->state_dict().keys();

  const Result plain = step(*gpt, loss_of);
  EXPECT_GT(plain.rng_offset, 0u);
  EXPECT_EQ(checkpoint_blocks(*gpt), std::vector<std::string>({"blocks.0", "blocks.1", "blocks.2"}));
  EXPECT_TRUE((*gpt->blocks)[0]->checkpointed());
  EXPECT_FALSE(gpt->checkpointed());
  EXPECT_EQ(gpt->state_dict().keys(), keys);  // a switch, not a wrapper: the plain model's keys
  EXPECT_EQ((*gpt->blocks)[1]->type_name(), "TransformerBlock");
  expect_same(plain, step(*gpt, loss_of));

  // Checkpointing the attention inside each checkpointed block as well (nested regions; query, key
  // and value are one tensor), and the whole model around them: still the plain run.
  EXPECT_EQ(apply_activation_checkpointing(*gpt, checkpoint_type("MultiheadAttention")),
            std::vector<std::string>({"blocks.0.attn", "blocks.1.attn", "blocks.2.attn"}));
  checkpoint_module(*gpt);
  expect_same(plain, step(*gpt, loss_of));

  // Switched off again, in place; and without the generator replayed, the dropout masks of the
  // recomputation differ: the comparison above would have seen it.
  for (const auto& [name, m] : gpt->named_modules()) checkpoint_module(*m, false);
  expect_same(plain, step(*gpt, loss_of));
  A::CheckpointOptions no_replay;
  no_replay.preserve_rng_state = false;
  checkpoint_blocks(*gpt, no_replay);
  const Result drifted = step(*gpt, loss_of);
  EXPECT_EQ(drifted.loss, plain.loss);
  EXPECT_NE(drifted.grads.at("blocks.0.mlp.0.weight"), plain.grads.at("blocks.0.mlp.0.weight"));
}

TEST(ActivationCheckpoint, MlpBlocksWithDropoutBitwiseThePlainRun) {
  // Two blocks Linear, ReLU, Dropout and a head; the data does not require grad, so the first
  // block's parameters get gradients only because the region's node reaches them.
  core::manual_seed(2);
  auto block = [](int64_t in) {
    return std::make_shared<Sequential>(std::initializer_list<ModulePtr>{std::make_shared<Linear>(in, 32),
                                                                         std::make_shared<ReLU>(),
                                                                         std::make_shared<Dropout>(0.3)});
  };
  Sequential net({block(16), std::make_shared<Linear>(32, 32), block(32), std::make_shared<Linear>(32, 4)});
  core::Generator g(3);
  const Tensor x = randn({8, 16}, DType::Float32, &g);
  auto loss = [&] {
    Tensor y = net(x);
    return tb::sum(tb::mul(y, y));
  };
  const Result plain = step(net, loss);
  const std::vector<std::string> chosen = apply_activation_checkpointing(net, [](const std::string&, const Module& m) {
    return m.type_name() == "Sequential";
  });
  EXPECT_EQ(chosen, std::vector<std::string>({""}));  // the root itself: one region, no descent
  checkpoint_module(net, false);
  const std::vector<std::string> blocks = apply_activation_checkpointing(net,
                                                                         [](const std::string& name, const Module&) {
                                                                           return name == "0" || name == "2";
                                                                         });
  EXPECT_EQ(blocks, std::vector<std::string>({"0", "2"}));
  expect_same(plain, step(net, loss));
}

TEST(ActivationCheckpoint, OwnHooksRunOnceHooksInsideRunAgain) {
  core::manual_seed(3);
  auto inner = std::make_shared<Linear>(4, 4);
  Sequential outer({inner, std::make_shared<Tanh>()});
  int outer_fwd = 0, inner_fwd = 0, outer_bwd = 0;
  outer.register_forward_hook([&](Module&, const TensorList&, const Tensor&) {
    ++outer_fwd;
    return std::optional<Tensor>();
  });
  inner->register_forward_hook([&](Module&, const TensorList&, const Tensor&) {
    ++inner_fwd;
    return std::optional<Tensor>();
  });
  outer.register_full_backward_hook([&](Module&, const TensorList&, const TensorList&) {
    ++outer_bwd;
    return std::optional<TensorList>();
  });
  checkpoint_module(outer);
  Tensor x = ones({2, 4});
  x.requires_grad_();
  Tensor y = outer(x);
  EXPECT_EQ(outer_fwd, 1);
  EXPECT_EQ(inner_fwd, 1);
  tb::sum(y).backward();
  EXPECT_EQ(outer_fwd, 1);  // outside the region
  EXPECT_EQ(outer_bwd, 1);
  EXPECT_EQ(inner_fwd, 2);  // inside: the recomputation runs it again, as in PyTorch
  EXPECT_TRUE(inner->weight.grad().defined());
}

// Note [GPT activation bound]
// What checkpointing a block must save at least, in float32 bytes: of the tensors a plain block
// keeps for backward, its MLP's hidden activation before and after the GELU (B T 4d each) and the
// attention weights (B H T T), none of which a checkpointed block keeps. The block's input is kept
// either way (by the next block's LayerNorm, or by the region's node), so it is not counted. When
// the forward ends, n_layers blocks hold these in the plain run and none in the checkpointed one;
// at the peak of the checkpointed backward one block's are recomputed, so the peak drops by at
// least (n_layers - 1) of them.
TEST(ActivationCheckpoint, GptActivationMemoryMeasuredLower) {
  GPTConfig c = small_gpt();
  c.d_model = 64;
  c.max_seq = 32;
  c.n_layers = 4;
  const int64_t B = 4, T = 32, d = c.d_model, H = c.n_heads;
  core::manual_seed(4);
  auto gpt = std::make_shared<GPT>(c);
  const Tensor idx = tokens(B, T, c.vocab, 7), targets = tokens(B, T, c.vocab, 8);
  auto bytes = [](int64_t floats) { return int64_t(memory::block_size(size_t(floats) * 4)); };
  const int64_t per_block = 2 * bytes(B * T * 4 * d) + bytes(B * H * T * T);

  struct Measured {
    int64_t activations, peak;
  };
  auto measure = [&] {
    gpt->zero_grad();
    core::manual_seed(9);
    memory::CpuCachingAllocator& alloc = memory::cpu_allocator();
    const memory::Stats s0 = alloc.stats();
    alloc.reset_peak();
    Tensor loss = GPT::loss((*gpt)(idx), targets);
    const int64_t act = alloc.stats().allocated_by_tag[size_t(memory::Tag::Activation)] -
                        s0.allocated_by_tag[size_t(memory::Tag::Activation)];
    loss.backward();
    return Measured{act, alloc.stats().peak_allocated_bytes - s0.allocated_bytes};
  };
  const Measured plain = measure();
  checkpoint_blocks(*gpt);
  const Measured ckpt = measure();
  std::printf(
      "GPT (B %lld, T %lld, d %lld, %lld layers): activations after forward %lld -> %lld bytes, peak over "
      "forward + backward %lld -> %lld bytes; bound per block %lld bytes\n",
      (long long)B, (long long)T, (long long)d, (long long)c.n_layers, (long long)plain.activations,
      (long long)ckpt.activations, (long long)plain.peak, (long long)ckpt.peak, (long long)per_block);
  EXPECT_GE(plain.activations - ckpt.activations, c.n_layers * per_block);
  EXPECT_GE(plain.peak - ckpt.peak, (c.n_layers - 1) * per_block);
}

}  // namespace
}  // namespace tb::nn
