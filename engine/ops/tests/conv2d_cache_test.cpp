// conv2d's oneDNN primitive cache (Note [Convolution primitive cache] in cpu/conv2d.cpp): a shape
// run a second time, forward or backward, creates no primitive, and the gradients that the cached
// primitives and reorders give are those of the convolution's definition, summed here in double
// by a loop of the test's own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/ops/nn.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::values;

struct Case {
  Shape x, w;  // (N, C, H, W), (O, C / G, kh, kw)
  int64_t stride, padding, dilation, groups;
};

// grad_input and grad_weight of y = conv2d(x, w) for grad_output gy, by the definition:
// y[n, o, oh, ow] = sum over (c, i, j) of x[n, g * Cg + c, oh * s - p + i * d, ow * s - p + j * d]
// * w[o, c, i, j], g = o / (O / G).
void reference_backward(const Case& k, const std::vector<double>& x, const std::vector<double>& w,
                        const std::vector<double>& gy, int64_t OH, int64_t OW, std::vector<double>& gx,
                        std::vector<double>& gw) {
  const int64_t N = k.x[0], C = k.x[1], H = k.x[2], W = k.x[3], O = k.w[0], Cg = k.w[1], KH = k.w[2], KW = k.w[3];
  const int64_t Og = O / k.groups;
  gx.assign(x.size(), 0);
  gw.assign(w.size(), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double g = gy[size_t(((n * O + o) * OH + oh) * OW + ow)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t h = oh * k.stride - k.padding + i * k.dilation;
                const int64_t ww = ow * k.stride - k.padding + j * k.dilation;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const size_t xi = size_t(((n * C + (o / Og) * Cg + c) * H + h) * W + ww);
                const size_t wi = size_t(((o * Cg + c) * KH + i) * KW + j);
                gx[xi] += g * w[wi];
                gw[wi] += g * x[xi];
              }
        }
}

// max |a - b| / max(1, max |b|): float32 sums of a few hundred products stay far below 1e-4.
double scaled_error(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

TEST(Conv2dCache, ASecondCallOfAShapeCreatesNoPrimitive) {
  core::manual_seed(20);
  // Shapes no other test here runs: blocked layouts (16 and 32 channels), the first layer's
  // 3 channels (oneDNN keeps some of those plain), and groups with stride and dilation.
  for (const Case& k : {Case{{2, 16, 10, 10}, {32, 16, 3, 3}, 1, 1, 1, 1}, Case{{3, 3, 9, 7}, {8, 3, 3, 3}, 2, 0, 1, 1},
                        Case{{2, 8, 11, 11}, {16, 4, 3, 3}, 2, 1, 2, 2}}) {
    SCOPED_TRACE(core::to_string(k.x) + " * " + core::to_string(k.w));
    const Tensor x = randn(k.x), w = randn(k.w);
    const Shape s{k.stride}, p{k.padding}, d{k.dilation};
    const int64_t before = ops::conv2d_primitives_created();
    const Tensor y = ops::conv2d(x, w, {}, s, p, d, k.groups);
    const Tensor gy = randn(y.sizes());
    const auto [gx, gw, gb] = ops::convolution_backward(gy, x, w, s, p, d, k.groups, {true, true, false});
    const int64_t built = ops::conv2d_primitives_created();
    EXPECT_GE(built - before, 3);  // a new shape: the forward and both backward primitives at least

    // Steady state: the same shape again, whole or in part, creates nothing.
    ops::conv2d(x, w, {}, s, p, d, k.groups);
    const auto [gx2, gw2, gb2] = ops::convolution_backward(gy, x, w, s, p, d, k.groups, {true, true, true});
    ops::convolution_backward(gy, x, w, s, p, d, k.groups, {false, true, false});
    ops::convolution_backward(gy, x, w, s, p, d, k.groups, {true, false, false});
    EXPECT_EQ(ops::conv2d_primitives_created(), built);

    std::vector<double> rx, rw;
    reference_backward(k, values(x), values(w), values(gy), y.size(2), y.size(3), rx, rw);
    for (const Tensor* t : {&gx, &gx2}) EXPECT_LT(scaled_error(values(*t), rx), 1e-4) << "grad_input";
    for (const Tensor* t : {&gw, &gw2}) EXPECT_LT(scaled_error(values(*t), rw), 1e-4) << "grad_weight";
  }
}

}  // namespace
}  // namespace tb
