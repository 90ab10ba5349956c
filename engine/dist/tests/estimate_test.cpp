// The analytic memory estimator (engine/dist/fsdp/estimate.h): the guide's figures, padding,
// hybrid sharding, the per-phase moments of a small two-unit model, DDP's buckets at allocator
// block sizes, the reference models' parameter lists against the built models, and bad input.
// Every expected number is worked out by hand from the formulas in docs/distributed.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tests/error_of.h"
#include "engine/dist/fsdp/estimate.h"
#include "engine/nn/models.h"

namespace {

using tb::DType;
using tb::dist::estimate_memory;
using tb::dist::MemoryBytes;
using tb::dist::MemoryEstimate;
using tb::dist::MemoryEstimateInput;
using tb::dist::ModelSpec;
using tb::dist::OptimizerKind;
using tb::dist::Strategy;
using tb::testing::error_of;
using tb::testing::expect_contains;

MemoryEstimateInput input(ModelSpec m, Strategy s, int world) {
  MemoryEstimateInput in;
  in.model = std::move(m);
  in.strategy = s;
  in.world = world;
  return in;
}

void expect_bytes(const MemoryBytes& b, int64_t params, int64_t grads, int64_t opt, int64_t acts, int64_t comm) {
  EXPECT_EQ(b.parameters, params);
  EXPECT_EQ(b.gradients, grads);
  EXPECT_EQ(b.optimizer_state, opt);
  EXPECT_EQ(b.activations, acts);
  EXPECT_EQ(b.communication, comm);
}

// The guide: 7B parameters x (4 param + 4 grad + 8 Adam) = 112 GB per rank under DDP.
TEST(Estimate, GuideDdp7B) {
  const MemoryEstimate e = estimate_memory(
      input(tb::dist::model_from_parameter_count(7'000'000'000), Strategy::Ddp, 8));
  EXPECT_EQ(e.numel, 7'000'000'000);
  EXPECT_EQ(e.parameter_bytes, 28'000'000'000);
  EXPECT_EQ(e.gradient_bytes, 28'000'000'000);
  EXPECT_EQ(e.optimizer_state_bytes, 56'000'000'000);
  EXPECT_EQ(e.model_state_bytes(), 112'000'000'000);
  // One parameter, one bucket holding the whole gradient once.
  EXPECT_EQ(e.persistent_communication_bytes, 28'000'000'000);
  EXPECT_EQ(e.optimizer_step.total(), 140'000'000'000);
  EXPECT_EQ(e.peak_phase, "backward");  // the optimizer step holds as much; the first of equals wins
}

// ... and 112 GB / 8 = 14 GB under FULL_SHARD over 8 ranks.
TEST(Estimate, GuideFullShard7BOver8) {
  const MemoryEstimate e = estimate_memory(
      input(tb::dist::model_from_parameter_count(7'000'000'000), Strategy::FullShard, 8));
  EXPECT_EQ(e.shard_world, 8);
  EXPECT_EQ(e.parameter_bytes, 3'500'000'000);
  EXPECT_EQ(e.gradient_bytes, 3'500'000'000);
  EXPECT_EQ(e.optimizer_state_bytes, 7'000'000'000);
  EXPECT_EQ(e.model_state_bytes(), 14'000'000'000);
  EXPECT_EQ(e.persistent_communication_bytes, 0);
  // One unit: the whole model is gathered (fp32) in forward and backward.
  EXPECT_EQ(e.gathered_parameter_bytes, 28'000'000'000);
}

// The guide: 1B parameters take 4 GB in fp32 and 2 GB in bf16.
TEST(Estimate, Guide1BParameterBytes) {
  MemoryEstimateInput in = input(tb::dist::model_from_parameter_count(1'000'000'000), Strategy::Ddp, 1);
  EXPECT_EQ(estimate_memory(in).parameter_bytes, 4'000'000'000);
  in.param_dtype = DType::BFloat16;
  const MemoryEstimate bf16 = estimate_memory(in);
  EXPECT_EQ(bf16.parameter_bytes, 2'000'000'000);
  // DDP trains in the parameters' dtype: Adam's two states are bf16 too (2 + 2 + 4 bytes).
  EXPECT_EQ(bf16.model_state_bytes(), 8'000'000'000);
  // FSDP keeps fp32 masters; bf16 is the gathered compute copy.
  in.strategy = Strategy::FullShard;
  const MemoryEstimate fsdp = estimate_memory(in);
  EXPECT_EQ(fsdp.parameter_bytes, 4'000'000'000);
  EXPECT_EQ(fsdp.gathered_parameter_bytes, 2'000'000'000);
}

// dim 0 = 10 over 4 ranks: ceil(10/4) = 3 rows of 3 per rank (9 elements), padded full size 12 rows.
TEST(Estimate, PaddingAndPhases) {
  ModelSpec m;
  m.params.push_back({"w", {10, 3}, 0});
  m.units.push_back({"u0", 0});
  MemoryEstimateInput in = input(m, Strategy::FullShard, 4);
  in.prefetch = false;
  const MemoryEstimate e = estimate_memory(in);
  EXPECT_EQ(e.numel, 30);
  EXPECT_EQ(e.parameter_bytes, 36);            // 9 x 4
  EXPECT_EQ(e.gradient_bytes, 36);             // 9 x 4
  EXPECT_EQ(e.optimizer_state_bytes, 72);      // 2 x 9 x 4
  EXPECT_EQ(e.gathered_parameter_bytes, 144);  // 12 x 3 x 4 (padded)
  EXPECT_EQ(e.unsharded_gradient_bytes, 120);  // 30 x 4 (autograd's gradient has the real shape)
  expect_bytes(e.after_init, 36, 0, 0, 0, 0);
  expect_bytes(e.forward, 36 + 144, 0, 72, 0, 0);
  // Unit 0's reduce-scatter: its gradient (120) and the padded fp32 buffer (144).
  expect_bytes(e.backward, 36 + 144, 120, 72, 0, 144);
  expect_bytes(e.optimizer_step, 36, 36, 72, 0, 0);
  EXPECT_EQ(e.peak.total(), 180 + 120 + 72 + 144);
  EXPECT_EQ(e.peak_phase, "backward");
  EXPECT_EQ(e.peak_model_state_bytes, 180 + 120 + 72);

  // bf16 compute copies and bf16 reduce-scatter: half of each transient.
  in.param_dtype = DType::BFloat16;
  in.reduce_dtype = DType::BFloat16;
  const MemoryEstimate h = estimate_memory(in);
  EXPECT_EQ(h.parameter_bytes, 36);
  EXPECT_EQ(h.gathered_parameter_bytes, 72);
  EXPECT_EQ(h.unsharded_gradient_bytes, 60);
  expect_bytes(h.backward, 36 + 72, 60, 72, 0, 72);
}

// HYBRID_SHARD world 8 = 4 ranks per shard group x 2 replicas: per rank as FULL_SHARD over 4.
TEST(Estimate, HybridIsFullShardOverTheShardGroup) {
  ModelSpec m;
  m.params.push_back({"w", {10, 3}, -1});
  MemoryEstimateInput in = input(m, Strategy::HybridShard, 8);
  in.shard_group = 4;
  const MemoryEstimate e = estimate_memory(in);
  EXPECT_EQ(e.shard_world, 4);
  EXPECT_EQ(e.parameter_bytes, 36);
  EXPECT_EQ(e.model_state_bytes(), 144);
  in.shard_group = 8;  // one group: FULL_SHARD over 8, ceil(10/8) = 2 rows of 3
  EXPECT_EQ(estimate_memory(in).parameter_bytes, 24);
  in.shard_group = 1;  // a group of one: every rank holds everything
  EXPECT_EQ(estimate_memory(in).parameter_bytes, 120);
}

// NO_SHARD holds what DDP holds: 16 bytes per parameter with AdamW in fp32, at any world.
TEST(Estimate, NoShardHoldsDdpModelState) {
  const MemoryEstimate e = estimate_memory(input(tb::dist::model_from_parameter_count(1000, 4), Strategy::NoShard, 4));
  EXPECT_EQ(e.shard_world, 1);
  EXPECT_EQ(e.model_state_bytes(), 16000);
  EXPECT_EQ(e.gathered_parameter_bytes, 0);  // fp32: computes with the parameters themselves
}

TEST(Estimate, OptimizerState) {
  MemoryEstimateInput in = input(tb::dist::model_from_parameter_count(800), Strategy::FullShard, 2);
  in.optimizer = OptimizerKind::Sgd;
  EXPECT_EQ(estimate_memory(in).optimizer_state_bytes, 0);
  in.optimizer = OptimizerKind::SgdMomentum;
  EXPECT_EQ(estimate_memory(in).optimizer_state_bytes, 1600);  // 400 x 4
  in.optimizer = OptimizerKind::Adam;
  EXPECT_EQ(estimate_memory(in).optimizer_state_bytes, 3200);
  in.amsgrad = true;
  EXPECT_EQ(estimate_memory(in).optimizer_state_bytes, 4800);
}

// Two units of 8 elements and a root of 4, world 2, plain SGD, prefetch: shards of 4 (16 B) and
// 2 (8 B); gathered and unsharded 32 B per unit and 16 B for the root; activations 100 per unit
// and 10 in the root.
ModelSpec two_units() {
  ModelSpec m;
  m.params.push_back({"a", {8}, 0});
  m.params.push_back({"b", {8}, 1});
  m.params.push_back({"r", {4}, -1});
  m.units = {{"u0", 100}, {"u1", 100}};
  m.root_activation_bytes = 10;
  return m;
}

TEST(Estimate, FullShardMomentsWithPrefetch) {
  MemoryEstimateInput in = input(two_units(), Strategy::FullShard, 2);
  in.optimizer = OptimizerKind::Sgd;
  const MemoryEstimate e = estimate_memory(in);
  EXPECT_EQ(e.parameter_bytes, 40);
  // Forward, unit 1 running: root + unit 1 gathered (48), all activations (210).
  expect_bytes(e.forward, 40 + 48, 0, 0, 210, 0);
  // Backward, unit 1's reduce-scatter: root + unit 1 + unit 0 prefetched (80); root's and unit
  // 1's unsharded gradients (16 + 32); unit 1's buffer (32); activations 10 + 200.
  expect_bytes(e.backward, 40 + 80, 48, 0, 210, 32);
  // Unit 0's moment: 16 + 32 = 48 gradient bytes (unit 1's was freed when copied into its reduce
  // buffer); gathered root + unit 0. The end of backward: shard gradients 40, root gathered 16.
  EXPECT_EQ(e.unsharded_gradient_bytes, 48);
  EXPECT_EQ(e.gathered_parameter_bytes, 80);
  EXPECT_EQ(e.peak_model_state_bytes, 168);  // 120 + 48 at unit 1, 88 + 48 at unit 0, 56 + 40 at the end
  expect_bytes(e.optimizer_step, 40, 40, 0, 0, 0);
}

TEST(Estimate, ShardGradOpKeepsUnitsGathered) {
  MemoryEstimateInput in = input(two_units(), Strategy::ShardGradOp, 2);
  in.optimizer = OptimizerKind::Sgd;
  const MemoryEstimate e = estimate_memory(in);
  // End of forward: every unit still gathered (16 + 32 + 32), all activations.
  expect_bytes(e.forward, 40 + 80, 0, 0, 210, 0);
  in.prefetch = false;
  in.strategy = Strategy::FullShard;
  // FULL_SHARD without prefetch: one unit at a time, the root always (16 + 32).
  EXPECT_EQ(estimate_memory(in).gathered_parameter_bytes, 48);
}

// At allocator block sizes (memory::block_size): 30 floats = 120 B -> a 128 B block; Adam's
// 0-dim step is a 64 B block.
TEST(Estimate, AllocatorBlocks) {
  ModelSpec m;
  m.params.push_back({"w", {10, 3}, -1});
  MemoryEstimateInput in = input(m, Strategy::Ddp, 2);
  in.allocator_blocks = true;
  const MemoryEstimate e = estimate_memory(in);
  EXPECT_EQ(e.parameter_bytes, 128);
  EXPECT_EQ(e.gradient_bytes, 128);
  EXPECT_EQ(e.optimizer_state_bytes, 2 * 128 + 64);
  EXPECT_EQ(e.persistent_communication_bytes, 128);
  in.gradient_as_bucket_view = true;  // .grad is the bucket
  EXPECT_EQ(estimate_memory(in).gradient_bytes, 0);
}

// DDP's buckets: two 1.2 MB parameters; walking them in reverse, the first closes the 1 MiB first
// bucket, the second stays in a bucket of its own. Each 1,200,000 B buffer is a block of
// 293 x 4 KiB = 1,200,128 B (one 2.4 MB bucket would be a 4 MiB block).
TEST(Estimate, DdpBucketsFollowTheCaps) {
  ModelSpec m;
  m.params.push_back({"a", {300000}, -1});
  m.params.push_back({"b", {300000}, -1});
  MemoryEstimateInput in = input(m, Strategy::Ddp, 2);
  in.allocator_blocks = true;
  EXPECT_EQ(estimate_memory(in).persistent_communication_bytes, 2 * 1200128);
  in.first_bucket_cap_mb = 25;  // both in one bucket
  EXPECT_EQ(estimate_memory(in).persistent_communication_bytes, 4194304);
  // Caps past int64 bytes, or infinite, are no caps (not a conversion that wraps): one bucket.
  in.first_bucket_cap_mb = 1e300;
  in.bucket_cap_mb = INFINITY;
  EXPECT_EQ(estimate_memory(in).persistent_communication_bytes, 4194304);
}

void expect_same_parameters(const ModelSpec& spec, const tb::nn::Module& model) {
  const auto named = model.named_parameters();
  ASSERT_EQ(spec.params.size(), named.size());
  int64_t numel = 0;
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(spec.params[i].name, named[i].first);
    const auto sizes = named[i].second.sizes();
    EXPECT_EQ(spec.params[i].shape, std::vector<int64_t>(sizes.begin(), sizes.end())) << named[i].first;
    numel += named[i].second.numel();
  }
  EXPECT_EQ(spec.numel(), numel);
}

TEST(Estimate, GptParametersAreTheModels) {
  tb::nn::GPTConfig c;  // vocab 64, d 32, 2 layers, 4 heads, max_seq 16
  const ModelSpec spec = tb::dist::gpt_model(c);
  expect_same_parameters(spec, tb::nn::GPT(c));
  // 2 V d + S d + L (12 d^2 + 13 d) + 2 d = 4096 + 512 + 2 x 12704 + 64.
  EXPECT_EQ(spec.numel(), 30080);
  ASSERT_EQ(spec.units.size(), 2u);
  EXPECT_EQ(spec.units[1].name, "blocks.1");
  c.n_layers = 3;
  c.d_model = 48;
  c.n_heads = 6;
  c.vocab = 50;
  expect_same_parameters(tb::dist::gpt_model(c), tb::nn::GPT(c));
}

TEST(Estimate, GptActivations) {
  // B 2, T 16, d 32, H 4, V 64, fp32: per block (16 x 32 x 32 + 32 x 16 x 4) x 4 + 16 x 32 =
  // 74240; root 2 x 32 x 32 x 4 + 2 x 32 x 4 + 2 x 32 x 64 x 4 = 24832.
  const ModelSpec m = tb::dist::gpt_model(tb::nn::GPTConfig{}, 2, 16);
  EXPECT_EQ(m.units[0].activation_bytes, 74240);
  EXPECT_EQ(m.root_activation_bytes, 24832);
  EXPECT_EQ(estimate_memory(input(m, Strategy::Ddp, 1)).activation_bytes, 2 * 74240 + 24832);
}

TEST(Estimate, MlpParametersAreTheModels) {
  const ModelSpec spec = tb::dist::mlp_model(784, 1024, 10);
  expect_same_parameters(spec, tb::nn::MLP(784, 1024, 10));
  // 784 x 1024 + 1024 + 1024 x 1024 + 1024 + 1024 x 10 + 10
  EXPECT_EQ(spec.numel(), 1863690);
  expect_same_parameters(tb::dist::mlp_model(5, 7, 3), tb::nn::MLP(5, 7, 3));
}

TEST(Estimate, ParameterCountUnits) {
  const ModelSpec m = tb::dist::model_from_parameter_count(10, 3, 7);
  ASSERT_EQ(m.params.size(), 3u);
  EXPECT_EQ(m.params[0].shape, std::vector<int64_t>{3});
  EXPECT_EQ(m.params[2].shape, std::vector<int64_t>{4});
  EXPECT_EQ(m.units[2].activation_bytes, 3);  // 7 / 3 = 2 each, the last takes the remainder
  EXPECT_EQ(m.numel(), 10);
}

// The phases' totals are checked like every other sum: activations that bring a phase past int64
// are an error, not a total that wraps negative and loses to a smaller phase. One parameter,
// FULL_SHARD at world 1, fp32: 4 B master (computed with, not gathered), 8 B of AdamW state.
TEST(Estimate, PhaseTotalsPastInt64AreAnError) {
  MemoryEstimateInput in = input(tb::dist::model_from_parameter_count(1, 0, INT64_MAX - 807), Strategy::FullShard, 1);
  const MemoryEstimate e = estimate_memory(in);
  expect_bytes(e.forward, 4, 0, 8, INT64_MAX - 807, 0);
  EXPECT_EQ(e.peak.total(), INT64_MAX - 795);
  EXPECT_EQ(e.peak_phase, "forward");
  in.model = tb::dist::model_from_parameter_count(1, 0, INT64_MAX);
  expect_contains(error_of([&] { estimate_memory(in); }), {"past int64"});
  in.model = tb::dist::model_from_parameter_count(1, 0, INT64_MAX - 11);  // 1 byte past, in the forward
  expect_contains(error_of([&] { estimate_memory(in); }), {"past int64"});
  MemoryBytes b;
  b.parameters = INT64_MAX;
  b.optimizer_state = 1;
  expect_contains(error_of([&] { (void)b.model_state(); }), {"past int64"});
  b.optimizer_state = 0;
  b.communication = 1;
  EXPECT_EQ(b.model_state(), INT64_MAX);
  expect_contains(error_of([&] { (void)b.total(); }), {"past int64"});
  MemoryEstimate m;
  m.parameter_bytes = INT64_MAX;
  m.gradient_bytes = 1;
  expect_contains(error_of([&] { (void)m.model_state_bytes(); }), {"past int64"});
}

// kMaxUnits units (each 4 parameters, 100 activation bytes) in time linear in the units: the
// estimator keeps running sums. SHARD_GRAD_OP over 2 ranks, AdamW fp32, prefetch: per unit a
// shard of 2 (8 B master, 8 B gradient, 16 B state) and 16 B gathered, unsharded and in the
// reduce buffer; the root is empty. The forward ends with every unit gathered (16 x 10^6) and
// every activation (10^8); the backward's largest moment is the last unit's reduction.
TEST(Estimate, AMillionUnitsInLinearTime) {
  const int64_t n = tb::dist::kMaxUnits;
  ASSERT_EQ(n, 1'000'000);
  MemoryEstimateInput in = input(tb::dist::model_from_parameter_count(4 * n, n, 100 * n), Strategy::ShardGradOp, 2);
  const MemoryEstimate e = estimate_memory(in);
  EXPECT_EQ(e.numel, 4 * n);
  EXPECT_EQ(e.model_state_bytes(), 32 * n);
  expect_bytes(e.forward, 8 * n + 16 * n, 0, 16 * n, 100 * n, 0);
  expect_bytes(e.backward, 8 * n + 16 * n, 16, 16 * n, 100 * n, 16);
  EXPECT_EQ(e.peak_phase, "backward");
  EXPECT_EQ(e.gathered_parameter_bytes, 16 * n);
  // DDP at world 1: 16 B per unit each of parameters and gradients, 32 B of state. Without
  // activations the backward peaks at unit 0's reduction, every later unit's gradient whole
  // (16 x 10^6), as at the root's. Buckets: 1 MiB, then the other 14,951,424 B (under 25 MiB).
  in = input(tb::dist::model_from_parameter_count(4 * n, n), Strategy::Ddp, 1);
  const MemoryEstimate d = estimate_memory(in);
  EXPECT_EQ(d.persistent_communication_bytes, 16 * n);
  expect_bytes(d.backward, 16 * n, 16 * n, 32 * n, 0, 16 * n);
  expect_bytes(d.forward, 16 * n, 0, 32 * n, 0, 16 * n);
}

// The bounds on the models built here (kMaxUnits, kMaxLayers) and sizes whose products pass
// int64 are errors, not allocations that run out of memory or dimensions that wrap.
TEST(Estimate, ModelSizesAreBounded) {
  expect_contains(error_of([] { tb::dist::model_from_parameter_count(1'000'000'000'000'000, 1'000'001); }),
                  {"at most 1000000 units", "got 1000001"});
  expect_contains(error_of([] { tb::dist::model_from_parameter_count(1'000'000'000'000'000, 1'000'000'000'000'000); }),
                  {"at most 1000000 units"});
  tb::nn::GPTConfig c;
  c.n_layers = 100'001;
  expect_contains(error_of([&] { tb::dist::gpt_model(c); }), {"at most 100000 layers", "got 100001"});
  c.n_layers = 1'000'000'000'000;
  expect_contains(error_of([&] { tb::dist::gpt_model(c); }), {"at most 100000 layers"});
  c.n_layers = 2;
  c.d_model = int64_t(1) << 62;  // 3 d and 4 d pass int64
  c.n_heads = 1;
  expect_contains(error_of([&] { tb::dist::gpt_model(c); }), {"past int64"});
}

TEST(Estimate, BadInput) {
  const ModelSpec m = tb::dist::model_from_parameter_count(100);
  MemoryEstimateInput in = input(m, Strategy::FullShard, 0);
  expect_contains(error_of([&] { estimate_memory(in); }), {"world must be at least 1", "got 0"});
  in.world = 8;
  in.strategy = Strategy::HybridShard;
  in.shard_group = 3;
  expect_contains(error_of([&] { estimate_memory(in); }), {"shard group", "divides the world 8", "got 3"});
  in.shard_group = 0;
  expect_contains(error_of([&] { estimate_memory(in); }), {"HYBRID_SHARD needs a shard group"});
  in.strategy = Strategy::FullShard;
  in.shard_group = 2;
  expect_contains(error_of([&] { estimate_memory(in); }), {"only for hybrid_shard", "full_shard"});
  in.shard_group = 0;
  in.param_dtype = DType::Int64;
  expect_contains(error_of([&] { estimate_memory(in); }), {"must be floating", "int64"});
  in.param_dtype = DType::Float32;
  in.model.params[0].shape = {-3};
  expect_contains(error_of([&] { estimate_memory(in); }), {"negative dimension", "-3"});
  in.model.params[0].shape = {4};
  in.model.params[0].unit = 2;
  expect_contains(error_of([&] { estimate_memory(in); }), {"names unit 2 of 0"});
  in.model = tb::dist::model_from_parameter_count(int64_t(1) << 62);  // x 16 bytes overflows
  in.model.params[0].unit = -1;
  expect_contains(error_of([&] { estimate_memory(in); }), {"past int64"});
  expect_contains(error_of([] { tb::dist::model_from_parameter_count(0); }), {"must be positive"});
  expect_contains(error_of([] { tb::dist::model_from_parameter_count(5, 6); }), {"units must be between 0 and"});
  expect_contains(error_of([] { tb::dist::strategy_from_name("zero3"); }), {"unknown strategy 'zero3'", "full_shard"});
  expect_contains(error_of([] { tb::dist::optimizer_from_name("lion"); }), {"unknown optimizer 'lion'", "adamw"});
  tb::nn::GPTConfig c;
  c.n_heads = 5;
  expect_contains(error_of([&] { tb::dist::gpt_model(c); }), {"not divisible by the 5 heads"});
  expect_contains(error_of([] { tb::dist::gpt_model(tb::nn::GPTConfig{}, 1, 17); }), {"max_seq 16"});
  EXPECT_EQ(tb::dist::strategy_from_name("hybrid_shard"), Strategy::HybridShard);
  EXPECT_EQ(tb::dist::optimizer_from_name("sgd-momentum"), OptimizerKind::SgdMomentum);
}

}  // namespace
