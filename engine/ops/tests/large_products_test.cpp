// float32 products large enough for dnnl_sgemm on AVX-512 (Note [Large float32 products through
// dnnl_sgemm] in cpu/linalg_gemm.cpp: M, N, K >= 512, one matrix, no epilogue), in each operand
// layout it maps to a transpose flag (row-major, transposed, with padded leading dimensions) and
// with alpha and beta, against the product summed in double by the test itself. Odd sizes, so
// that a swapped dimension or leading dimension cannot pass. On other CPUs the same products run
// on the matmul primitive and must agree just the same.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/linalg.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using namespace ops;
using testing::values;

Tensor randn_f32(const Shape& s, uint64_t seed) {
  core::Generator g(seed);
  return randn(s, DType::Float32, &g);
}

// a (M, K) and b (K, N) in any layout: got == alpha * a @ b + beta * c within float32 accumulation
// over K terms.
void expect_product(const Tensor& got, const Tensor& a, const Tensor& b, double alpha, double beta, const Tensor& c,
                    const std::string& what) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const std::vector<double> va = values(a), vb = values(b), vg = values(got);
  const std::vector<double> vc = c.defined() ? values(c) : std::vector<double>{};
  ASSERT_EQ(int64_t(vg.size()), M * N) << what;
  std::vector<double> sum(static_cast<size_t>(N)), mag(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(mag.begin(), mag.end(), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double x = va[size_t(m * K + k)];
      const double* row = &vb[size_t(k * N)];
      for (int64_t n = 0; n < N; ++n) sum[size_t(n)] += x * row[n], mag[size_t(n)] += std::fabs(x * row[n]);
    }
    for (int64_t n = 0; n < N; ++n) {
      const size_t o = size_t(m * N + n);
      const double want = alpha * sum[size_t(n)] + (c.defined() ? beta * vc[o] : 0);
      const double tol =
          double(K) * std::ldexp(std::fabs(alpha) * mag[size_t(n)] + std::fabs(beta * (c.defined() ? vc[o] : 0)), -23);
      ASSERT_LE(std::fabs(vg[o] - want), tol) << what << " at (" << m << ", " << n << "): " << vg[o] << " vs " << want;
    }
  }
}

TEST(LargeFloat32Products, EveryOperandLayoutMatchesTheProductInDouble) {
  const int64_t M = 517, K = 523, N = 515;
  const Tensor a = randn_f32({M, K}, 1), b = randn_f32({K, N}, 2);
  const Tensor at = randn_f32({K, M}, 3).t(), bt = randn_f32({N, K}, 4).t();
  // Leading dimensions wider than the matrix: narrowed views of wider buffers.
  const Tensor ap = randn_f32({M, K + 9}, 5).narrow(1, 0, K), bp = randn_f32({K + 3, N}, 6).narrow(0, 0, K);
  expect_product(mm(a, b), a, b, 1, 0, {}, "a @ b");
  expect_product(mm(a, bt), a, bt, 1, 0, {}, "a @ b^T");
  expect_product(mm(at, b), at, b, 1, 0, {}, "a^T @ b");
  expect_product(mm(at, bt), at, bt, 1, 0, {}, "a^T @ b^T");
  expect_product(mm(ap, bp), ap, bp, 1, 0, {}, "padded a @ b");
  const Tensor c = randn_f32({M, N}, 7);
  expect_product(addmm(c, at, b, 0.5, 2), at, b, 2, 0.5, c, "addmm beta 0.5 alpha 2");
  // beta 0 ignores self, NaN included (BLAS and PyTorch).
  const Tensor nan = full({M, N}, std::nan(""), DType::Float32);
  expect_product(addmm(nan, a, b, 0, 1), a, b, 1, 0, {}, "addmm beta 0 over NaN");
}

}  // namespace
}  // namespace tb
