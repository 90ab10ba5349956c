// Note [Autocast gradients in float32] (functions/linalg.cpp): under bfloat16 autocast, linear and
// linear_relu give their float32 inputs float32 gradients straight from the products' float32
// accumulators. Checked against float64 products of the same bfloat16-rounded operands, to a
// bound far below one bfloat16 rounding (2^-9 relative), so a gradient that passed through
// bfloat16 fails; and into a gradient buffer offered to the weight's accumulator (DDP's slots).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/node.h"
#include "engine/autograd/variable.h"
#include "engine/core/rng.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

namespace A = tb::autograd;

// Row-major float64 copy of a 2-D tensor of any float dtype.
std::vector<double> doubles(const Tensor& t) {
  const Tensor d = t.to(DType::Float64).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

// Exact products and, per entry, the sum of its terms' magnitudes (the error bound's scale).
struct Products {
  std::vector<double> value, scale;
};

// a (M, K) @ b (K, N) in float64.
Products product(const std::vector<double>& a, const std::vector<double>& b, int64_t M, int64_t K, int64_t N) {
  Products r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) {
        const double t = a[size_t(i * K + k)] * b[size_t(k * N + j)];
        r.value[size_t(i * N + j)] += t;
        r.scale[size_t(i * N + j)] += std::fabs(t);
      }
  return r;
}

std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[size_t(j * rows + i)] = a[size_t(i * cols + j)];
  return t;
}

// float32 accumulation of K terms: well under 1e-5 of the terms' magnitude here (K <= 96); one
// bfloat16 rounding of the result is up to 2^-9 = 2e-3 of its value.
constexpr double kFloat32Bound = 1e-5;

void expect_close(const Tensor& got, const Products& want, const char* what) {
  ASSERT_EQ(got.dtype(), DType::Float32) << what;
  const std::vector<double> g = doubles(got);
  ASSERT_EQ(g.size(), want.value.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::fabs(g[i] - want.value[i]) / std::max(want.scale[i], 1e-30));
  EXPECT_LT(worst, kFloat32Bound) << what;
}

// Whether some element of t has mantissa bits below bfloat16's (t was not rounded to bfloat16).
bool finer_than_bf16(const Tensor& t) {
  const Tensor c = t.contiguous();
  const float* p = c.data_ptr<float>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (std::bit_cast<uint32_t>(p[i]) & 0xFFFFu) return true;
  return false;
}

class AutocastGrad : public ::testing::TestWithParam<bool> {};  // param: linear_relu

TEST_P(AutocastGrad, Float32InputsGetTheProductsUnroundedGradients) {
  const bool relu = GetParam();
  constexpr int64_t rows = 24, in = 96, out = 40;
  core::Generator gen(7);
  Tensor x = randn({rows, in}, DType::Float32, &gen).requires_grad_(true);
  Tensor w = randn({out, in}, DType::Float32, &gen).requires_grad_(true);
  Tensor b = randn({out}, DType::Float32, &gen).requires_grad_(true);
  const Tensor go = randn({rows, out}, DType::Float32, &gen).to(DType::BFloat16);
  Tensor y;
  {
    A::AutocastGuard ag;
    y = relu ? tb::linear_relu(x, w, b) : tb::linear(x, w, b);
  }
  ASSERT_EQ(y.dtype(), DType::BFloat16);
  y.backward(go);

  // The reference: float64 products of the bfloat16-rounded operands; relu passes the gradient
  // where the output is > 0.
  const std::vector<double> xb = doubles(x.detach().to(DType::BFloat16)), wb = doubles(w.detach().to(DType::BFloat16));
  std::vector<double> gz = doubles(go);
  if (relu) {
    const std::vector<double> yv = doubles(y.detach());
    for (size_t i = 0; i < gz.size(); ++i) gz[i] = yv[i] > 0 ? gz[i] : 0.0;
  }
  expect_close(x.grad(), product(gz, wb, rows, out, in), "dX");
  expect_close(w.grad(), product(transposed(gz, rows, out), xb, out, rows, in), "dW");
  Products db{std::vector<double>(size_t(out)), std::vector<double>(size_t(out))};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      db.value[size_t(j)] += gz[size_t(i * out + j)];
      db.scale[size_t(j)] += std::fabs(gz[size_t(i * out + j)]);
    }
  expect_close(b.grad(), db, "dB");
  EXPECT_TRUE(finer_than_bf16(w.grad()));  // not a bfloat16 value widened
}

TEST_P(AutocastGrad, TheWeightGradientFillsAnOfferedBuffer) {
  const bool relu = GetParam();
  core::Generator gen(11);
  Tensor x = randn({16, 32}, DType::Float32, &gen);
  Tensor w = randn({8, 32}, DType::Float32, &gen).requires_grad_(true);
  Tensor b = zeros({8}, DType::Float32).requires_grad_(true);
  Tensor y;
  {
    A::AutocastGuard ag;
    y = relu ? tb::linear_relu(x, w, b) : tb::linear(x, w, b);
  }
  Tensor slot = full({8, 32}, 123.0, DType::Float32);
  auto* acc = dynamic_cast<A::AccumulateGrad*>(A::edge_of(w).fn.get());
  ASSERT_NE(acc, nullptr);
  acc->offer_grad_buffer(slot);
  tb::sum(y).backward();
  EXPECT_TRUE(w.grad().is_same(slot) || w.grad().shares_storage(slot));  // adopted, not copied
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_NE(slot.data_ptr<float>()[0], 123.0f);  // overwritten by the product
}

INSTANTIATE_TEST_SUITE_P(LinearAndLinearRelu, AutocastGrad, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "LinearRelu" : "Linear"; });

TEST(AutocastGradFloat16, KeepsFloat16Gradients) {
  // float16 autocast keeps LibTorch's casts: a GradScaler must see float16 overflow.
  Tensor x = ones({2, 4}, DType::Float32);
  Tensor w = full({3, 4}, 1e4, DType::Float32).requires_grad_(true);
  Tensor y;
  {
    A::AutocastGuard ag(true, DType::Float16);
    y = tb::linear(x, w, Tensor());
  }
  ASSERT_EQ(y.dtype(), DType::Float16);
  y.backward(full({2, 3}, 60000.0, DType::Float16));  // 2 x 60000 overflows float16
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_TRUE(std::isinf(w.grad().to(DType::Float64).data_ptr<double>()[0]));
}

}  // namespace
}  // namespace tb
