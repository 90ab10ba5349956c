// maximum and minimum through their contiguous float/double runs (Note [maximum and minimum runs]
// in cpu/elementwise_binary.cpp) and through the strided and broadcast paths: NaN in either
// operand or both (the first NaN met wins, so its payload is the one kept), infinities, every
// run length up to two AVX-512 registers and a tail, and an out= that aliases an input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/ops/ops.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::values;

// A quiet NaN whose payload says which operand it came from.
template <typename T>
T tagged_nan(uint32_t tag) {
  if constexpr (sizeof(T) == 4) {
    const uint32_t bits = 0x7fc00000u | tag;
    T v;
    std::memcpy(&v, &bits, 4);
    return v;
  } else {
    const uint64_t bits = 0x7ff8000000000000ull | tag;
    T v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
}

template <typename T>
bool same_bits(T x, T y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

// The rule, element by element: a's NaN, else b's NaN, else the larger (smaller) value.
template <typename T>
T expected(T a, T b, bool is_max) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return is_max ? (a > b ? a : b) : (a < b ? a : b);
}

template <typename T>
void check_runs() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const T nan_a = tagged_nan<T>(1), nan_b = tagged_nan<T>(2);
  const T pool[] = {T(1.5), T(-2), T(0.25), inf, -inf, nan_a, T(3), T(-0.5)};
  const T other[] = {T(-1), T(2), nan_b, T(-7), inf, nan_b, T(3), T(0.75), -inf};
  for (int64_t n : {0, 1, 5, 15, 16, 17, 31, 32, 33, 47}) {
    Tensor a = empty({n}, core::dtype_of<T>), b = empty({n}, core::dtype_of<T>);
    for (int64_t i = 0; i < n; ++i) {
      a.data_ptr<T>()[i] = pool[i % 8];
      b.data_ptr<T>()[i] = other[i % 9];
    }
    for (bool is_max : {true, false}) {
      const Tensor r = is_max ? ops::maximum(a, b) : ops::minimum(a, b);
      ASSERT_EQ(r.sizes(), Shape({n}));
      for (int64_t i = 0; i < n; ++i) {
        const T want = expected(a.data_ptr<T>()[i], b.data_ptr<T>()[i], is_max);
        EXPECT_TRUE(same_bits(r.data_ptr<T>()[i], want)) << (is_max ? "maximum" : "minimum") << " n=" << n << " i=" << i
                                                         << ": " << r.data_ptr<T>()[i] << " vs " << want;
      }
    }
  }
}

TEST(MinMax, ContiguousRunsFloat) { check_runs<float>(); }
TEST(MinMax, ContiguousRunsDouble) { check_runs<double>(); }

TEST(MinMax, StridedBroadcastAndAliasedOut) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // a = [[1, 5, nan], [4, -2, 0]], read through a transpose; b a broadcast row.
  Tensor a = from_vector({1, 4, 5, -2, nan, 0}, {3, 2}).t();
  Tensor row = from_vector({3, 3, -1}, {3});
  std::vector<double> mx = values(ops::maximum(a, row)), mn = values(ops::minimum(row, a));
  ASSERT_EQ(mx.size(), 6u);
  EXPECT_EQ(mx[0], 3);
  EXPECT_EQ(mx[1], 5);
  EXPECT_TRUE(std::isnan(mx[2]));
  EXPECT_EQ(mx[3], 4);
  EXPECT_EQ(mx[4], 3);
  EXPECT_EQ(mx[5], 0);
  EXPECT_EQ(mn[0], 1);
  EXPECT_EQ(mn[1], 3);
  EXPECT_TRUE(std::isnan(mn[2]));
  EXPECT_EQ(mn[3], 3);
  EXPECT_EQ(mn[4], -2);
  EXPECT_EQ(mn[5], -1);
  // out= over a itself: each element read before it is written.
  Tensor c = from_vector({1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 8, -8, 9, -9}, {18});
  ops::maximum_out(c, c, zeros({18}));
  EXPECT_EQ(values(c), std::vector<double>({1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0}));
  // Integers and bfloat16 keep the generic kernel.
  EXPECT_EQ(values(ops::maximum(from_vector({1, 7, -3}, DType::Int64), from_vector({2, 5, -4}, DType::Int64))),
            std::vector<double>({2, 7, -3}));
  EXPECT_EQ(values(ops::minimum(from_vector({1.5, 7, -3}, DType::BFloat16), from_vector({2, 5, -4}, DType::BFloat16))),
            std::vector<double>({1.5, 5, -4}));
}

}  // namespace
}  // namespace tb
