// The autograd engine on graphs small enough to follow by hand: derivatives of closed forms, the
// order nodes run in, accumulation into leaves, retain_graph, tensor hooks and retain_grad,
// no_grad and inference mode, the saved-tensor version check and anomaly mode naming the op.
// The gradient of every op against LibTorch's autograd is the autograd suite (suites/autograd).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/tests/leaf.h"
#include "engine/core/tests/error_of.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

namespace A = autograd;
using testing::error_of;
using testing::expect_contains;
using testing::leaf;
using testing::values;
using V = std::vector<double>;

TEST(Autograd, DerivativesOfClosedForms) {
  Tensor x = leaf({2});
  tb::pow(x, 3).backward();  // d/dx x^3 = 3x^2 = 12 at 2
  EXPECT_EQ(values(x.grad()), V({12}));

  Tensor y = leaf({0.5});
  tb::mul(tb::sin(y), y).backward();  // d/dy y sin y = sin y + y cos y
  EXPECT_NEAR(values(y.grad())[0], std::sin(0.5) + 0.5 * std::cos(0.5), 1e-15);

  Tensor z = leaf({1, 2, 3});
  tb::sum(tb::mul(z, z)).backward();  // d/dz sum z^2 = 2z
  EXPECT_EQ(values(z.grad()), V({2, 4, 6}));

  Tensor w = leaf({0});
  tb::exp(tb::mul(w, 2)).backward();  // d/dw e^(2w) = 2 at 0
  EXPECT_EQ(values(w.grad()), V({2}));

  // grad() returns the gradient instead of accumulating it: d/dx x^3 at 2, .grad untouched
  Tensor u = leaf({2});
  const auto g = A::grad({tb::pow(u, 3)}, {u});
  EXPECT_EQ(values(g.at(0)), V({12}));
  EXPECT_FALSE(u.grad().defined());
}

TEST(Autograd, BothPathsOfADiamondAdd) {
  // y = 2x, z = y + y^2: dz/dx = (1 + 2y) * 2 = 10 at x = 1
  Tensor x = leaf({1});
  Tensor y = tb::mul(x, 2);
  tb::add(y, tb::mul(y, y)).backward();
  EXPECT_EQ(values(x.grad()), V({10}));
}

TEST(Autograd, NodesRunInReverseCreationOrderAmongReadyOnes) {
  // a = 2x (node 1), b = a + 1 (node 2), c = 3a (node 3), d = b + c (node 4). The engine runs the
  // ready node with the highest sequence number: d, then c before b, then a once both fed it.
  Tensor x = leaf({1});
  Tensor a = tb::mul(x, 2);
  Tensor b = tb::add(a, 1);
  Tensor c = tb::mul(a, 3);
  Tensor d = tb::add(b, c);
  std::vector<std::string> order;
  for (auto [t, name] : {std::pair{d, "d"}, {c, "c"}, {b, "b"}, {a, "a"}})
    t.register_hook([&order, name = std::string(name)](const Tensor&) {
      order.push_back(name);
      return Tensor();
    });
  EXPECT_EQ(d.grad_fn()->name(), "AddBackward0");
  EXPECT_EQ(c.grad_fn()->name(), "MulBackward0");
  EXPECT_EQ(c.grad_fn()->forward_op(), "mul");
  EXPECT_LT(a.grad_fn()->sequence_nr(), d.grad_fn()->sequence_nr());
  d.backward();
  EXPECT_EQ(order, std::vector<std::string>({"d", "c", "b", "a"}));
  EXPECT_EQ(values(x.grad()), V({8}));  // d = 2x + 1 + 6x
}

TEST(Autograd, GradientsAccumulateIntoLeaves) {
  Tensor x = leaf({1, 2});
  tb::sum(tb::mul(x, 3)).backward();
  EXPECT_EQ(values(x.grad()), V({3, 3}));
  tb::sum(tb::mul(x, x)).backward();  // + 2x
  EXPECT_EQ(values(x.grad()), V({5, 7}));
  x.set_grad(Tensor());  // zero_grad(set_to_none)
  tb::sum(x).backward();
  EXPECT_EQ(values(x.grad()), V({1, 1}));
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(tb::sum(x).is_leaf());
}

TEST(Autograd, RetainGraph) {
  Tensor x = leaf({3});
  Tensor y = tb::mul(x, x);
  y.backward({}, /*retain_graph=*/true);
  y.backward();  // the saved x is still there: 6 + 6
  EXPECT_EQ(values(x.grad()), V({12}));
  expect_contains(error_of([&] { y.backward(); }),
                  {"MulBackward0", "Trying to backward through the graph a second time", "retain_graph=true"});
}

TEST(Autograd, HooksAndRetainGrad) {
  Tensor x = leaf({2});
  Tensor y = tb::mul(x, 2);  // 4
  Tensor z = tb::mul(y, y);  // 16
  y.retain_grad();
  const int64_t doubler = x.register_hook([](const Tensor& g) { return tb::mul(g, 2); });
  z.backward({}, /*retain_graph=*/true);
  EXPECT_EQ(values(y.grad()), V({8}));   // dz/dy = 2y
  EXPECT_EQ(values(x.grad()), V({32}));  // dz/dx = 2y * 2 = 16, doubled by the hook
  EXPECT_TRUE(y.retains_grad());
  x.remove_hook(doubler);
  x.set_grad(Tensor());
  y.set_grad(Tensor());
  // a hook on a non-leaf replaces the gradient flowing on from it
  y.register_hook([](const Tensor& g) { return tb::mul(g, 0); });
  z.backward();
  EXPECT_EQ(values(x.grad()), V({0}));
  // intermediates without retain_grad keep no .grad
  Tensor w = tb::mul(x, 3);
  tb::mul(w, 1).backward();
  EXPECT_FALSE(w.grad().defined());
  expect_contains(error_of([] { from_vector({1}).register_hook([](const Tensor& g) { return g; }); }),
                  {"register_hook", "doesn't require gradient"});
}

TEST(Autograd, NoGradAndInferenceMode) {
  Tensor x = leaf({2});
  {
    A::NoGradGuard g;
    EXPECT_FALSE(A::grad_mode_enabled());
    Tensor y = tb::mul(x, x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  EXPECT_TRUE(A::grad_mode_enabled());
  EXPECT_FALSE(x.detach().requires_grad());
  EXPECT_TRUE(x.detach().shares_storage(x));
  Tensor inf;
  {
    A::InferenceMode im;
    EXPECT_TRUE(A::inference_mode_enabled());
    inf = tb::mul(x, 2);
    EXPECT_TRUE(inf.is_inference());
    EXPECT_FALSE(inf.requires_grad());
  }
  expect_contains(error_of([&] { tb::mul(inf, x); }), {"Inference tensors cannot be saved for backward"});
  expect_contains(error_of([&] { fill_(inf, 0); }), {"Inplace update to inference tensor outside InferenceMode"});
  expect_contains(error_of([] { from_vector({1}, DType::Int64).requires_grad_(); }), {"requires_grad_"});
}

TEST(Autograd, InPlaceChangeOfASavedTensorIsAnError) {
  Tensor x = leaf({1, 2});
  Tensor a = tb::mul(x, 2);  // version 0
  Tensor b = tb::mul(a, a);  // saves a at version 0
  tb::mul_(a, 3);            // version 1
  expect_contains(error_of([&] { tb::sum(b).backward(); }),
                  {"MulBackward0", "modified by an inplace operation", "[float64 [2]]", "is at version 1",
                   "expected version 0", "the backward of mul"});
  expect_contains(error_of([&] { tb::mul_(x, 2); }),
                  {"inplace", "a leaf Variable that requires grad is being used in an in-place operation"});
}

// cat skips a 1-D empty input (PyTorch's legacy rule) but, as PyTorch, still gives it an empty
// gradient: the graph behind it runs, so a leaf there gets an empty .grad and a saved tensor
// changed in place is still caught (found by opfuzz: LibTorch raised where the engine did not).
TEST(Autograd, CatGivesASkippedEmptyInputAnEmptyGradient) {
  Tensor x = empty({0}, DType::Float64);
  x.requires_grad_();
  Tensor w = leaf({1, 2});
  tb::sum(tb::cat({tb::sqrt(x), w}, 0)).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().sizes(), core::Shape{0});
  EXPECT_EQ(values(w.grad()), V({1, 1}));

  Tensor y = tb::sqrt(x);  // saves its output
  tb::mul_(y, 2.0);
  expect_contains(error_of([&] {
                    tb::sum(tb::cat({y, w}, 0)).backward();
                  }),
                  {"SqrtBackward0", "modified by an inplace operation", "is at version 1"});
}

TEST(Autograd, AnomalyModeNamesTheOp) {
  Tensor x = leaf({0});
  A::DetectAnomalyGuard anomaly;
  EXPECT_TRUE(A::anomaly_mode_enabled());
  Tensor y = tb::sqrt(x);  // d/dx sqrt(x) = 1 / (2 sqrt x): inf at 0
  EXPECT_EQ(error_of([&] { y.backward(); }),
            "SqrtBackward0: Function 'SqrtBackward0' returned nan or inf values in its 0th output; it is the "
            "backward of the forward op 'sqrt' (anomaly mode)");
}

TEST(Autograd, BackwardArgumentErrors) {
  Tensor x = leaf({1, 2});
  expect_contains(error_of([&] { tb::mul(x, 2).backward(); }),
                  {"grad can be implicitly created only for scalar outputs"});
  expect_contains(error_of([] { from_vector({1}).backward(); }), {"does not require grad and does not have a grad_fn"});
}

}  // namespace
}  // namespace tb
