// The update rules on one or two numbers, worked out by hand from torch.optim's algorithms:
// SGD (plain, momentum, weight decay), Adam's first steps (bias-corrected, so the first update is
// lr * g / (|g| + eps)) and AdamW's decoupled decay.
#include <gtest/gtest.h>

#include "engine/autograd/tests/leaf.h"
#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/state_fence.h"
#include "engine/tensor/tests/values.h"

namespace tb::optim {
namespace {

using testing::leaf;
using testing::values;
using V = std::vector<double>;

void set_grad(const Tensor& p, std::initializer_list<double> g) {
  p.set_grad(from_vector(std::vector<double>(g), DType::Float64));
}

// A background checkpoint may be copying the state (Note [State fences]): every step waits for it
// before writing, SGD's and Adam's (AdamW's too) alike.
TEST(Optimizer, StepRunsTheStateFencesFirst) {
  Tensor w = leaf({1, 2});
  SGD sgd({w}, {.lr = 0.1});
  Adam adam({w}, {.lr = 0.1});
  set_grad(w, {2, -4});
  std::vector<double> seen;  // w's first value when each fence ran
  StateFence fence([&] { seen.push_back(values(w)[0]); });
  sgd.step();
  adam.step();
  EXPECT_EQ(seen, V({1.0, 0.8}));  // each before its own update
}

TEST(Optimizer, SgdPlainMomentumAndWeightDecay) {
  Tensor w = leaf({1, 2});
  SGD plain({w}, {.lr = 0.1});
  set_grad(w, {2, -4});
  plain.step();
  EXPECT_EQ(values(w), V({0.8, 2.4}));  // w - lr g

  Tensor m = leaf({1});
  SGD momentum({m}, {.lr = 0.1, .momentum = 0.9});
  set_grad(m, {1});
  momentum.step();  // buf = g = 1: 1 - 0.1
  momentum.step();  // buf = 0.9 * 1 + 1 = 1.9: 0.9 - 0.19
  EXPECT_NEAR(values(m)[0], 0.71, 1e-15);

  Tensor d = leaf({2});
  SGD decay({d}, {.lr = 0.1, .weight_decay = 0.5});
  set_grad(d, {1});
  decay.step();  // g + wd w = 1 + 1 = 2: 2 - 0.2
  EXPECT_NEAR(values(d)[0], 1.8, 1e-15);

  plain.zero_grad();
  EXPECT_FALSE(w.grad().defined()) << "set_to_none by default";
}

TEST(Optimizer, AdamFirstStepsAndAdamW) {
  Tensor w = leaf({1, 1});
  Adam adam({w}, {.lr = 0.1});
  set_grad(w, {2, -3});
  adam.step();  // m_hat = g, v_hat = g^2: w - 0.1 g / (|g| + 1e-8)
  EXPECT_NEAR(values(w)[0], 1 - 0.1 * 2 / (2 + 1e-8), 1e-15);
  EXPECT_NEAR(values(w)[1], 1 + 0.1 * 3 / (3 + 1e-8), 1e-15);
  adam.step();  // the same gradient again: m_hat = g, v_hat = g^2 once more
  EXPECT_NEAR(values(w)[0], 1 - 2 * 0.1 * 2 / (2 + 1e-8), 1e-14);

  Tensor a = leaf({1});
  AdamW adamw({a}, {.lr = 0.1, .weight_decay = 0.01});
  set_grad(a, {5});
  adamw.step();  // w (1 - lr wd) first, then the Adam step: 0.999 - 0.1 * 5 / (5 + 1e-8)
  EXPECT_NEAR(values(a)[0], 0.999 - 0.1 * 5 / (5 + 1e-8), 1e-15);
}

}  // namespace
}  // namespace tb::optim
