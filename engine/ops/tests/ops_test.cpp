// A handful of kernels on tiny inputs, each result worked out by hand (shown beside it), and the
// errors for bad shapes and dtypes. The LibTorch comparison of every op on many shapes is the ops
// suite (suites/ops); these tests say what the kernels compute without needing it.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/tests/error_of.h"
#include "engine/ops/ops.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::error_of;
using testing::values;
using V = std::vector<double>;

Tensor vec(std::initializer_list<double> v, DType dt = DType::Float32) {
  return from_vector(std::vector<double>(v), dt);
}

TEST(Ops, Matmul2x2) {
  Tensor a = from_vector({1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector({5, 6, 7, 8}, {2, 2});
  // [[1*5 + 2*7, 1*6 + 2*8], [3*5 + 4*7, 3*6 + 4*8]]
  EXPECT_EQ(values(ops::matmul(a, b)), V({19, 22, 43, 50}));
  EXPECT_EQ(values(ops::mm(a, b.t())), V({17, 23, 39, 53}));  // b.t() = [[5, 7], [6, 8]], read through strides
  Tensor v = vec({1, 1});
  EXPECT_EQ(ops::matmul(a, v).sizes(), Shape({2}));
  EXPECT_EQ(values(ops::matmul(a, v)), V({3, 7}));
  EXPECT_EQ(error_of([&] {
              ops::mm(from_vector({1, 2, 3, 4, 5, 6}, {2, 3}), from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
            }),
            "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
  EXPECT_NE(error_of([&] { ops::mm(a, b.to(DType::Float64)); }).find("same dtype"), std::string::npos);
}

TEST(Ops, SumAndMeanOverDims) {
  Tensor x = arange(6, DType::Float32).view({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  EXPECT_EQ(values(ops::sum(x)), V({15}));
  EXPECT_EQ(ops::sum(x).dim(), 0);
  EXPECT_EQ(values(ops::sum(x, {0})), V({3, 5, 7}));
  EXPECT_EQ(values(ops::sum(x, {1})), V({3, 12}));
  EXPECT_EQ(ops::sum(x, {1}, /*keepdim=*/true).sizes(), Shape({2, 1}));
  EXPECT_EQ(values(ops::sum(x, {-1, 0})), V({15}));
  EXPECT_EQ(values(ops::mean(x, {1})), V({1, 4}));
  EXPECT_EQ(values(ops::sum(x.t(), {1})), V({3, 5, 7}));  // the same sums read through a transpose
  // sum of an int tensor is int64, as torch.sum
  EXPECT_EQ(ops::sum(arange(4, DType::Int32)).dtype(), DType::Int64);
  EXPECT_EQ(values(ops::sum(zeros({0, 3}), {0})), V({0, 0, 0}));  // an empty sum is 0
  EXPECT_NE(error_of([&] { ops::sum(x, {2}); }).find("dimension 2 out of range"), std::string::npos);
}

TEST(Ops, SoftmaxOfZeroAndLn2) {
  // exp(0) = 1, exp(ln 2) = 2: softmax = [1/3, 2/3]
  Tensor s = ops::softmax(vec({0, std::log(2.0)}, DType::Float64), 0);
  const V got = values(s);
  EXPECT_NEAR(got[0], 1.0 / 3, 1e-15);
  EXPECT_NEAR(got[1], 2.0 / 3, 1e-15);
  // rows of a 2-D input are independent; a large shift changes nothing (no overflow; float64 so
  // that 1000 + ln 2 keeps ln 2 to 1e-13)
  const V rows = values(
      ops::softmax(from_vector({0, std::log(2.0), 1000, 1000 + std::log(2.0)}, {2, 2}, DType::Float64), 1));
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(rows[2 * i], 1.0 / 3, 1e-12);
    EXPECT_NEAR(rows[2 * i + 1], 2.0 / 3, 1e-12);
  }
  // float32: [0, ln 2] rounds ln 2 by at most 2^-25, so 1/3 holds to ~1e-7
  const V f32 = values(ops::softmax(from_vector({0, std::log(2.0)}), 0));
  EXPECT_NEAR(f32[0], 1.0 / 3, 1e-7);
  // log_softmax([0, ln 2]) = [-ln 3, ln 2 - ln 3]
  const V ls = values(ops::log_softmax(vec({0, std::log(2.0)}, DType::Float64), 0));
  EXPECT_NEAR(ls[0], -std::log(3.0), 1e-15);
  EXPECT_NEAR(ls[1], std::log(2.0) - std::log(3.0), 1e-15);
}

TEST(Ops, WhereClampAndBroadcasting) {
  Tensor cond = vec({1, 0, 1}, DType::Bool);
  EXPECT_EQ(values(ops::where(cond, vec({1, 2, 3}), vec({10, 20, 30}))), V({1, 20, 3}));
  EXPECT_EQ(values(ops::where(cond, vec({1, 2, 3}), 0)), V({1, 0, 3}));
  EXPECT_EQ(values(ops::clamp(vec({-2, 0.5, 3}), 0, 1)), V({0, 0.5, 1}));
  EXPECT_EQ(values(ops::clamp(vec({-2, 0.5, 3}), std::nullopt, 0)), V({-2, 0, 0}));
  // [2, 1] + [3] -> [2, 3]: [[0 + 10, 0 + 20, 0 + 30], [1 + 10, 1 + 20, 1 + 30]]
  Tensor sum = ops::add(arange(2, DType::Float32).view({2, 1}), vec({10, 20, 30}));
  EXPECT_EQ(sum.sizes(), Shape({2, 3}));
  EXPECT_EQ(values(sum), V({10, 20, 30, 11, 21, 31}));
  EXPECT_EQ(values(ops::sub(vec({5, 5}), vec({1, 2}), 2)), V({3, 1}));  // a - alpha * b
  EXPECT_EQ(error_of([] {
              ops::add(zeros({2, 3}), zeros({3, 3}));
            }),
            "add: shapes [2, 3] and [3, 3] cannot be broadcast (dimension 0: 2 vs 3)");
}

// where and masked_fill select without a branch on contiguous runs (Note [where on contiguous
// runs]): every element against the rule, over lengths around a register's, a mask of a
// pseudo-random pattern, each dtype the byte select is compiled for and bfloat16 (the element
// loop), in place and with the output aliasing an input; a strided mask takes the element loop.
TEST(Ops, WhereAndMaskedFillSelectEveryElement) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::Bool, DType::BFloat16}) {
    for (int64_t n : {0, 1, 15, 16, 17, 63, 64, 65, 1000}) {
      const size_t len = static_cast<size_t>(n);
      std::vector<double> a(len), b(len), m(len);
      for (int64_t i = 0; i < n; ++i) {
        a[size_t(i)] = dt == DType::Bool ? double(i % 2) : double(i % 7 + 1);
        b[size_t(i)] = dt == DType::Bool ? double((i / 2) % 2) : -double(i % 5 + 1);
        m[size_t(i)] = double((i * 2654435761u >> 7) % 3 == 0);
      }
      const Tensor ta = from_vector(a, dt), tb = from_vector(b, dt), tm = from_vector(m, DType::Bool);
      const double fill = dt == DType::Bool ? 1.0 : 9.0;
      std::vector<double> want_where(len), want_fill(len);
      for (size_t i = 0; i < size_t(n); ++i) {
        want_where[i] = m[i] != 0 ? a[i] : b[i];
        want_fill[i] = m[i] != 0 ? fill : a[i];
      }
      EXPECT_EQ(values(ops::where(tm, ta, tb)), want_where) << core::name(dt) << " n=" << n;
      EXPECT_EQ(values(ops::masked_fill(ta, tm, fill)), want_fill) << core::name(dt) << " n=" << n;
      Tensor inplace = ta.clone();
      ops::masked_fill_(inplace, tm, fill);
      EXPECT_EQ(values(inplace), want_fill) << core::name(dt) << " in place, n=" << n;
      Tensor aliased = ta.clone();
      ops::where_out(aliased, tm, aliased, tb);
      EXPECT_EQ(values(aliased), want_where) << core::name(dt) << " out = a, n=" << n;
      if (n > 1) {  // the mask read with a stride: every other element of a longer one
        std::vector<double> m2(2 * len);
        for (size_t i = 0; i < size_t(n); ++i) m2[2 * i] = m[i], m2[2 * i + 1] = 1 - m[i];
        const Tensor strided = from_vector(m2, DType::Bool).view({n, 2}).select(1, 0);
        EXPECT_EQ(values(ops::where(strided, ta, tb)), want_where) << core::name(dt) << " strided, n=" << n;
      }
    }
  }
}

TEST(Ops, DivisionRemainderAndPow) {
  Tensor a = vec({7, -7}, DType::Int64);
  Tensor two = vec({2, 2}, DType::Int64);
  Tensor q = ops::div(a, two);  // true division of integers gives float32
  EXPECT_EQ(q.dtype(), DType::Float32);
  EXPECT_EQ(values(q), V({3.5, -3.5}));
  EXPECT_EQ(values(ops::div(a, two, "floor")), V({3, -4}));
  EXPECT_EQ(values(ops::div(a, two, "trunc")), V({3, -3}));
  EXPECT_EQ(values(ops::remainder(a, 3)), V({1, 2}));  // Python's sign rule: -7 = 3 * -3 + 2
  EXPECT_EQ(values(ops::pow(2, vec({0, 1, 10}))), V({1, 2, 1024}));
  EXPECT_EQ(values(ops::sqrt(vec({4, 0.25}))), V({2, 0.5}));
  EXPECT_EQ(values(ops::exp(vec({0}))), V({1}));
  EXPECT_EQ(values(ops::relu(vec({-1, 0, 2}))), V({0, 0, 2}));
}

// A number operand of a bfloat16 (float16) tensor, as LibTorch reads it: add, sub and remainder
// round it to the tensor's dtype first (alpha x that, rounded again), mul and div do not.
// bf16(0.7) = 0.69921875, bf16(0.1) = 0.10009765625, bf16(-0.1) = -0.10009765625.
TEST(Ops, ScalarsOfBfloat16Tensors) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor x = vec({0.7, -0.1}, dt);
    const double seven = dt == DType::BFloat16 ? 0.69921875 : 0.7001953125;               // 0.7 in dt
    EXPECT_EQ(values(ops::remainder(x.narrow(0, 0, 1), 0.7)), V({0})) << core::name(dt);  // not 0.699
    EXPECT_EQ(values(ops::add(x.narrow(0, 1, 1), 0.1)), V({0})) << core::name(dt);        // not -9.8e-5
    EXPECT_EQ(values(ops::sub(x.narrow(0, 0, 1), 0.7)), V({0})) << core::name(dt);
    // x * 0.7 with 0.7 unrounded: x^2 in float, then rounded once
    const double sq = values(ops::mul(x.narrow(0, 0, 1), 0.7))[0];
    EXPECT_EQ(sq, values(vec({seven * 0.7}, dt))[0]) << core::name(dt);
  }
  // alpha: 0.1 rounded, times 3, rounded again: bf16(3 x 0.10009765625 = 0.30029296875) = 0.30078125
  EXPECT_EQ(values(ops::add(vec({0}, DType::BFloat16), 0.1, 3)), V({0.30078125}));
}

// PyTorch's result_type: dimensioned tensors outrank 0-dim tensors, which outrank numbers, unless
// the lower one is of a higher category (bool < integer < floating).
TEST(Ops, ResultTypes) {
  Tensor i32 = vec({1, 2}, DType::Int32);
  EXPECT_EQ(ops::add(i32, 2).dtype(), DType::Int32);
  EXPECT_EQ(ops::add(i32, 1.5).dtype(), DType::Float32);
  EXPECT_EQ(ops::add(vec({1, 0}, DType::Bool), 2).dtype(), DType::Int64);
  EXPECT_EQ(ops::add(vec({1, 2}, DType::Float16), scalar_tensor(1, DType::Float64)).dtype(), DType::Float16);
  EXPECT_EQ(ops::add(i32, scalar_tensor(1, DType::Float64)).dtype(), DType::Float64);
  EXPECT_EQ(ops::add(i32, vec({1, 2}, DType::Int64)).dtype(), DType::Int64);
  EXPECT_EQ(ops::mul(vec({1, 2}, DType::BFloat16), vec({1, 2}, DType::Float16)).dtype(), DType::Float32);
  EXPECT_EQ(error_of([] {
              ops::mm(from_vector({1, 0, 0, 1}, {2, 2}, DType::Bool), from_vector({1, 0, 0, 1}, {2, 2}, DType::Bool));
            }),
            "mm: not implemented for dtype bool");
}

}  // namespace
}  // namespace tb
