// float32 pow on the fast path of Note [pow of float on AVX-512] (and SLEEF's or libm's elsewhere),
// through ops::pow: within 1 ulp of double pow of the float inputs over random pairs whose result
// is anything from 0 through the subnormals to inf, near x = 1 with large exponents, around the
// overflow and underflow thresholds, negative bases with integer exponents, exact on C's special
// cases, and a lane's bits the same whatever its neighbours in the register. The tensor ** tensor
// grid, the by-a-scalar exponents and the first special cases are in vec_math_test.cpp.
// The seed is printed; TRAINBENCH_SEED changes it.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/env.h"
#include "engine/core/rng.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// |got - want| in float ulps at want, want being double pow of the float inputs (within 2^-52 of
// the exact power, so a correctly rounded float scores at most 0.5 + 2^-28). Past the largest
// float the ulp stays 2^104 and inf counts as 2^128; inf where want rounds to inf is exact.
double pow_ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isnan(got)) return 1e9;
  if (std::isinf(want)) return got == want ? 0 : 1e9;
  const double a = std::fabs(want);
  if (std::isinf(got) && std::signbit(got) == std::signbit(want) && a >= 0x1p128 * (1 - 0x1p-25)) return 0;
  const double g = std::isinf(got) ? std::copysign(0x1p128, double(got)) : double(got);
  int e = 0;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  const double ulp = a < 0x1p-126 ? 0x1p-149 : std::ldexp(1.0, std::min(e, 128) - 24);
  return std::fabs(g - want) / ulp;
}

uint64_t seed() {
  uint64_t s = 20261206;
  if (const auto v = core::env_string("TRAINBENCH_SEED")) s = core::parse_uint64("TRAINBENCH_SEED", *v);
  return s;
}

// Uniform doubles in [0, 1) and 32-bit words from one Philox stream.
struct Draw {
  core::Generator g;
  uint64_t ctr = 0;
  std::array<uint32_t, 4> b{};
  int used = 4;
  explicit Draw(uint64_t s) : g(s) {}
  uint32_t word() {
    if (used == 4) b = g.block(ctr++), used = 0;
    return b[size_t(used++)];
  }
  double unit() { return core::Generator::to_unit_double(word(), word()); }
};

// ops::pow of the pairs against double pow, each within 1 ulp; returns the worst.
double check_pairs(const std::vector<float>& x, const std::vector<float>& y, const std::string& what) {
  const int64_t n = int64_t(x.size());
  const Tensor got = ops::pow(from_vector_of(x, {n}), from_vector_of(y, {n}));
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float g = got.data_ptr<float>()[i];
    const double e = pow_ulps(g, std::pow(double(x[size_t(i)]), double(y[size_t(i)])));
    worst = std::max(worst, e);
    if (e > 1.0) {
      ADD_FAILURE() << what << ": pow(" << std::hexfloat << x[size_t(i)] << ", " << y[size_t(i)] << ") = " << g
                    << ", double pow " << std::pow(double(x[size_t(i)]), double(y[size_t(i)])) << std::defaultfloat
                    << ": " << e << " ulp (seed " << seed() << ")";
      break;
    }
  }
  ::testing::Test::RecordProperty(what + "_worst_ulps", std::to_string(worst));
  return worst;
}

// y = t / log2(x) as a float for t uniform in [lo, hi]: the result 2^t spans [2^lo, 2^hi].
float exponent_for(float x, double t) { return float(t / std::log2(double(x))); }

// Every positive finite float base equally likely by bits, the exponent chosen so that the result
// runs from below half the smallest subnormal (0) past the largest float (inf).
TEST(VecMath, PowFloat32RandomPairsWithinOneUlp) {
  Draw d(seed());
  std::vector<float> x, y;
  for (int i = 0; i < (1 << 18); ++i) {
    const float b = std::bit_cast<float>(1 + d.word() % 0x7f7fffffu);
    if (b == 1.0f) continue;
    x.push_back(b), y.push_back(exponent_for(b, -152 + 282 * d.unit()));
  }
  // |y log2 x| from 100 to 2^135, either sign: 0 or inf, or near the thresholds.
  for (int i = 0; i < (1 << 16); ++i) {
    const float b = std::bit_cast<float>(1 + d.word() % 0x7f7fffffu);
    if (b == 1.0f) continue;
    const double t = std::exp2(6.6 + 128.4 * d.unit());
    const float e = float((d.word() & 1 ? -t : t) / std::log2(double(b)));
    x.push_back(b), y.push_back(std::isfinite(e) ? e : std::copysign(3e38f, e));
  }
  // Bases and exponents of everyday size (the benchmark's: positive bases, normal exponents).
  for (int i = 0; i < (1 << 16); ++i) x.push_back(float(0.01 + 20 * d.unit())), y.push_back(float(-8 + 16 * d.unit()));
  const double worst = check_pairs(x, y, "random");
  std::printf("pow float32 random pairs: worst %.4f ulp (seed %llu)\n", worst, (unsigned long long)seed());
}

// Near x = 1 log2 x is tiny and y large: x a few thousand ulps either side of 1, y such that the
// result spans the float range.
TEST(VecMath, PowFloat32NearOneWithLargeExponentsWithinOneUlp) {
  Draw d(seed() + 1);
  std::vector<float> x, y;
  for (int i = 0; i < (1 << 16); ++i) {
    const int32_t steps = int32_t(d.word() % 8192) - 4096;
    const float b = std::bit_cast<float>(uint32_t(int32_t(std::bit_cast<uint32_t>(1.0f)) + steps));
    if (b == 1.0f) continue;
    x.push_back(b), y.push_back(exponent_for(b, -152 + 282 * d.unit()));
  }
  for (float b : {std::nextafter(1.0f, 2.0f), std::nextafter(1.0f, 0.0f)})
    for (float e : {1e3f, 1e6f, 1e9f, 1.5e9f, -1e9f, 3e38f, -3e38f}) x.push_back(b), y.push_back(e);
  check_pairs(x, y, "near_one");
}

// The floats y either side of the exponent where x^y crosses 2^128 (overflow), 2^-126 (into the
// subnormals), 2^-149 (the smallest subnormal) and 2^-150 (below it rounds to 0).
TEST(VecMath, PowFloat32AroundOverflowAndUnderflowWithinOneUlp) {
  std::vector<float> x, y;
  for (float b : {2.0f, 0.5f, 1.7f, 0.3f, 3.0f, 10.0f, 1e-3f, 1e10f, 0.999f, 1.001f, 3e38f, 1e-40f, 1e-45f})
    for (double t : {128.0, -126.0, -149.0, -150.0, 127.5, -149.5}) {
      const float at = exponent_for(b, t);
      float lo = at, hi = at;
      for (int k = 0; k < 300; ++k) {
        x.push_back(b), y.push_back(lo), x.push_back(b), y.push_back(hi);
        lo = std::nextafter(lo, -kInf), hi = std::nextafter(hi, kInf);
      }
    }
  check_pairs(x, y, "thresholds");
}

// A negative base with an integer exponent: the magnitude's power, negative for odd exponents;
// with a non-integer exponent NaN.
TEST(VecMath, PowFloat32NegativeBases) {
  Draw d(seed() + 2);
  std::vector<float> x, y;
  for (int i = 0; i < 4096; ++i) {
    x.push_back(-float(std::exp(-20 + 40 * d.unit())));
    y.push_back(float(int(d.word() % 61) - 30));
  }
  for (float b : {-1.0f, -2.0f, -0.5f, -1e-40f, -3e38f, -std::nextafter(1.0f, 2.0f)})
    for (float e : {16777215.0f, 16777216.0f, 1e10f, -16777215.0f, -1e10f, 127.0f, 128.0f, -149.0f, -150.0f})
      x.push_back(b), y.push_back(e);
  check_pairs(x, y, "negative_bases");
  for (float e : {0.5f, -2.5f, 1e-7f, 4194303.5f}) {
    const Tensor r = ops::pow(from_vector_of(std::vector<float>{-2.0f}, {1}),
                              from_vector_of(std::vector<float>{e}, {1}));
    EXPECT_TRUE(std::isnan(r.data_ptr<float>()[0])) << "pow(-2, " << e << ")";
  }
}

// C's pow special cases (C11 F.10.4.4), each pair against libm's float pow, bit for bit where
// that is 0, inf, NaN or +-1 (with the sign), else within 1 ulp.
TEST(VecMath, PowFloat32SpecialCasesExact) {
  const float sub = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 3.0f,  -3.0f, 2.5f,   -2.5f,
                                     kInf, -kInf, kNaN, -kNaN, sub,  -sub,  big,  -big,  1e-7f, 1e30f, -1e30f, 0.999f};
  std::vector<float> x, y;
  for (float b : values)
    for (float e : values) x.push_back(b), y.push_back(e);
  const int64_t n = int64_t(x.size());
  const Tensor got = ops::pow(from_vector_of(x, {n}), from_vector_of(y, {n}));
  for (int64_t i = 0; i < n; ++i) {
    const float b = x[size_t(i)], e = y[size_t(i)], g = got.data_ptr<float>()[i], want = std::pow(b, e);
    const std::string what = "pow(" + std::to_string(b) + ", " + std::to_string(e) + ")";
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(g)) << what << " = " << g;
    } else if (!std::isfinite(want) || want == 0 || std::fabs(want) == 1) {
      EXPECT_EQ(g, want) << what;
      EXPECT_EQ(std::signbit(g), std::signbit(want)) << what << " sign";
    } else {
      EXPECT_LE(pow_ulps(g, std::pow(double(b), double(e))), 1.0) << what << " = " << g;
    }
  }
}

// One special lane (a zero, negative, infinite or NaN base, an infinite or NaN exponent) sends its
// register to SLEEF; the other lanes keep their bits. Also: the same pairs moved by a few places,
// and the exponent as a scalar (the by-a-scalar path) against the same exponent as a tensor.
TEST(VecMath, PowFloat32SameBitsBesideSpecialLanes) {
  Draw d(seed() + 3);
  const int64_t n = 77;
  std::vector<float> x, y;
  for (int64_t i = 0; i < n; ++i) x.push_back(float(0.05 + 9 * d.unit())), y.push_back(float(-6 + 12 * d.unit()));
  const Tensor base = ops::pow(from_vector_of(x, {n}), from_vector_of(y, {n}));
  auto same = [&](const Tensor& t, int64_t skip_every, const std::string& what) {
    for (int64_t i = 0; i < n; ++i)
      if (skip_every == 0 || i % skip_every != 0) {
        ASSERT_EQ(std::memcmp(&t.data_ptr<float>()[i], &base.data_ptr<float>()[i], 4), 0) << what << " at " << i;
      }
  };
  const std::vector<std::pair<float, float>> specials = {{0.0f, 2.0f}, {-0.0f, 3.0f}, {-2.0f, 3.0f}, {-2.0f, 0.5f},
                                                         {kInf, 2.0f}, {-kInf, 1.0f}, {kNaN, 2.0f},  {kNaN, 0.0f},
                                                         {2.0f, kInf}, {0.5f, -kInf}, {1.0f, kNaN},  {2.0f, kNaN}};
  for (const auto& [sx, sy] : specials) {
    std::vector<float> mx(x), my(y);
    for (int64_t i = 0; i < n; i += 7) mx[size_t(i)] = sx, my[size_t(i)] = sy;
    const Tensor t = ops::pow(from_vector_of(mx, {n}), from_vector_of(my, {n}));
    same(t, 7, "beside pow(" + std::to_string(sx) + ", " + std::to_string(sy) + ")");
    const float want = std::pow(sx, sy), g = t.data_ptr<float>()[0];
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(g)) << sx << " ** " << sy;
    else EXPECT_EQ(g, want) << sx << " ** " << sy;
  }
  for (int64_t shift : {1, 5, 16, 19}) {
    std::vector<float> mx(size_t(n + shift), 1.0f), my(size_t(n + shift), 1.0f);
    std::copy(x.begin(), x.end(), mx.begin() + shift), std::copy(y.begin(), y.end(), my.begin() + shift);
    same(ops::pow(from_vector_of(mx, {n + shift}), from_vector_of(my, {n + shift})).narrow(0, shift, n), 0,
         "shifted by " + std::to_string(shift));
  }
  // By a scalar: pow(x, c) has the bits of pow(x, tensor of c), beside a special base too.
  for (float c : {2.5f, -1.7f, 0.3f, 7.0f}) {
    std::vector<float> mx(x);
    mx[3] = -kInf, mx[20] = 0.0f;
    const Tensor xs = from_vector_of(mx, {n});
    const Tensor a = ops::pow(xs, core::Scalar(double(c))),
                 b = ops::pow(xs, from_vector_of(std::vector<float>(size_t(n), c), {n}));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(&a.data_ptr<float>()[i], &b.data_ptr<float>()[i], 4), 0)
          << "pow(" << mx[size_t(i)] << ", " << c << ")";
  }
}

}  // namespace
}  // namespace tb
