// Modules without LibTorch: a Linear layer with weights set by hand (y = x W^T + b and its
// gradients), PyTorch's parameter names and state_dict keys through containers, strict and
// non-strict loading, and train/eval reaching every child.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
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

}  // namespace
}  // namespace tb::nn
