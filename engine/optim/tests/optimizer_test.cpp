// The update rules on one or two numbers, worked out by hand from torch.optim's algorithms:
// SGD (plain, momentum, weight decay), Adam's first steps (bias-corrected, so the first update is
// lr * g / (|g| + eps)) and AdamW's decoupled decay.
#include <gtest/gtest.h>

#include <memory>

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

// Adam's float32 kernel runs 16 lanes at a time with a scalar loop for the rest: a 37-element
// parameter (two vectors and a tail) must end bitwise where 37 one-element parameters (scalar loop
// only) end, for every variant (L2 decay, decoupled, amsgrad, maximize, beta1 >= 0.5 whose lerp
// takes the other branch), over steps whose gradients shrink so amsgrad's maximum matters.
TEST(Optimizer, AdamVectorLanesMatchTheScalarLoopBitwise) {
  constexpr int64_t n = 37;
  struct Variant {
    Adam::Options o;
    bool decoupled;
  };
  const std::vector<Variant> variants = {
      {{.lr = 0.01}, false},
      {{.lr = 0.01, .weight_decay = 0.1}, false},
      {{.lr = 0.01, .weight_decay = 0.1}, true},
      {{.lr = 0.01, .amsgrad = true}, true},
      {{.lr = 0.01, .weight_decay = 0.05, .maximize = true}, false},
      {{.lr = 0.01, .betas = {0.2, 0.9}, .weight_decay = 0.01, .amsgrad = true}, true},
  };
  auto make = [](const Variant& v, std::vector<Tensor> ps) -> std::unique_ptr<Adam> {
    if (!v.decoupled) return std::make_unique<Adam>(std::move(ps), v.o);
    const Adam::Options& o = v.o;
    return std::make_unique<AdamW>(std::move(ps),
                                   AdamW::Options{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad, o.maximize});
  };
  for (size_t k = 0; k < variants.size(); ++k) {
    std::vector<double> init(n);
    for (int64_t i = 0; i < n; ++i) init[size_t(i)] = 0.37 * double(i % 11) - 1.3;
    Tensor whole = from_vector(init, DType::Float32);
    whole.requires_grad_();
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < n; ++i) {
      parts.push_back(from_vector(std::vector<double>{init[size_t(i)]}, DType::Float32));
      parts.back().requires_grad_();
    }
    auto vec_opt = make(variants[k], {whole});
    auto scalar_opt = make(variants[k], parts);
    for (int step = 0; step < 4; ++step) {
      std::vector<double> g(n);
      for (int64_t i = 0; i < n; ++i) g[size_t(i)] = (0.9 * double((i * 7) % 13) - 5.1) / double(1 + 3 * step);
      whole.set_grad(from_vector(g, DType::Float32));
      for (int64_t i = 0; i < n; ++i)
        parts[size_t(i)].set_grad(from_vector(std::vector<double>{g[size_t(i)]}, DType::Float32));
      vec_opt->step();
      scalar_opt->step();
    }
    const std::vector<double> got = values(whole);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(got[size_t(i)], values(parts[size_t(i)])[0]) << "variant " << k << ", element " << i;
  }
}

}  // namespace
}  // namespace tb::optim
