// nll_loss's one pass (Note [nll_loss's one pass] in loss.cpp): every reduction with and without
// class weights and an ignored target, an input read through a transpose, a spatial (N, C, d)
// input, all targets ignored, and the out-of-range errors; the values worked out by hand beside
// each. binary_cross_entropy_with_logits' fused kernel (Note [binary_cross_entropy_with_logits in
// one pass]): values by hand at 0, +-30 and +-inf, then bit for bit against the composed ops the
// Note says it computes (its specification) over layouts, broadcast weights and dtypes. The
// LibTorch comparison of these cases is the ops suite (suites/ops/cases_loss.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

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

// ---- binary_cross_entropy_with_logits ----

TEST(BceWithLogits, ValuesByHand) {
  const double ln2 = std::log(2.0), inf = std::numeric_limits<double>::infinity();
  // (1 - t) x + softplus(-x): x = 0 gives ln 2 for any t; x = 30, t = 1 gives log1p(e^-30);
  // x = -30, t = 0 gives -30 + 30 (softplus' threshold returns 30 exactly); x = +inf, t = 0 gives
  // inf; x = -inf, t = 1 gives 0 * -inf = NaN, as LibTorch.
  const Tensor x = from_vector({0, 0, 30, -30, inf, -inf}, DType::Float64);
  const Tensor t = from_vector({0, 1, 1, 0, 0, 1}, DType::Float64);
  const V got = values(ops::binary_cross_entropy_with_logits(x, t, {}, "none"));
  EXPECT_NEAR(got[0], ln2, 1e-15);
  EXPECT_NEAR(got[1], ln2, 1e-15);
  EXPECT_NEAR(got[2], std::log1p(std::exp(-30.0)), 1e-27);
  EXPECT_EQ(got[3], 0);
  EXPECT_EQ(got[4], inf);
  EXPECT_TRUE(std::isnan(got[5]));
  // pos_weight 3 at t = 1 triples the softplus term; weight 2 doubles the loss; t = 0.5 with
  // pos_weight 3 weighs it by 1 + 2 * 0.5 = 2: at x = 0, 0.5 * 0 + 2 ln 2.
  const Tensor x0 = zeros({3}, DType::Float64), pw = full({3}, 3.0, DType::Float64);
  const V wl = values(ops::binary_cross_entropy_with_logits(x0, from_vector({1, 0, 0.5}, DType::Float64),
                                                            full({3}, 2.0, DType::Float64), "none", pw));
  EXPECT_NEAR(wl[0], 6 * ln2, 1e-14);
  EXPECT_NEAR(wl[1], 2 * ln2, 1e-14);
  EXPECT_NEAR(wl[2], 4 * ln2, 1e-14);
  EXPECT_NEAR(values(ops::binary_cross_entropy_with_logits(x0, from_vector({1, 0, 0.5}, DType::Float64)))[0], ln2,
              1e-15);
  EXPECT_NEAR(values(ops::binary_cross_entropy_with_logits(x0, x0, {}, "sum"))[0], 3 * ln2, 1e-14);
  // Empty: the sum is 0, the mean 0 / 0, "none" keeps the shape.
  const Tensor e = zeros({0, 3});
  EXPECT_EQ(values(ops::binary_cross_entropy_with_logits(e, e, {}, "sum")), V({0}));
  EXPECT_TRUE(std::isnan(values(ops::binary_cross_entropy_with_logits(e, e))[0]));
  EXPECT_EQ(ops::binary_cross_entropy_with_logits(e, e, {}, "none").sizes(), Shape({0, 3}));
  expect_contains(error_of([&] { ops::binary_cross_entropy_with_logits(x, zeros({5}, DType::Float64)); }),
                  {"Target size ([5]) must be the same as input size ([6])"});
}

// The composed ops of Note [binary_cross_entropy_with_logits in one pass], unreduced.
Tensor bce_composed(const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw) {
  const Tensor sp = ops::softplus(ops::neg(x));
  Tensor loss = ops::mul(ops::neg(ops::sub(t, 1)), x);
  loss = ops::add(loss, pw.defined() ? ops::mul(ops::add(ops::mul(ops::sub(pw, 1), t), 1), sp) : sp);
  return w.defined() ? ops::mul(loss, w) : loss;
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const V g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_TRUE((std::isnan(g[i]) && std::isnan(w[i])) || (g[i] == w[i] && std::signbit(g[i]) == std::signbit(w[i])))
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

TEST(BceWithLogits, FusedMatchesComposedOps) {
  // (5, 37): runs with a tail; logits from -25 to 25 (both sides of softplus' threshold), targets
  // 0, 0.3 and 1, a NaN and both infinities.
  std::vector<double> xv, tv;
  for (int i = 0; i < 5 * 37; ++i) {
    xv.push_back((i % 41 - 20) * 1.25 + 0.1 * (i % 7));
    tv.push_back(i % 3 == 0 ? 0.0 : i % 3 == 1 ? 0.3 : 1.0);
  }
  xv[7] = std::numeric_limits<double>::quiet_NaN();
  xv[11] = std::numeric_limits<double>::infinity();
  xv[12] = -std::numeric_limits<double>::infinity();
  std::vector<double> wv, pwv;
  for (int j = 0; j < 37; ++j) {
    wv.push_back(0.5 + 0.125 * (j % 5));
    pwv.push_back(0.25 + 0.5 * (j % 4));
  }
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    const Tensor x = from_vector(xv, {5, 37}, dt), t = from_vector(tv, {5, 37}, dt);
    const Tensor row = from_vector(wv, {37}, dt), prow = from_vector(pwv, {37}, dt);
    const Tensor col = from_vector({1.5, 0.5, 2, 1, 0.75}, {5, 1}, dt);
    const Tensor xt = from_vector(xv, {37, 5}, dt).t(), tt = from_vector(tv, {37, 5}, dt).t();  // strided
    const std::string d = core::name(dt);
    for (const char* red : {"none", "sum"}) {
      const auto check = [&](const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& pw,
                             const std::string& what) {
        const Tensor want = bce_composed(a, b, w, pw);
        const Tensor got = ops::binary_cross_entropy_with_logits(a, b, w, red, pw);
        expect_same(got, std::string(red) == "none" ? want : ops::sum(want), d + " " + red + " " + what);
      };
      check(x, t, {}, {}, "plain");
      check(x, t, row, {}, "weight row");
      check(x, t, col, {}, "weight column");
      check(x, t, {}, prow, "pos_weight");
      check(x, t, col, prow, "weight and pos_weight");
      check(xt, tt, row, prow, "transposed");
      check(x, tt, {}, {}, "one operand transposed");
      check(x, t.expand({2, 5, 37}).select(0, 1), {}, {}, "target from an expanded view");
    }
  }
  // Mixed dtypes and a weight that enlarges the loss take the composed path: still the same.
  const Tensor x = from_vector(xv, {5, 37}), t = from_vector(tv, {5, 37});
  expect_same(ops::binary_cross_entropy_with_logits(x, t, from_vector(wv, {37}, DType::Float64), "none"),
              bce_composed(x, t, from_vector(wv, {37}, DType::Float64), {}), "float64 weight");
  const Tensor big = full({2, 5, 37}, 0.5);
  expect_same(ops::binary_cross_entropy_with_logits(x, t, big, "none"), bce_composed(x, t, big, {}),
              "enlarging weight");
}

}  // namespace
}  // namespace tb
