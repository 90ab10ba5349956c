// Modules without LibTorch: a Linear layer with weights set by hand (y = x W^T + b and its
// gradients), PyTorch's parameter names and state_dict keys through containers, strict and
// non-strict loading, and train/eval reaching every child.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/core/tests/error_of.h"
#include "engine/nn/activation.h"
#include "engine/nn/container.h"
#include "engine/nn/linear.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb::nn {
namespace {

namespace A = autograd;
using testing::error_of;
using testing::values;
using V = std::vector<double>;

TEST(Module, LinearByHand) {
  Linear lin(3, 2);
  EXPECT_EQ(lin.weight.sizes(), Shape({2, 3}));
  EXPECT_EQ(lin.bias.sizes(), Shape({2}));
  for (double w : values(lin.weight)) EXPECT_LE(std::abs(w), 1 / std::sqrt(3.0)) << "U(-1/sqrt(in), 1/sqrt(in))";
  {
    A::NoGradGuard g;
    lin.weight.copy_(from_vector({1, 0, -1, 2, 1, 0}, {2, 3}));
    lin.bias.copy_(from_vector({0.5, -0.5}));
  }
  Tensor y = lin(from_vector({1, 2, 3}, {1, 3}));
  // [1 - 3 + 0.5, 2 + 2 - 0.5]
  EXPECT_EQ(values(y), V({-1.5, 3.5}));
  tb::sum(y).backward();
  EXPECT_EQ(values(lin.weight.grad()), V({1, 2, 3, 1, 2, 3}));  // dL/dW = 1^T x
  EXPECT_EQ(values(lin.bias.grad()), V({1, 1}));
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
}

TEST(Module, NamesStateDictAndLoading) {
  auto net = std::make_shared<Sequential>(std::initializer_list<ModulePtr>{std::make_shared<Linear>(4, 3),
                                                                           std::make_shared<ReLU>(),
                                                                           std::make_shared<Linear>(3, 2, false)});
  std::vector<std::string> names;
  for (const auto& [name, p] : net->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, std::vector<std::string>({"0.weight", "0.bias", "2.weight"}));
  EXPECT_EQ(net->parameters().size(), 3u);
  StateDict sd = net->state_dict();
  EXPECT_EQ(sd.keys(), names);
  // strict loading names what is missing; non-strict reports it
  StateDict partial;
  partial.insert("0.weight", zeros({3, 4}));
  EXPECT_NE(error_of([&] { net->load_state_dict(partial); }).find("0.bias"), std::string::npos);
  const LoadResult r = net->load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, std::vector<std::string>({"0.bias", "2.weight"}));
  EXPECT_EQ(values(net->named_parameters()[0].second), V(12, 0.0)) << "the loaded weight";
  partial.insert("0.bias", zeros({5}));
  EXPECT_NE(error_of([&] { net->load_state_dict(partial, false); }).find("0.bias"), std::string::npos)
      << "a shape mismatch is an error even when not strict";
  net->eval();
  for (const auto& [name, m] : net->named_modules()) EXPECT_FALSE(m->is_training()) << name;
  net->train();
  EXPECT_TRUE(net->child("2")->is_training());
}

// Module::to converts each parameter under the same handle: new values (a float16 round trip
// rounds them), so a new version, as any in-place write; a cache keyed on the version (autocast's
// weight cast) must not serve the values from before.
TEST(Module, ToIsANewVersionOfEachParameter) {
  Linear lin(3, 2);
  {
    A::NoGradGuard ng;
    tb::fill_(lin.weight, 70000.0);  // past float16's range: the round trip changes it
  }
  const uint64_t before = lin.weight.version();
  lin.to(DType::Float16);
  lin.to(DType::Float32);
  EXPECT_GT(lin.weight.version(), before);
  EXPECT_TRUE(std::isinf(values(lin.weight)[0]));
}

// Note [Full backward hooks]: the hooked output passes through an identity node that captures
// grad_output. An in-place op on it (or on a view of it) would rebase its history past that node,
// so, as PyTorch (CreationMeta::IN_CUSTOM_FUNCTION), it is refused while grad mode is on; the
// hook then always gets one grad_output (it once got none: grad_output[0] read out of bounds).
TEST(Module, FullBackwardHookOutputRefusesInPlace) {
  Linear lin(3, 2);
  std::vector<size_t> go_sizes;
  TensorList seen_out;
  lin.register_full_backward_hook([&](Module&, const TensorList&, const TensorList& go) {
    go_sizes.push_back(go.size());
    seen_out = go;
    return std::optional<TensorList>();
  });
  Tensor x = ones({2, 3});
  x.requires_grad_();
  Tensor y = lin(x);
  EXPECT_EQ(y.grad_fn()->name(), "BackwardHookFunctionBackward");
  testing::expect_contains(error_of([&] { tb::mul_(y, 2.0); }),
                           {"Output 0 of BackwardHookFunctionBackward is a view and is being modified inplace",
                            "created inside a custom Function", "cloning the output"});
  Tensor v = y.view({4});
  testing::expect_contains(error_of([&] { tb::add_(v, 1.0); }), {"created inside a custom Function"});
  testing::expect_contains(error_of([&] {
                             y.narrow(0, 0, 1).copy_(zeros({1, 2}));
                           }),
                           {"created inside a custom Function"});
  // Nothing was written: the refused ops leave the value and the graph as they were.
  tb::sum(y).backward();
  ASSERT_EQ(go_sizes, std::vector<size_t>({1}));
  EXPECT_EQ(values(seen_out[0]), V(4, 1.0));
  const V colsum = values(tb::sum(lin.weight, DimList{0}));  // d sum(x W^T + b) / dx, per row
  ASSERT_EQ(values(x.grad()).size(), 6u);
  for (size_t k = 0; k < 6; ++k) EXPECT_NEAR(values(x.grad())[k], colsum[k % 3], 1e-6);

  // A clone is the caller's own tensor: in place on it is fine, and the hook sees its gradient.
  Tensor c = lin(x).clone();
  tb::mul_(c, 2.0);
  tb::sum(c).backward();
  ASSERT_EQ(go_sizes.size(), 2u);
  EXPECT_EQ(go_sizes[1], 1u);
  EXPECT_EQ(values(seen_out[0]), V(4, 2.0));

  // Without grad mode the write is allowed (as in PyTorch); the hook still gets its grad_output.
  Tensor z = lin(x);
  {
    A::NoGradGuard ng;
    tb::mul_(z, 2.0);
  }
  tb::sum(z).backward();
  ASSERT_EQ(go_sizes.size(), 3u);
  EXPECT_EQ(go_sizes[2], 1u);
  ASSERT_TRUE(seen_out[0].defined());
  EXPECT_EQ(values(seen_out[0]), V(4, 1.0));
}

// The inputs pass through the same identity: a forward that writes its input in place is refused
// (PyTorch: an inplace ReLU under a full backward hook), and an expanded input's gradient reaches
// the tensor it was expanded from.
TEST(Module, FullBackwardHookInputs) {
  struct AddOneInPlace : Module {
    AddOneInPlace() : Module("AddOneInPlace") {}
    Tensor forward(const Tensor& x) override {
      Tensor t = x;
      return tb::add_(t, 1.0);
    }
  };
  AddOneInPlace m;
  int calls = 0;
  m.register_full_backward_hook([&](Module&, const TensorList&, const TensorList&) {
    ++calls;
    return std::optional<TensorList>();
  });
  Tensor x = ones({2, 3});
  x.requires_grad_();
  testing::expect_contains(error_of([&] { m(tb::mul(x, 1.0)); }),
                           {"Output 0 of BackwardHookFunctionBackward is a view", "custom Function"});

  Linear lin(3, 2);
  TensorList seen_in, seen_out;
  lin.register_full_backward_hook([&](Module&, const TensorList& gi, const TensorList& go) {
    seen_in = gi;
    seen_out = go;
    return std::optional<TensorList>();
  });
  Tensor w = ones({1, 3});
  w.requires_grad_();
  tb::sum(lin(w.expand({4, 3}))).backward();
  ASSERT_TRUE(w.grad().defined());
  const V colsum = values(tb::sum(lin.weight, DimList{0}));
  ASSERT_EQ(w.grad().sizes(), Shape({1, 3}));
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(values(w.grad())[k], 4 * colsum[k], 1e-5);
  ASSERT_EQ(seen_in.size(), 1u);
  ASSERT_EQ(seen_out.size(), 1u);
  EXPECT_EQ(seen_in[0].sizes(), Shape({4, 3}));
}

}  // namespace
}  // namespace tb::nn
