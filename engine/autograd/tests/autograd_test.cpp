// The autograd engine on graphs small enough to follow by hand: derivatives of closed forms, the
// order nodes run in, accumulation into leaves, retain_graph, tensor hooks and retain_grad (also
// across in-place ops), no_grad and inference mode, the saved-tensor version check, in-place ops
// on views made under no_grad, and anomaly mode naming the op.
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

// A hook's replacement must keep the gradient's dtype and sizes, as PyTorch requires ("hook has
// changed the type of value"): a float32 gradient for a float64 tensor, or a shorter one, was
// taken silently.
TEST(Autograd, HooksMayNotChangeTheGradientsTypeOrSize) {
  for (bool on_leaf : {true, false}) {
    for (int change : {0, 1}) {
      Tensor x = leaf({1, 2, 3});
      Tensor y = tb::mul(x, 2);
      Tensor hooked = on_leaf ? x : y;
      hooked.register_hook(
          [change](const Tensor& g) { return change == 0 ? g.to(DType::Float32) : g.narrow(0, 0, 2).contiguous(); });
      expect_contains(error_of([&] { tb::sum(y).backward(); }),
                      {change == 0 ? "a tensor hook has changed the type of value (was float64 got float32)"
                                   : "a tensor hook has changed the size of value (was [3] got [2])"});
    }
  }
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

// A view made under NoGradGuard (or in InferenceMode) has no history: written in place with grad
// mode on, the write would bypass its base's graph (b = 2w, v = b[0:2] under no_grad, v *= 3:
// b is 6 6 2 2 but w.grad came out 2 2 2 2). PyTorch refuses it (CreationMeta::NO_GRAD_MODE)
// whenever the op requires grad, before writing; so does the engine.
TEST(Autograd, InPlaceOnAViewMadeUnderNoGradIsAnError) {
  const std::string no_grad_msg = "no_grad mode and is being modified inplace with grad mode enabled";
  Tensor w = leaf({1, 1, 1, 1});
  Tensor b = tb::mul(w, 2);
  Tensor v, vv;
  {
    A::NoGradGuard g;
    v = b.narrow(0, 0, 2);
    vv = v.narrow(0, 0, 1);  // a no_grad view of a no_grad view
  }
  EXPECT_EQ(error_of([&] { tb::mul_(v, 3); }),
            "inplace: A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given "
            "that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving "
            "both the view and the inplace either both inside the no_grad block (autograd::NoGradGuard; if you "
            "don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked).");
  EXPECT_EQ(values(b.detach()), V({2, 2, 2, 2}));  // refused before the write
  Tensor u = leaf({1, 1});
  expect_contains(error_of([&] { tb::add_(v, u); }), {no_grad_msg});
  expect_contains(error_of([&] { v.copy_(from_vector({5, 5}, DType::Float64)); }), {no_grad_msg});
  expect_contains(error_of([&] { fill_(v, 0); }), {no_grad_msg});
  expect_contains(error_of([&] { tb::mul_(vv, 3); }), {no_grad_msg});
  Tensor of_view = v.narrow(0, 1, 1);  // made with grad mode on, of the no_grad view
  expect_contains(error_of([&] { tb::mul_(of_view, 3); }), {"A view of a view which was created in " + no_grad_msg});
  EXPECT_EQ(values(b.detach()), V({2, 2, 2, 2}));
  // A no_grad view of a view made with grad mode on, and one of a leaf that requires grad (not
  // the leaf-view error: the creation mode is checked first, as in PyTorch).
  Tensor gv = b.narrow(0, 1, 3), ngv, wv;
  {
    A::NoGradGuard g;
    ngv = gv.narrow(0, 0, 2);
    wv = w.narrow(0, 0, 2);
  }
  expect_contains(error_of([&] { tb::mul_(ngv, 3); }), {"A view was created in " + no_grad_msg});
  expect_contains(error_of([&] { tb::mul_(wv, 3); }), {"A view was created in " + no_grad_msg});
  EXPECT_EQ(values(w.detach()), V({1, 1, 1, 1}));
  // Made in InferenceMode (of a normal tensor: the view is not an inference tensor).
  Tensor iv;
  {
    A::InferenceMode im;
    iv = b.narrow(0, 2, 2);
  }
  EXPECT_FALSE(iv.is_inference());
  expect_contains(error_of([&] { tb::mul_(iv, 3); }),
                  {"A view was created in inference mode and is being modified inplace in normal mode"});

  // Legal: the in-place op under NoGradGuard (untracked, as asked), and views of tensors that do
  // not require grad, written with grad mode on by an op that does not require grad.
  {
    A::NoGradGuard g;
    tb::mul_(v, 3);
  }
  EXPECT_EQ(values(b.detach()), V({6, 6, 2, 2}));
  tb::sum(b).backward();
  EXPECT_EQ(values(w.grad()), V({2, 2, 2, 2}));
  {
    A::NoGradGuard g;
    tb::mul_(wv, 2);
  }
  EXPECT_EQ(values(w.detach()), V({2, 2, 1, 1}));
  Tensor x = from_vector({1, 2, 3, 4}, DType::Float64);
  Tensor xv;
  {
    A::NoGradGuard g;
    xv = x.narrow(0, 1, 2);
  }
  tb::mul_(xv, 3);
  EXPECT_EQ(values(x), V({1, 6, 9, 4}));
  EXPECT_FALSE(x.requires_grad());
}

// retain_grad() then an in-place op: .grad is the gradient with respect to the value after the op,
// as in PyTorch, which moves the retains_grad hook to the new grad_fn (the engine left it on the
// old node: b = 2w, b.retain_grad(), b *= 3, sum(b).backward() gave b.grad = 3 3 3, not 1 1 1).
TEST(Autograd, RetainGradFollowsInPlaceOps) {
  Tensor w = leaf({1, 1, 1});
  Tensor b = tb::mul(w, 2);
  b.retain_grad();
  tb::mul_(b, 3);
  tb::sum(b).backward();
  EXPECT_EQ(values(b.grad()), V({1, 1, 1}));
  EXPECT_EQ(values(w.grad()), V({6, 6, 6}));
  EXPECT_TRUE(b.retains_grad());

  // In place on a view of the retained tensor: d sum(b^2)/d b = 2b of the new b = 2 12 18 8.
  Tensor w2 = leaf({1, 2, 3, 4});
  Tensor b2 = tb::mul(w2, 2);
  b2.retain_grad();
  Tensor v = b2.narrow(0, 1, 2);
  tb::mul_(v, 3);
  tb::sum(tb::mul(b2, b2)).backward();
  EXPECT_EQ(values(b2.grad()), V({4, 24, 36, 16}));
  EXPECT_EQ(values(w2.grad()), V({8, 144, 216, 32}));

  // Two in-place ops, one through a view: b3 = 2 4 6 8 -> 6 12 6 8 -> 7 13 7 9; grad 2b.
  Tensor w3 = leaf({1, 2, 3, 4});
  Tensor b3 = tb::mul(w3, 2);
  b3.retain_grad();
  Tensor v3 = b3.narrow(0, 0, 2);
  tb::mul_(v3, 3);
  tb::add_(b3, 1);
  tb::sum(tb::mul(b3, b3)).backward();
  EXPECT_EQ(values(b3.grad()), V({14, 26, 14, 18}));

  // A retained view whose base is changed in place: its remade history carries the retain.
  Tensor w4 = leaf({1, 2, 3, 4});
  Tensor b4 = tb::mul(w4, 2);
  Tensor v4 = b4.narrow(0, 1, 2);
  v4.retain_grad();
  tb::mul_(b4, 3);
  tb::sum(tb::mul(v4, v4)).backward();
  EXPECT_EQ(values(v4.grad()), V({24, 36}));

  // A hook registered before the in-place op stays with the old value (it scales w's gradient);
  // the retained gradient is the new value's.
  Tensor w5 = leaf({1, 2, 3});
  Tensor b5 = tb::mul(w5, 2);
  b5.retain_grad();
  b5.register_hook([](const Tensor& g) { return tb::mul(g, 10); });
  tb::mul_(b5, 3);
  tb::sum(b5).backward();
  EXPECT_EQ(values(b5.grad()), V({1, 1, 1}));
  EXPECT_EQ(values(w5.grad()), V({60, 60, 60}));
}

// A leaf made from a view of a tensor without history (w = t.view(..); w.requires_grad_()), then
// as_strided of its expand: the gradient maps through w, as for a fresh leaf (as_strided of an
// overlapping view maps through a non-overlapping tensor below it that requires grad, and here the
// root base does not). It used to fail in backward ("a view of an overlapping tensor"); and with
// the root itself made a leaf that requires grad afterwards, the gradient went to the root.
TEST(Autograd, AsStridedOfAnExpandedLeafMadeFromAView) {
  auto viewed_leaf = [](Tensor root, int64_t start) {
    Tensor w = root.narrow(0, start, 3).view({1, 3});
    w.requires_grad_();
    return w;
  };
  // sum(y * y) over 4 rows of w: d/dw = 4 * 2w = 8 16 24.
  for (const int64_t start : {0, 1}) {
    Tensor root = from_vector(start == 0 ? V{1, 2, 3} : V{9, 1, 2, 3}, DType::Float64);
    Tensor w = viewed_leaf(root, start);
    Tensor e = w.expand({4, 3});
    Tensor y = e.as_strided(e.sizes(), e.strides(), e.storage_offset());
    tb::sum(tb::mul(y, y)).backward();
    EXPECT_EQ(values(w.grad()), V({8, 16, 24})) << "start " << start;
    EXPECT_FALSE(root.grad().defined());
    // An in-place op on it is still refused: it is a view of a leaf that requires grad.
    expect_contains(error_of([&] { tb::mul_(y, 2); }), {"a view of a leaf Variable that requires grad"});
  }
  // A storage-addressed piece of the expand (w[1], w[2]), through a flattening view first: 5 5.
  Tensor root = from_vector({1, 2, 3}, DType::Float64);
  Tensor w = viewed_leaf(root, 0);
  Tensor e = w.view({3}).expand({2, 3});
  tb::sum(tb::mul(e.as_strided({2}, {1}, 1), 5)).backward();
  EXPECT_EQ(values(w.grad()), V({0, 5, 5}));
  // The root made a leaf that requires grad after w: w is still the leaf the gradient reaches.
  Tensor root2 = from_vector({1, 2, 3}, DType::Float64);
  Tensor w2 = viewed_leaf(root2, 0);
  root2.requires_grad_();
  Tensor e2 = w2.expand({4, 3});
  tb::sum(tb::mul(e2.as_strided(e2.sizes(), e2.strides(), 0), 2)).backward();
  EXPECT_EQ(values(w2.grad()), V({8, 8, 8}));
  EXPECT_FALSE(root2.grad().defined());
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
