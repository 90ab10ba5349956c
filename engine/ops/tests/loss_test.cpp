// nll_loss's one pass (Note [nll_loss's one pass] in loss.cpp): every reduction with and without
// class weights and an ignored target, an input read through a transpose, a spatial (N, C, d)
// input, all targets ignored, and the out-of-range errors; the values worked out by hand beside
// each. The LibTorch comparison of these cases is the ops suite (suites/ops/cases_loss.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/tests/error_of.h"
#include "engine/ops/ops.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::error_of;
using testing::expect_contains;
using testing::values;
using V = std::vector<double>;

// Log-probabilities, 3 rows of 4 classes; targets 2, 0, 3 pick -3, -0.5 and -1.75.
Tensor logp() { return from_vector({-1, -2, -3, -4, -0.5, -1.5, -2.5, -3.5, -0.25, -0.75, -1.25, -1.75}, {3, 4}); }
Tensor targets(std::initializer_list<double> t) { return from_vector(std::vector<double>(t), DType::Int64); }

TEST(NllLoss, ReductionsWeightsAndIgnoredTargets) {
  const Tensor x = logp(), t = targets({2, 0, 3}), w = from_vector({1, 2, 0.5, 4});
  EXPECT_EQ(values(ops::nll_loss(x, t, {}, "none")), V({3, 0.5, 1.75}));
  EXPECT_EQ(values(ops::nll_loss(x, t, {}, "sum")), V({5.25}));
  EXPECT_EQ(values(ops::nll_loss(x, t)), V({1.75}));  // 5.25 / 3
  // Weighted: 0.5 * 3, 1 * 0.5, 4 * 1.75; total weight 0.5 + 1 + 4.
  EXPECT_EQ(values(ops::nll_loss(x, t, w, "none")), V({1.5, 0.5, 7}));
  EXPECT_EQ(values(ops::nll_loss(x, t, w, "sum")), V({9}));
  EXPECT_EQ(values(ops::nll_loss(x, t, w)), V({double(float(9 / 5.5))}));
  auto [loss, total] = ops::nll_loss_forward(x, t, w, "mean", -100);
  EXPECT_EQ(values(total), V({5.5}));
  EXPECT_EQ(values(std::get<1>(ops::nll_loss_forward(x, t, w, "none", -100))), V({0}));
  // Class 0 ignored: the second row drops out of the sum and of the mean's denominator.
  EXPECT_EQ(values(ops::nll_loss(x, t, {}, "none", 0)), V({3, 0, 1.75}));
  EXPECT_EQ(values(ops::nll_loss(x, t, {}, "sum", 0)), V({4.75}));
  EXPECT_EQ(values(ops::nll_loss(x, t, {}, "mean", 0)), V({2.375}));
  EXPECT_EQ(values(ops::nll_loss(x, t, w, "mean", 0)), V({double(float(8.5 / 4.5))}));
  // Every target ignored: the sum is 0 and the mean 0 / 0.
  EXPECT_EQ(values(ops::nll_loss(x, targets({1, 1, 1}), {}, "sum", 1)), V({0}));
  EXPECT_TRUE(std::isnan(values(ops::nll_loss(x, targets({1, 1, 1}), w, "mean", 1))[0]));
  // float64 input.
  EXPECT_EQ(values(ops::nll_loss(x.to(DType::Float64), t, w, "sum")), V({9}));
}

TEST(NllLoss, StridedSpatialAndUnbatched) {
  // The same log-probabilities stored transposed, read through .t().
  const Tensor xt = logp().t().contiguous().t();
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_EQ(values(ops::nll_loss(xt, targets({2, 0, 3}), {}, "none")), V({3, 0.5, 1.75}));
  // (N, C, d) = (1, 3, 2): position 0 picks class 1 (-2), position 1 class 2 (-6).
  const Tensor sp = from_vector({-1, -4, -2, -5, -3, -6}, {1, 3, 2});
  const Tensor st = from_vector({1, 2}, {1, 2}, DType::Int64);
  EXPECT_EQ(values(ops::nll_loss(sp, st, {}, "none")), V({2, 6}));
  EXPECT_EQ(values(ops::nll_loss(sp, st)), V({4}));
  // Unbatched (C) with a 0-dim target; a picked -0 gives +0 as in PyTorch.
  const Tensor u = from_vector({-0.0, -1}, {2});
  EXPECT_EQ(values(ops::nll_loss(u, from_vector({1}, {}, DType::Int64))), V({1}));
  const double z = values(ops::nll_loss(u, from_vector({0}, {}, DType::Int64), {}, "none"))[0];
  EXPECT_EQ(z, 0);
  EXPECT_FALSE(std::signbit(z));
}

TEST(NllLoss, TargetsOutOfRange) {
  const Tensor x = logp();
  // The first target out of range is the one named.
  expect_contains(error_of([&] { ops::nll_loss(x, targets({2, 4, -1})); }), {"nll_loss", "Target 4 is out of bounds."});
  expect_contains(error_of([&] { ops::nll_loss(x, targets({2, -1, 4})); }), {"Target -1 is out of bounds."});
  // -1 is fine when it is the ignore_index.
  EXPECT_EQ(values(ops::nll_loss(x, targets({2, -1, 3}), {}, "sum", -1)), V({4.75}));
  expect_contains(error_of([&] {
                    ops::nll_loss(x, targets({2, 0, 3}), from_vector({1, 2, 3}));
                  }),
                  {"weight tensor should be defined either for all 4 classes"});
}

}  // namespace
}  // namespace tb
