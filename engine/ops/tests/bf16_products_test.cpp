// bfloat16 products and convolutions on both routes (Note [bfloat16 products through float32] in
// cpu/linalg_gemm.cpp): oneDNN's bfloat16 kernels where this CPU has them, and the operands widened
// to float32 with the result rounded once. Each is checked against the product summed in double
// by the test itself; the float32 route must also equal, bit for bit, the float32 product of the
// widened operands rounded by copy_ (the same kernel, so widening and rounding are exact).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/linalg.h"
#include "engine/ops/nn.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using ops::cpu::Bf16Products;
using namespace ops;
using testing::values;

// Restores the decided route when a test ends, failed or not.
struct ForceRoute {
  explicit ForceRoute(Bf16Products r) { ops::cpu::force_bf16_products(r); }
  ~ForceRoute() { ops::cpu::force_bf16_products(std::nullopt); }
};

std::vector<Bf16Products> routes() {
  std::vector<Bf16Products> r{Bf16Products::Float32};
  if (ops::cpu::dnnl_has_bf16()) r.push_back(Bf16Products::OneDnn);
  return r;
}

const char* name(Bf16Products r) { return r == Bf16Products::OneDnn ? "onednn" : "float32"; }

Tensor bf16_randn(const Shape& s, uint64_t seed) {
  core::Generator g(seed);
  return randn(s, DType::Float32, &g).to(DType::BFloat16);
}

// out[b, m, n] = beta * c + alpha * sum_k a[b, m, k] * b[b, k, n] (+ bias[n], relu), in double from
// the bfloat16 values; then the tolerance of one bfloat16 rounding of the result plus float32
// accumulation over K terms.
void expect_product(const Tensor& got, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& c,
                    const Tensor& bias, bool relu, const std::string& what) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const std::vector<double> va = values(a), vb = values(b), vg = values(got);
  const std::vector<double> vc = c.defined() ? values(c) : std::vector<double>{};
  const std::vector<double> vbias = bias.defined() ? values(bias) : std::vector<double>{};
  ASSERT_EQ(int64_t(vg.size()), B * M * N) << what;
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = va[size_t((i * M + m) * K + k)] * vb[size_t((i * K + k) * N + n)];
          sum += p;
          mag += std::fabs(p);
        }
        const size_t o = size_t((i * M + m) * N + n);
        double want = alpha * sum + (c.defined() ? beta * vc[o] : 0) + (bias.defined() ? vbias[size_t(n)] : 0);
        if (relu) want = std::max(want, 0.0);
        const double tol = std::ldexp(std::fabs(want), -8) + double(K) * std::ldexp(std::fabs(alpha) * mag, -24) +
                           1e-30;
        ASSERT_LE(std::fabs(vg[o] - want), tol)
            << what << " at (" << i << ", " << m << ", " << n << "): " << vg[o] << " vs " << want;
      }
}

TEST(Bf16Products, EveryRouteMatchesTheProductInDouble) {
  for (Bf16Products r : routes()) {
    ForceRoute force(r);
    const std::string on = std::string(" on route ") + name(r);
    // Shapes with odd sizes, N inside 49..63 (Note [oneDNN AMX bfloat16 with 49 <= N <= 63]) and
    // outside, and operands read transposed.
    for (const auto& [M, K, N] : std::vector<std::array<int64_t, 3>>{{37, 300, 70}, {5, 64, 53}, {128, 17, 1}}) {
      const Tensor a = bf16_randn({M, K}, 1), b = bf16_randn({K, N}, 2);
      expect_product(mm(a, b), a.unsqueeze(0), b.unsqueeze(0), 1, 0, {}, {}, false, "mm" + on);
      const Tensor at = bf16_randn({K, M}, 3).t(), bt = bf16_randn({N, K}, 4).t();
      expect_product(mm(at, bt), at.unsqueeze(0), bt.unsqueeze(0), 1, 0, {}, {}, false, "mm transposed" + on);
      const Tensor bias = bf16_randn({N}, 5), w = bf16_randn({N, K}, 6);
      expect_product(linear(a, w, bias), a.unsqueeze(0), w.t().unsqueeze(0), 1, 0, {}, bias, false, "linear" + on);
      expect_product(linear_relu(a, w, bias), a.unsqueeze(0), w.t().unsqueeze(0), 1, 0, {}, bias, true,
                     "linear_relu" + on);
      const Tensor c = bf16_randn({M, N}, 7);
      expect_product(addmm(c, a, b, 0.5, 2), a.unsqueeze(0), b.unsqueeze(0), 2, 0.5, c.unsqueeze(0), {}, false,
                     "addmm" + on);
    }
    const Tensor a = bf16_randn({3, 20, 40}, 8), b = bf16_randn({3, 40, 30}, 9);
    expect_product(bmm(a, b), a, b, 1, 0, {}, {}, false, "bmm" + on);
  }
}

// conv2d of bfloat16 takes the same route (oneDNN's bfloat16 convolution, or float32 and one
// rounding): (2, 3, 9, 8) input, (4, 3, 3, 3) weight, bias, stride 2, padding 1, against the sum in
// double.
TEST(Bf16Products, Conv2dOnEveryRouteMatchesTheSumInDouble) {
  const int64_t N = 2, C = 3, H = 9, W = 8, O = 4, KH = 3, KW = 3, S = 2, P = 1;
  const int64_t OH = (H + 2 * P - KH) / S + 1, OW = (W + 2 * P - KW) / S + 1;
  const Tensor x = bf16_randn({N, C, H, W}, 20), w = bf16_randn({O, C, KH, KW}, 21), bias = bf16_randn({O}, 22);
  const std::vector<double> vx = values(x), vw = values(w), vb = values(bias);
  for (Bf16Products r : routes()) {
    ForceRoute force(r);
    const Tensor y = conv2d(x, w, bias, {S, S}, {P, P});
    ASSERT_EQ(y.sizes(), (Shape{N, O, OH, OW}));
    const std::vector<double> vy = values(y);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double sum = vb[size_t(o)], mag = std::fabs(sum);
            for (int64_t c = 0; c < C; ++c)
              for (int64_t i = 0; i < KH; ++i)
                for (int64_t j = 0; j < KW; ++j) {
                  const int64_t h = oh * S - P + i, v = ow * S - P + j;
                  if (h < 0 || h >= H || v < 0 || v >= W) continue;
                  const double p = vx[size_t(((n * C + c) * H + h) * W + v)] *
                                   vw[size_t(((o * C + c) * KH + i) * KW + j)];
                  sum += p, mag += std::fabs(p);
                }
            const double got = vy[size_t(((n * O + o) * OH + oh) * OW + ow)];
            EXPECT_LE(std::fabs(got - sum), std::ldexp(std::fabs(sum), -8) + 27 * std::ldexp(mag, -24))
                << "route " << name(r) << " at (" << n << ", " << o << ", " << oh << ", " << ow << ")";
          }
  }
}

TEST(Bf16Products, TheFloat32RouteIsTheFloat32ProductRoundedOnce) {
  ForceRoute force(Bf16Products::Float32);
  const Tensor a = bf16_randn({64, 200}, 10), b = bf16_randn({200, 96}, 11);
  const Tensor at = bf16_randn({200, 64}, 12).t();
  for (const Tensor& x : {a, at}) {
    const Tensor got = mm(x, b);
    const Tensor want = mm(x.to(DType::Float32), b.to(DType::Float32)).to(DType::BFloat16);
    EXPECT_EQ(values(got), values(want));
  }
}

}  // namespace
}  // namespace tb
