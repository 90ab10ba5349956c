// Where the allocator's bytes go (Note [Memory tags] in engine/memory/allocator.cpp): after an
// MLP's forward, backward and AdamW step each tag holds exactly the bytes derived by hand from
// the parameter shapes; the OOM message names those tags and blocks; requests too large to
// represent are refused before any arithmetic on them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/memory/allocator.h"
#include "engine/nn/activation.h"
#include "engine/nn/container.h"
#include "engine/nn/linear.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

using memory::Tag;

int64_t delta(const memory::Stats& after, const memory::Stats& before, Tag t) {
  return after.allocated_by_tag[int(t)] - before.allocated_by_tag[int(t)];
}

void expect_tags_sum_to_allocated(const memory::Stats& s) {
  int64_t sum = 0;
  for (int t = 0; t < memory::kNumTags; ++t) {
    EXPECT_GE(s.allocated_by_tag[t], 0) << memory::tag_name(Tag(t));
    sum += s.allocated_by_tag[t];
  }
  EXPECT_EQ(sum, s.allocated_bytes);
}

// Bytes of one float32 tensor of each parameter's shape, in allocator blocks.
int64_t blocks_like(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += int64_t(memory::block_size(size_t(t.numel()) * t.itemsize()));
  return n;
}

std::shared_ptr<nn::Sequential> mlp(int64_t in, int64_t hidden, int64_t out) {
  return std::make_shared<nn::Sequential>(
      std::initializer_list<nn::ModulePtr>{std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::ReLU>(),
                                           std::make_shared<nn::Linear>(hidden, out)});
}

TEST(MemoryTags, MlpForwardBackwardAdamWStepAreCountedByRole) {
  auto& a = memory::cpu_allocator();
  const memory::Stats s0 = a.stats();
  auto model = mlp(100, 300, 10);  // odd sizes: blocks are rounded, and the test rounds the same way
  const std::vector<Tensor> params = model->parameters();
  const int64_t param_bytes = blocks_like(params);
  const memory::Stats s1 = a.stats();
  EXPECT_EQ(delta(s1, s0, Tag::Parameter), param_bytes);
  EXPECT_EQ(s1.allocated_bytes - s0.allocated_bytes, param_bytes) << "construction leaves only parameters alive";
  expect_tags_sum_to_allocated(s1);

  Tensor x = randn({32, 100});
  Tensor y = randint(0, 10, {32});
  const memory::Stats s2 = a.stats();
  EXPECT_EQ(delta(s2, s1, Tag::Other), int64_t(memory::block_size(32 * 100 * 4) + memory::block_size(32 * 8)));

  Tensor loss;
  int64_t hidden_bytes = 0;
  {
    Tensor out = (*model)(x);
    loss = tb::cross_entropy(out, y);
    const memory::Stats s3 = a.stats();
    // At least the hidden layer (before and after ReLU, or the fused output with its mask) and
    // the logits are alive, all as activations; nothing else grew.
    hidden_bytes = int64_t(memory::block_size(32 * 300 * 4));
    EXPECT_GE(delta(s3, s2, Tag::Activation), hidden_bytes + int64_t(memory::block_size(32 * 10 * 4)));
    EXPECT_EQ(delta(s3, s2, Tag::Other), 0);
    EXPECT_EQ(delta(s3, s2, Tag::Parameter), 0);
    EXPECT_EQ(delta(s3, s2, Tag::Gradient), 0);
    EXPECT_EQ(delta(s3, s2, Tag::OptimizerState), 0);
    expect_tags_sum_to_allocated(s3);
  }

  loss.backward();
  const memory::Stats s4 = a.stats();
  EXPECT_EQ(delta(s4, s2, Tag::Gradient), param_bytes) << "one .grad per parameter, nothing else left";
  EXPECT_EQ(delta(s4, s2, Tag::Activation), int64_t(memory::block_size(4))) << "only the 0-dim loss remains";
  EXPECT_EQ(delta(s4, s2, Tag::Other), 0);
  EXPECT_EQ(delta(s4, s2, Tag::Parameter), 0);
  expect_tags_sum_to_allocated(s4);

  optim::AdamW opt(params, optim::AdamW::Options{});
  opt.step();
  const memory::Stats s5 = a.stats();
  // exp_avg and exp_avg_sq in each parameter's shape, and "step", a 0-dim float32, per parameter.
  EXPECT_EQ(delta(s5, s4, Tag::OptimizerState),
            2 * param_bytes + int64_t(params.size()) * int64_t(memory::block_size(4)));
  EXPECT_EQ(delta(s5, s4, Tag::Other), 0);
  EXPECT_EQ(delta(s5, s4, Tag::Parameter), 0);
  EXPECT_EQ(delta(s5, s4, Tag::Gradient), 0);
  expect_tags_sum_to_allocated(s5);

  // A second step in grad-free code changes nothing: the state exists, the update is in place.
  model->zero_grad();
  {
    Tensor l2 = tb::cross_entropy((*model)(x), y);
    l2.backward();
  }
  opt.step();
  const memory::Stats s6 = a.stats();
  for (Tag t : {Tag::Parameter, Tag::Gradient, Tag::OptimizerState, Tag::Other})
    EXPECT_EQ(delta(s6, s5, t), 0) << memory::tag_name(t);
  expect_tags_sum_to_allocated(s6);
}

TEST(MemoryTags, NoGradForwardIsNotActivation) {
  auto& a = memory::cpu_allocator();
  auto model = mlp(16, 32, 4);
  Tensor x = randn({8, 16});
  const memory::Stats s0 = a.stats();
  autograd::NoGradGuard no_grad;
  Tensor out = (*model)(x);
  const memory::Stats s1 = a.stats();
  EXPECT_EQ(delta(s1, s0, Tag::Activation), 0);
  EXPECT_EQ(delta(s1, s0, Tag::Other), int64_t(memory::block_size(8 * 4 * 4)));
}

TEST(MemoryTags, RetagMovesBytesExactlyAndConversionKeepsTheTag) {
  auto& a = memory::cpu_allocator();
  const memory::Stats s0 = a.stats();
  Tensor t;
  {
    memory::TagGuard g(Tag::Activation);
    t = empty({1000});
  }
  const int64_t b = int64_t(memory::block_size(4000));
  EXPECT_EQ(delta(a.stats(), s0, Tag::Activation), b);
  t.storage()->set_tag(Tag::Communication);
  const memory::Stats s1 = a.stats();
  EXPECT_EQ(delta(s1, s0, Tag::Activation), 0);
  EXPECT_EQ(delta(s1, s0, Tag::Communication), b);
  expect_tags_sum_to_allocated(s1);
  t = Tensor();
  const memory::Stats s2 = a.stats();
  for (int k = 0; k < memory::kNumTags; ++k) EXPECT_EQ(delta(s2, s0, Tag(k)), 0) << memory::tag_name(Tag(k));

  // Module::to swaps the parameters' storage: the new one is a parameter too.
  auto model = mlp(10, 20, 3);
  const int64_t float32_bytes = blocks_like(model->parameters());
  const memory::Stats s3 = a.stats();
  model->to(DType::Float64);
  const memory::Stats s4 = a.stats();
  EXPECT_EQ(delta(s4, s3, Tag::Parameter), blocks_like(model->parameters()) - float32_bytes);
  EXPECT_EQ(delta(s4, s3, Tag::Other), 0);
}

TEST(MemoryTags, OutOfMemoryNamesTheTagsAndLargestBlocks) {
  auto& a = memory::cpu_allocator();
  const int64_t old = a.limit();
  auto model = mlp(256, 1024, 10);  // a 1 MiB weight
  Tensor x = randn({64, 256});
  Tensor y = randint(0, 10, {64});
  optim::AdamW opt(model->parameters(), optim::AdamW::Options{});
  tb::cross_entropy((*model)(x), y).backward();
  opt.step();
  a.empty_cache();
  const memory::Stats s = a.stats();
  a.set_limit(s.reserved_bytes + (4 << 20));
  std::string msg;
  try {
    Tensor big = empty({8 << 20});  // 32 MiB: over the cap
  } catch (const memory::OutOfMemoryError& e) {
    msg = e.what();
    EXPECT_EQ(e.requested(), uint64_t(32) << 20);
  }
  a.set_limit(old);
  ASSERT_FALSE(msg.empty()) << "expected an OutOfMemoryError";
  for (Tag t : {Tag::Parameter, Tag::Gradient, Tag::OptimizerState}) {
    const std::string want = std::string(memory::tag_name(t)) + "=" + memory::format_bytes(s.allocated_by_tag[int(t)]);
    EXPECT_NE(msg.find(want), std::string::npos) << "missing '" << want << "' in: " << msg;
  }
  // The four largest live blocks are the 1 MiB weight, its gradient and its two Adam moments,
  // each named with its tag (the fifth is smaller: the 64 KiB input); no graph is alive.
  const size_t at = msg.find("Largest live blocks:");
  ASSERT_NE(at, std::string::npos) << msg;
  const std::string largest = msg.substr(at);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t p = largest.find(what); p != std::string::npos; p = largest.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("1 MiB (parameter)"), 1u) << largest;
  EXPECT_EQ(count("1 MiB (gradient)"), 1u) << largest;
  EXPECT_EQ(count("1 MiB (optimizer_state)"), 2u) << largest;
  EXPECT_EQ(count("(activation)"), 0u) << largest;
}

TEST(Allocator, RefusesSizesItCannotRepresent) {
  auto& a = memory::cpu_allocator();
  const memory::Stats before = a.stats();
  for (size_t n : {SIZE_MAX, SIZE_MAX - 63, size_t(1) << 63, (size_t(1) << 63) + 1, size_t(INT64_MAX),
                   memory::kMaxAllocation + 1}) {
    try {
      memory::DataPtr p = a.allocate(n);
      ADD_FAILURE() << "allocate(" << n << ") returned a block";
    } catch (const memory::OutOfMemoryError& e) {
      EXPECT_EQ(e.requested(), uint64_t(n));
      EXPECT_NE(std::string(e.what()).find(std::to_string(n)), std::string::npos) << e.what();
    }
  }
  // Under a cap, a request far above it is refused by the cap (no negative sizes, no wrap).
  const int64_t old = a.limit();
  a.set_limit(int64_t(1) << 30);
  for (size_t n : {size_t(1) << 40, memory::kMaxAllocation, size_t(INT64_MAX) / 2}) {
    try {
      memory::DataPtr p = a.allocate(n);
      ADD_FAILURE() << "allocate(" << n << ") returned a block under a 1 GiB cap";
    } catch (const memory::OutOfMemoryError& e) {
      EXPECT_NE(std::string(e.what()).find("limit of 1 GiB"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("-"), std::string::npos) << "a negative size in: " << e.what();
    }
  }
  a.set_limit(old);
  EXPECT_THROW(a.set_limit(-1), core::Error);
  const memory::Stats after = a.stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(Allocator, MemoryLimitFromTheEnvironmentIsStrict) {
  const char* old = std::getenv("TRAINBENCH_MEMORY_LIMIT");
  const std::string saved = old ? old : "";
  for (const char* v : {"1e30", "inf", "99999999999G", "-1", "0x10", " 5", "5 ", "9223372036854775808"}) {
    ::setenv("TRAINBENCH_MEMORY_LIMIT", v, 1);
    try {
      memory::CpuCachingAllocator fresh;
      ADD_FAILURE() << "TRAINBENCH_MEMORY_LIMIT='" << v << "' was accepted as " << fresh.limit();
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find("TRAINBENCH_MEMORY_LIMIT"), std::string::npos) << e.what();
    }
  }
  ::setenv("TRAINBENCH_MEMORY_LIMIT", "1.5G", 1);
  EXPECT_EQ(memory::CpuCachingAllocator().limit(), int64_t(3) << 29);
  if (old) ::setenv("TRAINBENCH_MEMORY_LIMIT", saved.c_str(), 1);
  else ::unsetenv("TRAINBENCH_MEMORY_LIMIT");
}

}  // namespace
}  // namespace tb
