// Note [Autocast weight shadows] (engine/autograd/autocast.h): the fused Adam/AdamW step writes the
// bfloat16 rounding of the weights autocast casts, and the next cast at that version is served
// from it. Checked: the shadow is bitwise the cast; training with shadows is bitwise training
// without them (linear, linear_relu, matmul, conv2d); a write after the step, a cast still held
// from an earlier step, and a parameter that died are never served stale; a shadow no forward
// takes is dropped.
#include <gtest/gtest.h>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/rng.h"
#include "engine/optim/adam.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

namespace A = tb::autograd;

struct Net {
  Tensor w1, b1, w2, b2, k;  // two linears, a matmul weight and a conv2d kernel
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, k}; }
};

Net make_net(uint64_t seed) {
  core::Generator g(seed);
  Net n;
  // 64 x 520 floats: past the optimizer's serial bound (2^15), so its threads each write chunks.
  n.w1 = mul(randn({64, 520}, DType::Float32, &g), 0.1).requires_grad_(true);
  n.b1 = mul(randn({64}, DType::Float32, &g), 0.1).requires_grad_(true);
  n.w2 = mul(randn({32, 64}, DType::Float32, &g), 0.1).requires_grad_(true);
  n.b2 = zeros({32}).requires_grad_(true);
  n.k = mul(randn({4, 2, 3, 3}, DType::Float32, &g), 0.1).requires_grad_(true);
  return n;
}

struct Batch {
  Tensor x, img;
};
Batch make_batch(uint64_t seed) {
  core::Generator g(seed);
  Batch b;
  b.x = randn({16, 520}, DType::Float32, &g);
  b.img = randn({2, 2, 6, 6}, DType::Float32, &g);
  return b;
}

// One step: loss through linear_relu, linear, matmul (against w2's transpose) and conv2d, each of
// whose float32 weights autocast casts.
void train_step(Net& n, optim::AdamW& opt, const Batch& b, bool shadows) {
  if (!shadows) A::autocast_shadows_clear();
  opt.zero_grad();
  Tensor loss;
  {
    A::AutocastGuard ag;
    Tensor h = linear_relu(b.x, n.w1, n.b1);
    Tensor y = linear(h, n.w2, n.b2);
    Tensor z = matmul(y, n.w2);  // (rows, 64)
    Tensor c = conv2d(b.img, n.k, Tensor(), {1, 1}, {1, 1}, {1, 1}, 1);
    loss = add(sum(mul(z.to(DType::Float32), z.to(DType::Float32))), sum(c.to(DType::Float32)));
  }
  loss.backward();
  opt.step();
}

// A net after one autocast step from an empty registry: its weights registered, their shadows
// written by the step. The batch's seed is the net's + 1.
struct Trained {
  Net n;
  optim::AdamW opt;
  Batch data;
  explicit Trained(uint64_t seed, double lr = optim::AdamW::Options{}.lr)
      : n(make_net(seed)), opt(n.params(), {.lr = lr}), data(make_batch(seed + 1)) {
    A::autocast_shadows_clear();
    train_step(n, opt, data, true);
  }
};

TEST(AutocastShadow, TheStepWritesTheCastsBitsAndTheNextCastIsServedFromThem) {
  Trained t(1);  // registers the weights; the step writes their shadows
  Net& n = t.n;
  for (const Tensor& p : n.params()) {
    const Tensor s = A::autocast_valid_shadow(p);
    ASSERT_TRUE(s.defined());
    EXPECT_TRUE(testing::bitwise_equal(s, p.detach().to(DType::BFloat16)));
    A::AutocastGuard ag;
    const Tensor cast = A::autocast_lower(p);
    EXPECT_EQ(cast.data(), s.data());   // served, not cast again
    EXPECT_TRUE(cast.requires_grad());  // with the cast's backward node
  }
}

TEST(AutocastShadow, TrainingWithShadowsIsBitwiseTrainingWithout) {
  const Batch data = make_batch(3);
  Net with = make_net(4), without = make_net(4);
  optim::AdamW o1(with.params(), {}), o2(without.params(), {});
  for (int step = 0; step < 5; ++step) train_step(without, o2, data, false);
  A::autocast_shadows_clear();
  for (int step = 0; step < 5; ++step) {
    for (const Tensor& p : with.params()) EXPECT_EQ(A::autocast_valid_shadow(p).defined(), step > 0);
    train_step(with, o1, data, true);
  }
  for (size_t i = 0; i < with.params().size(); ++i) {
    EXPECT_TRUE(testing::bitwise_equal(with.params()[i], without.params()[i])) << "parameter " << i;
    EXPECT_TRUE(testing::bitwise_equal(with.params()[i].grad(), without.params()[i].grad())) << "gradient " << i;
  }
}

TEST(AutocastShadow, AWriteAfterTheStepIsCastAfresh) {
  Trained t(5);  // registers the weights; the step writes their shadows
  Net& n = t.n;
  {
    A::NoGradGuard ng;
    mul_(n.w1, 3.0);  // e.g. a user's rescale, or a checkpoint load
  }
  EXPECT_FALSE(A::autocast_valid_shadow(n.w1).defined());
  A::AutocastGuard ag;
  EXPECT_TRUE(testing::bitwise_equal(A::autocast_lower(n.w1), n.w1.detach().to(DType::BFloat16)));
}

TEST(AutocastShadow, ACastStillHeldKeepsItsValues) {
  Trained t(7, 0.1);  // registers the weights; the step writes their shadows
  Net& n = t.n;
  optim::AdamW& opt = t.opt;
  const Batch& data = t.data;
  Tensor held;
  {
    A::AutocastGuard ag;
    held = A::autocast_lower(n.w1);  // served from the shadow, and kept past the next step
  }
  const Tensor before = held.detach().clone();
  train_step(n, opt, data, true);
  EXPECT_TRUE(testing::bitwise_equal(held, before));  // the step wrote a new buffer, not this one
  EXPECT_FALSE(testing::bitwise_equal(A::autocast_valid_shadow(n.w1), before));
}

TEST(AutocastShadow, AShadowNoForwardTakesIsDroppedAtTheNextStep) {
  Trained t(11);  // registers the weights; the step writes their shadows
  Net& n = t.n;
  optim::AdamW& opt = t.opt;
  const Batch& data = t.data;
  ASSERT_TRUE(A::autocast_valid_shadow(n.w1).defined());
  // A float32 step: its forward casts nothing, so the step after it writes no shadow.
  opt.zero_grad();
  sum(linear_relu(data.x, n.w1, n.b1)).backward();
  opt.step();
  EXPECT_FALSE(A::autocast_valid_shadow(n.w1).defined());
  // Back under autocast: cast afresh, and the shadows come back with the next step.
  train_step(n, opt, data, true);
  EXPECT_TRUE(A::autocast_valid_shadow(n.w1).defined());
  EXPECT_TRUE(testing::bitwise_equal(A::autocast_valid_shadow(n.w1), n.w1.detach().to(DType::BFloat16)));
}

TEST(AutocastShadow, ADeadParametersEntryIsNeverServed) {
  {
    Trained t(9);
    EXPECT_EQ(A::autocast_shadow_count(), 5u);
  }
  // A fresh parameter (possibly at a dead one's address) is cast from its own values.
  for (int i = 0; i < 8; ++i) {
    Tensor w = full({64, 520}, 0.5 + i, DType::Float32).requires_grad_(true);
    EXPECT_FALSE(A::autocast_valid_shadow(w).defined());
    A::AutocastGuard ag;
    EXPECT_TRUE(testing::bitwise_equal(A::autocast_lower(w), full({64, 520}, 0.5 + i, DType::BFloat16)));
  }
  A::autocast_shadows_clear();
  EXPECT_EQ(A::autocast_shadow_count(), 0u);
}

}  // namespace
}  // namespace tb
