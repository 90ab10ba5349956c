// One public op API (Note [Bare kernels] in engine/ops/common.h): a tb::ops kernel called on a
// tensor that requires grad while grad mode is on refuses, naming the tb:: function to call, so it
// cannot silently drop the autograd graph; under NoGradGuard the same call works. The public tb::
// ops record the graph (gradients checked against hand-computed values), and ops without a
// gradient (comparisons, indices) take requires-grad inputs and give results without history.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/core/tests/error_of.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

using testing::error_of;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.contiguous().to(DType::Float64);
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor leaf(const std::vector<double>& v, const Shape& shape) {
  Tensor t = from_vector(v, shape);
  t.requires_grad_();
  return t;
}

TEST(BareKernel, RefusesRequiresGradInputUnderGradMode) {
  const Tensor a = leaf({1, 2, 3}, {3});
  const Tensor b = from_vector({4, 5, 6}, {3});
  const std::string msg = error_of([&] { ops::mul(a, b); });
  EXPECT_NE(msg.find("tb::ops::mul is a bare kernel and would drop the autograd graph"), std::string::npos) << msg;
  EXPECT_NE(msg.find("a tensor argument requires grad and grad mode is on"), std::string::npos) << msg;
  EXPECT_NE(msg.find("call tb::mul"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { ops::mul(b, a); }).find("call tb::mul"), std::string::npos);  // either argument
}

TEST(BareKernel, EveryFormOfEveryDifferentiableFamilyRefuses) {
  const Tensor a = leaf({1, 2, 3, 4}, {2, 2});
  const Tensor plain = from_vector({1, 1, 1, 1}, {2, 2});
  Tensor out = zeros({2, 2});
  Tensor self = leaf({1, 2, 3, 4}, {2, 2});
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"exp", [&] { ops::exp(a); }},
      {"exp_out", [&] { ops::exp_out(out, a); }},
      {"exp_", [&] { ops::exp_(self); }},
      {"add_out", [&] { ops::add_out(out, plain, a); }},
      {"mul_out", [&] { ops::mul_out(self, plain, plain); }},  // out itself requires grad
      {"sum", [&] { ops::sum(a); }},
      {"mm", [&] { ops::mm(plain, a); }},
      {"softmax", [&] { ops::softmax(a, 1); }},
      {"cat",
       [&] {
         ops::cat({plain, a});
       }},
      {"linear", [&] { ops::linear(plain, a); }},
      {"mse_loss", [&] { ops::mse_loss(a, plain); }},
      {"where", [&] { ops::where(ops::gt(plain, 0), a, plain); }},
  };
  for (const auto& [name, call] : calls) {
    const std::string msg = error_of(call);
    EXPECT_NE(msg.find("tb::ops::" + name + " is a bare kernel"), std::string::npos) << name << ": " << msg;
  }
  // In-place and out= kernels point at the differentiable out-of-place op.
  EXPECT_NE(error_of([&] { ops::exp_out(out, a); }).find("call tb::exp "), std::string::npos);
  EXPECT_NE(error_of([&] { ops::exp_(self); }).find("call tb::exp "), std::string::npos);
}

TEST(BareKernel, WorksUnderNoGradGuard) {
  const Tensor a = leaf({1, 2, 3}, {3});
  const Tensor b = from_vector({4, 5, 6}, {3});
  autograd::NoGradGuard no_grad;
  const Tensor y = ops::mul(a, b);
  EXPECT_EQ(values(y), (std::vector<double>{4, 10, 18}));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(BareKernel, PlainInputsNeedNoGuard) {
  const Tensor a = from_vector({1, 2, 3}, {3});
  const Tensor y = ops::add(ops::mul(a, a), 1);
  EXPECT_EQ(values(y), (std::vector<double>{2, 5, 10}));
}

TEST(PublicApi, MulRecordsTheGraph) {
  const Tensor a = leaf({1, 2, 3}, {3});
  const Tensor b = leaf({4, 5, 6}, {3});
  const Tensor y = tb::mul(a, b);
  ASSERT_NE(y.grad_fn(), nullptr);
  // d/da sum(a * b * a) = 2 a b, d/db = a^2.
  tb::sum(tb::mul(y, a)).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{8, 20, 36}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{1, 4, 9}));
}

TEST(PublicApi, DivWithRoundingModeIsTheKernel) {
  const Tensor a = leaf({7, -7}, {2});
  const Tensor two = from_vector({2, 2}, {2});
  // True division keeps its gradient; a rounding mode has none, so the kernel refuses.
  EXPECT_NE(tb::div(a, two, std::nullopt).grad_fn(), nullptr);
  EXPECT_NE(error_of([&] { tb::div(a, two, std::string("floor")); }).find("tb::ops::div is a bare kernel"),
            std::string::npos);
  autograd::NoGradGuard no_grad;
  EXPECT_EQ(values(tb::div(a, two, std::string("floor"))), (std::vector<double>{3, -4}));
}

TEST(PublicApi, OpsWithoutGradientTakeRequiresGradInputs) {
  const Tensor a = leaf({3, 1, 2}, {3});
  const Tensor b = from_vector({3, 0, 5}, {3});
  const Tensor eq = tb::eq(a, b);
  EXPECT_EQ(eq.dtype(), DType::Bool);
  EXPECT_EQ(values(eq), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(eq.grad_fn(), nullptr);
  EXPECT_FALSE(eq.requires_grad());
  EXPECT_EQ(tb::argmax(a).item<int64_t>(), 0);
  EXPECT_EQ(values(tb::argsort(a)), (std::vector<double>{1, 2, 0}));
  EXPECT_EQ(values(tb::isnan(a)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(tb::nonzero(a).size(0), 3);
}

}  // namespace
}  // namespace tb
