// exp, expm1, log, log1p, sin, cos, pow and remainder's fmod through SLEEF's vector functions (Note [Vector math from
// SLEEF] in cpu/vec_math_sleef.h) or our own (float32 exp, expm1, log, log1p, sin, cos, pow on AVX-512), and
// tanh and sigmoid where they take that path (AVX-512),
// checked through the ops against references computed here in a wider type (double for float,
// long double for double): within SLEEF's 1.0-ulp bound (sigmoid: its own 2.5) over sweeps of
// each function's domain, exact on the special
// values (infinities, NaN, zeros of both signs, overflow and underflow), the same bits for a value
// whatever its place (a full register or the padded tail), strided and in place, and bfloat16
// within one bfloat16 rounding of the float result.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

struct Fn {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<long double(long double)> ref;
  double (*ref64)(double);  // for float inputs: double's error is 2^-29 of a float ulp, and fast
  double lo, hi;            // the sweep
  double max_ulps = 1.0;    // SLEEF's bound, which our own functions keep too
  // Absolute slack, in the type's smallest subnormals, where the result sits near or below the
  // smallest normal (silu: x e^x with e^x subnormal, its last bits gone before the product).
  double tiny_slack = 0;
};

template <typename M>
double ulps(M got, long double want);

// The error of got in ulps of want, or 0 where it is within f's absolute slack.
template <typename M>
double error_of(const Fn& f, M got, long double want) {
  if (f.tiny_slack > 0 && std::isfinite(want) && std::isfinite(got) &&
      std::fabs((long double)got - want) <= f.tiny_slack * (long double)std::numeric_limits<M>::denorm_min())
    return 0;
  return ulps<M>(got, want);
}

std::vector<Fn> fns() {
  std::vector<Fn> f = {
      {"exp", [](const Tensor& x) { return ops::exp(x); }, [](long double v) { return std::exp(v); },
       [](double v) { return std::exp(v); }, -87, 88},
      {"expm1", [](const Tensor& x) { return ops::expm1(x); }, [](long double v) { return std::expm1(v); },
       [](double v) { return std::expm1(v); }, -20, 20},
      {"log", [](const Tensor& x) { return ops::log(x); }, [](long double v) { return std::log(v); },
       [](double v) { return std::log(v); }, 1e-30, 1e30},
      {"log1p", [](const Tensor& x) { return ops::log1p(x); }, [](long double v) { return std::log1p(v); },
       [](double v) { return std::log1p(v); }, -0.99, 1e20},
      {"sin", [](const Tensor& x) { return ops::sin(x); }, [](long double v) { return std::sin(v); },
       [](double v) { return std::sin(v); }, -1e4, 1e4},
      {"cos", [](const Tensor& x) { return ops::cos(x); }, [](long double v) { return std::cos(v); },
       [](double v) { return std::cos(v); }, -1e4, 1e4},
  };
#if defined(__AVX512F__)  // elsewhere tanh is ew::tanh_fast, a few ulp (Note [tanh of float on AVX-512])
  f.push_back({"tanh", [](const Tensor& x) { return ops::tanh(x); }, [](long double v) { return std::tanh(v); },
               [](double v) { return std::tanh(v); }, -10, 10});
  // sigmoid (Note [sigmoid of float on AVX-512]) is not SLEEF's: e^-|x| (0.86 ulp) through 1 + e,
  // a refined reciprocal and, for x < 0, a product. Measured worst: 2.01 ulp over this sweep, 1.96
  // over the bit patterns, 1.85 for double (SLEEF's exp and a division); the 1 / (1 + e^-x) it
  // replaced was 2.6e6 ulp off below x = -88.5, where e^-x overflows in float and it gave 0.
  f.push_back({"sigmoid", [](const Tensor& x) { return ops::sigmoid(x); },
               [](long double v) { return 1.0L / (1.0L + std::exp(-v)); },
               [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, -100, 30, 2.5});
  // silu: x times that sigmoid (its 2 ulp, relative to a mantissa near 1, then x's product):
  // measured worst over every float 3.61 ulp. (One refined quotient x e / (1 + e) measured 3.34,
  // 15-20% slower on Zen 4; not kept.)
  f.push_back({"silu", [](const Tensor& x) { return ops::silu(x); },
               [](long double v) { return v / (1.0L + std::exp(-v)); },
               [](double v) { return v / (1.0 + std::exp(-v)); }, -110, 30, 4.0, 1024});
#endif
  return f;
}

// n points over [lo, hi]: log-spaced for a range of positive numbers spanning decades, else even.
template <typename M>
std::vector<M> sweep(double lo, double hi, int n) {
  std::vector<M> v;
  const bool logs = lo > 0 && hi / lo > 1e6;
  for (int i = 0; i < n; ++i) {
    const double t = double(i) / (n - 1);
    v.push_back(M(logs ? std::exp(std::log(lo) + t * (std::log(hi) - std::log(lo))) : lo + t * (hi - lo)));
  }
  return v;
}

// |got - want| in units in the last place of want, in M.
template <typename M>
double ulps(M got, long double want) {
  const M w = M(want);
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(w) || std::isinf(got)) return got == w ? 0 : 1e9;
  const M next = std::nextafter(std::fabs(w), std::numeric_limits<M>::infinity());
  const long double ulp = (long double)(next - std::fabs(w));
  return double(std::fabs((long double)got - want) / (ulp > 0 ? ulp : std::numeric_limits<M>::denorm_min()));
}

template <typename M>
void check_accuracy() {
  const DType dt = core::dtype_of<M>;
  for (const Fn& f : fns()) {
    const std::vector<M> in = sweep<M>(f.lo, f.hi, 10007);  // not a multiple of a register: a tail too
    const Tensor x = from_vector_of(in, {int64_t(in.size())});
    const Tensor y = f.op(x);
    ASSERT_EQ(y.dtype(), dt);
    double worst = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const double e = error_of<M>(f, y.data_ptr<M>()[i], f.ref((long double)in[i]));
      worst = std::max(worst, e);
      ASSERT_LE(e, f.max_ulps) << f.name << "(" << in[i] << ") = " << y.data_ptr<M>()[i] << " in " << core::name(dt);
    }
    ::testing::Test::RecordProperty(std::string(f.name) + "_" + core::name(dt) + "_worst_ulps", std::to_string(worst));
  }
}

TEST(VecMath, Float32WithinOneUlp) { check_accuracy<float>(); }
TEST(VecMath, Float64WithinOneUlp) { check_accuracy<double>(); }

// Float inputs by bit pattern, every stride-th of the 2^32 (negatives, subnormals, the largest
// finite, inf and NaN among them), each within 1 ulp of the wider reference (a NaN wherever it
// is NaN). Returns how many inputs were checked.
int64_t check_float_bit_patterns(const Fn& f, uint32_t stride) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> in;
  int64_t checked = 0;
  double worst = 0;
  for (uint64_t u = 0; u <= 0xffffffffu;) {
    in.clear();
    for (; u <= 0xffffffffu && int64_t(in.size()) < kChunk; u += stride)
      in.push_back(std::bit_cast<float>(uint32_t(u)));
    const Tensor y = f.op(from_vector_of(in, {int64_t(in.size())}));
    const float* got = y.data_ptr<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      const double e = error_of<float>(f, got[i], f.ref64(double(in[i])));
      worst = std::max(worst, e);
      if (e > f.max_ulps) {
        ADD_FAILURE() << f.name << "(" << in[i] << " = bits 0x" << std::hex << std::bit_cast<uint32_t>(in[i])
                      << std::dec << ") = " << got[i] << ": " << e << " ulp";
        return checked;
      }
    }
    checked += int64_t(in.size());
  }
  ::testing::Test::RecordProperty(std::string(f.name) + "_bit_patterns_worst_ulps", std::to_string(worst));
  return checked;
}

// Random float64 bit patterns (every exponent, NaNs, infinities, subnormals) through each
// function, against long double libm: SLEEF's bound holds over the whole range, not only the
// sweeps above (fmod had a hole past overflow, FmodIsExactForEveryQuotient).
TEST(VecMath, Float64BitPatternsWithinOneUlp) {
  std::mt19937_64 g(11);
  std::vector<double> in(200003);
  for (double& v : in) v = std::bit_cast<double>(uint64_t(g()));
  const Tensor x = from_vector_of(in, {int64_t(in.size())});
  for (const Fn& f : fns()) {
    const Tensor y = f.op(x);
    const double* got = y.data_ptr<double>();
    double worst = 0;
    int bad = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const double e = error_of<double>(f, got[i], f.ref((long double)in[i]));
      worst = std::max(worst, e);
      if (e > f.max_ulps && bad++ < 5)
        ADD_FAILURE() << f.name << "(" << std::hexfloat << in[i] << ") = " << got[i] << ": " << e << " ulp";
    }
    EXPECT_EQ(bad, 0) << f.name;
    ::testing::Test::RecordProperty(std::string(f.name) + "_float64_bit_patterns_worst_ulps", std::to_string(worst));
  }
}

TEST(VecMath, Float32BitPatternsWithinOneUlp) {
  for (const Fn& f : fns()) EXPECT_GT(check_float_bit_patterns(f, 65521), 65000) << f.name;
}

// Every float through the functions of our own (Note [exp and log of float on AVX-512], Note [expm1
// of float on AVX-512], Note [log1p of float on AVX-512], Note [sin and cos of float on AVX-512],
// Note [tanh of float on AVX-512]); long: run by hand with --gtest_also_run_disabled_tests.
TEST(VecMath, DISABLED_Float32OwnFunctionsOfEveryFloatWithinOneUlp) {
  for (const Fn& f : fns()) EXPECT_EQ(check_float_bit_patterns(f, 1), int64_t(1) << 32) << f.name;
}

// x and the 3 floats either side of it, each with both signs, onto in.
void push_around(std::vector<float>& in, float x) {
  for (int d = -3; d <= 3; ++d) {
    float v = x;
    for (int i = 0; i < std::abs(d); ++i) v = std::nextafter(v, d < 0 ? 0.0f : 3e38f);
    in.push_back(v), in.push_back(-v);
  }
}

// The reduction of sin and cos to [-pi/4, pi/4] cancels near multiples of pi/2: the floats
// nearest k pi/2 and their neighbours, for k over the fast path's range and past its edge (2^20,
// where SLEEF's take over lane by lane), both signs. A reduction that rounded its remainder once
// was 150 ulp off at 2023.18567 (near 1288 pi/2); the bit-pattern sample meets such points by chance.
TEST(VecMath, SinAndCosNearMultiplesOfHalfPiWithinOneUlp) {
  const long double half_pi = 1.570796326794896619231321691639751442L;
  std::vector<float> in;
  for (int64_t k = 1; k < 200; ++k) push_around(in, float(k * half_pi));
  for (int64_t k = 200; k < 700000; k += 97) push_around(in, float(k * half_pi));  // 700000 pi/2 > 2^20
  push_around(in, 1048576.0f);                                                     // the edge of the fast path
  for (float x : {2023.18567f, 374.611603f, 939425.0f}) push_around(in, x);
  for (const Fn& f : fns()) {
    if (std::string(f.name) != "sin" && std::string(f.name) != "cos") continue;
    const Tensor y = f.op(from_vector_of(in, {int64_t(in.size())}));
    double worst = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const double e = ulps<float>(y.data_ptr<float>()[i], f.ref((long double)in[i]));
      worst = std::max(worst, e);
      ASSERT_LE(e, 1.0) << f.name << "(" << in[i] << ") = " << y.data_ptr<float>()[i];
    }
    ::testing::Test::RecordProperty(std::string(f.name) + "_near_half_pi_worst_ulps", std::to_string(worst));
  }
}

#if defined(__AVX512F__)
// tanh reads its coefficients by interval, a quarter binade of |x| each (Note [tanh of float on
// AVX-512]): the floats at and beside every interval's ends, the bottom interval's top
// (0.078125), the first float whose tanh rounds to 1 (9.0109) and the clamp (9.875), both signs.
TEST(VecMath, TanhAtItsIntervalEdgesWithinOneUlp) {
  std::vector<float> in;
  for (int e = -5; e <= 4; ++e)
    for (int q = 0; q < 4; ++q) push_around(in, std::ldexp(1.0f + 0.25f * float(q), e));
  for (float x : {0.078125f, 9.0109f, 9.875f, 1e-20f, 3e-4f}) push_around(in, x);
  const Tensor y = ops::tanh(from_vector_of(in, {int64_t(in.size())}));
  double worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double e = ulps<float>(y.data_ptr<float>()[i], std::tanh((long double)in[i]));
    worst = std::max(worst, e);
    ASSERT_LE(e, 1.0) << "tanh(" << in[i] << ") = " << y.data_ptr<float>()[i];
  }
  ::testing::Test::RecordProperty("tanh_interval_edges_worst_ulps", std::to_string(worst));
}
#endif

TEST(VecMath, SpecialValuesAsIeeeSays) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  struct Case {
    const char* fn;
    float x, want;
  };
  std::vector<Case> cases = {
      {"exp", -inf, 0.0f},  {"exp", inf, inf},       {"exp", nan, nan},      {"exp", 0.0f, 1.0f},
      {"exp", -0.0f, 1.0f}, {"exp", 89.0f, inf},     {"exp", -104.0f, 0.0f}, {"expm1", -inf, -1.0f},
      {"expm1", inf, inf},  {"expm1", -0.0f, -0.0f}, {"expm1", nan, nan},    {"log", 0.0f, -inf},
      {"log", -0.0f, -inf}, {"log", -1.0f, nan},     {"log", inf, inf},      {"log", 1.0f, 0.0f},
      {"log", nan, nan},    {"log1p", -1.0f, -inf},  {"log1p", -2.0f, nan},  {"log1p", -0.0f, -0.0f},
      {"log1p", inf, inf},  {"sin", inf, nan},       {"sin", -0.0f, -0.0f},  {"sin", nan, nan},
      {"cos", inf, nan},    {"cos", 0.0f, 1.0f},     {"cos", -inf, nan},
  };
  const std::vector<Case> tanh_cases = {{"tanh", inf, 1.0f},      {"tanh", -inf, -1.0f},     {"tanh", nan, nan},
                                        {"tanh", 0.0f, 0.0f},     {"tanh", -0.0f, -0.0f},    {"tanh", 20.0f, 1.0f},
                                        {"tanh", -9.875f, -1.0f}, {"tanh", -1e-30f, -1e-30f}};
  cases.insert(cases.end(), tanh_cases.begin(), tanh_cases.end());
  for (const Fn& f : fns()) {
    std::vector<float> in, want;
    for (const Case& c : cases)
      if (std::string(c.fn) == f.name) in.push_back(c.x), want.push_back(c.want);
    in.push_back(tiny);  // a subnormal: finite in, the function's value out
    const Tensor y = f.op(from_vector_of(in, {int64_t(in.size())}));
    for (size_t i = 0; i < want.size(); ++i) {
      const float got = y.data_ptr<float>()[i];
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got)) << f.name << "(" << in[i] << ") = " << got;
      } else {
        EXPECT_EQ(got, want[i]) << f.name << "(" << in[i] << ")";
        EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << f.name << "(" << in[i] << ") sign";
      }
    }
    EXPECT_LE(ulps<float>(y.data_ptr<float>()[want.size()], f.ref((long double)tiny)), 1.0) << f.name << "(tiny)";
  }
}

// Where f(x) = x near 0 (to the last place for |x| <= 1e-10), registers holding only such values,
// zeros of both signs and subnormals among them: the fast paths, which see no special value there,
// keep x and its sign (log1p's sum would give +0 for -0).
TEST(VecMath, TinyValuesAloneAreThemselves) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float pattern[] = {-0.0f, 0.0f, 1e-30f, -1e-30f, tiny, -tiny, 1e-10f, -1e-10f};
  std::vector<float> in;
  for (int i = 0; i < 40; ++i) in.push_back(pattern[i % 8]);
  for (const Fn& f : fns()) {
    const std::string name = f.name;
    if (name != "expm1" && name != "log1p" && name != "sin" && name != "tanh") continue;
    const Tensor y = f.op(from_vector_of(in, {int64_t(in.size())}));
    for (size_t i = 0; i < in.size(); ++i) {
      const float got = y.data_ptr<float>()[i];
      EXPECT_EQ(got, in[i]) << name << "(" << in[i] << ") at " << i;
      EXPECT_EQ(std::signbit(got), std::signbit(in[i])) << name << "(" << in[i] << ") sign at " << i;
    }
  }
}

// A value's result does not depend on where it sits: in a full register, in the padded tail, in a
// strided view, in place, beside special values.
TEST(VecMath, SameBitsWhereverTheValueSits) {
  for (const Fn& f : fns()) {
    const std::vector<float> base = sweep<float>(f.lo > 0 ? f.lo : 0.5, 3.0, 53);
    const Tensor x = from_vector_of(base, {53});
    const Tensor full = f.op(x);
    for (int64_t shift : {1, 7, 16, 17}) {  // the same values moved by a few places
      std::vector<float> moved(size_t(53 + shift), 1.0f);
      std::copy(base.begin(), base.end(), moved.begin() + shift);
      const Tensor y = f.op(from_vector_of(moved, {53 + shift})).narrow(0, shift, 53);
      for (int64_t i = 0; i < 53; ++i)
        ASSERT_EQ(std::memcmp(&y.data_ptr<float>()[i], &full.data_ptr<float>()[i], 4), 0)
            << f.name << " shifted by " << shift << " at " << i;
    }
    // Strided: every other element of a longer tensor.
    std::vector<float> spread(106, 1.0f);
    for (size_t i = 0; i < 53; ++i) spread[2 * i] = base[i];
    const Tensor s = f.op(from_vector_of(spread, {53, 2}).select(1, 0));
    // In place.
    Tensor inplace = x.clone();
    if (std::string(f.name) == "exp") ops::exp_(inplace);
    else if (std::string(f.name) == "log") ops::log_(inplace);
    else if (std::string(f.name) == "tanh") ops::tanh_(inplace);
    else inplace = f.op(x);
    for (int64_t i = 0; i < 53; ++i) {
      ASSERT_EQ(std::memcmp(&s.contiguous().data_ptr<float>()[i], &full.data_ptr<float>()[i], 4), 0) << f.name;
      ASSERT_EQ(std::memcmp(&inplace.data_ptr<float>()[i], &full.data_ptr<float>()[i], 4), 0) << f.name;
    }
    // Beside a special value in the same register (NaN, inf, 0, a negative, a subnormal, a lane
    // past sin's and cos's fast range), which sends the register down a function's general path.
    for (float special : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.0f, -1.0f,
                          1e-40f, 3e6f, -200.0f}) {
      std::vector<float> mixed(base);
      for (size_t i = 0; i < mixed.size(); i += 5) mixed[i] = special;
      const Tensor y = f.op(from_vector_of(mixed, {53}));
      for (int64_t i = 0; i < 53; ++i)
        if (i % 5 != 0) {
          ASSERT_EQ(std::memcmp(&y.data_ptr<float>()[i], &full.data_ptr<float>()[i], 4), 0)
              << f.name << " beside " << special << " at " << i;
        }
    }
  }
}

// bfloat16 computes in float and rounds once: the float result of the widened input, rounded.
TEST(VecMath, BFloat16IsTheFloatResultRounded) {
  for (const Fn& f : fns()) {
    const std::vector<float> v = sweep<float>(f.lo > 0 ? 1e-3 : -5.0, 5.0, 301);
    const Tensor xb = from_vector_of(v, {301}).to(DType::BFloat16);
    const Tensor yb = f.op(xb), yf = f.op(xb.to(DType::Float32)).to(DType::BFloat16);
    ASSERT_EQ(yb.dtype(), DType::BFloat16);
    for (int64_t i = 0; i < 301; ++i)
      ASSERT_EQ(yb.data_ptr<core::BFloat16>()[i].bits, yf.data_ptr<core::BFloat16>()[i].bits) << f.name << " at " << i;
  }
}

// pow, tensor ** tensor and tensor ** scalar: within 1 ulp of powl over a grid of bases and
// exponents (the exponents LibTorch rewrites, 2, 0.5, -1, ..., take other kernels and are left out).
template <typename M>
void check_pow() {
  std::vector<M> base, expo;
  for (int i = 0; i < 97; ++i)
    for (int j = 0; j < 31; ++j) base.push_back(M(std::exp(-4.6 + 9.2 * i / 96.0))), expo.push_back(M(-7.3 + 0.47 * j));
  const int64_t n = int64_t(base.size());
  const Tensor b = from_vector_of(base, {n}), e = from_vector_of(expo, {n});
  const Tensor y = ops::pow(b, e);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_LE(ulps<M>(y.data_ptr<M>()[i], std::pow((long double)base[size_t(i)], (long double)expo[size_t(i)])), 1.0)
        << "pow(" << base[size_t(i)] << ", " << expo[size_t(i)] << ") in " << core::name(core::dtype_of<M>);
  for (double c : {2.5, -1.7, 0.3}) {
    const Tensor ys = ops::pow(b, core::Scalar(c));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_LE(ulps<M>(ys.data_ptr<M>()[i], std::pow((long double)base[size_t(i)], (long double)M(c))), 1.0)
          << "pow(" << base[size_t(i)] << ", " << c << ")";
  }
}
TEST(VecMath, PowWithinOneUlp) {
  check_pow<float>();
  check_pow<double>();
}

// remainder: fmod, exact, moved to the divisor's sign (Python's %), bit for bit against the
// same rule on libm's fmod, also exact; NaN where either is.
TEST(VecMath, RemainderIsFmodMovedToTheDivisorsSign) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x, y;
  for (float a : {7.5f, -7.5f, 0.0f, -0.0f, 1e30f, -3e-40f, inf, -inf, 5.0f, 1.0f / 3})
    for (float b : {2.0f, -2.0f, 0.7f, -1e-3f, 3e-39f, inf, -inf, 0.0f, 5.0f, 1e30f}) x.push_back(a), y.push_back(b);
  const int64_t n = int64_t(x.size());
  const Tensor xt = from_vector_of(x, {n}), yt = from_vector_of(y, {n});
  const Tensor r = ops::remainder(xt, yt);
  for (int64_t i = 0; i < n; ++i) {
    float want = std::fmod(x[size_t(i)], y[size_t(i)]);
    if (want != 0 && ((y[size_t(i)] < 0) != (want < 0))) want += y[size_t(i)];
    const float got = r.data_ptr<float>()[i];
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << x[size_t(i)] << " % " << y[size_t(i)] << " = " << got;
    } else {
      ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
          << x[size_t(i)] << " % " << y[size_t(i)] << ": " << got << " vs " << want;
    }
  }
  // Floor division takes the same fmod: LibTorch's div_floor_floating, written out here on libm's.
  auto floor_div = [](float a, float b) {
    if (b == 0) return a / b;
    const float mod = std::fmod(a, b);
    float div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    if (div == 0) return std::copysign(0.0f, a / b);
    float fl = std::floor(div);
    if (div - fl > 0.5f) fl += 1;
    return fl;
  };
  for (const bool scalar : {false, true}) {
    const Tensor q = scalar ? ops::div(xt, core::Scalar(-0.7), std::string("floor"))
                            : ops::div(xt, yt, std::string("floor"));
    for (int64_t i = 0; i < n; ++i) {
      const float want = floor_div(x[size_t(i)], scalar ? -0.7f : y[size_t(i)]), got = q.data_ptr<float>()[i];
      if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << x[size_t(i)] << " // " << y[size_t(i)];
      else
        ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
            << x[size_t(i)] << " // " << (scalar ? -0.7f : y[size_t(i)]) << ": " << got << " vs " << want;
    }
  }
  // By a scalar: the same rule.
  const Tensor rs = ops::remainder(xt, core::Scalar(-0.7));
  for (int64_t i = 0; i < n; ++i) {
    float want = std::fmod(x[size_t(i)], -0.7f);
    if (want != 0 && (want > 0)) want += -0.7f;
    const float got = rs.data_ptr<float>()[i];
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got));
    else ASSERT_EQ(got, want) << x[size_t(i)] << " % -0.7";
  }
}

// remainder's fmod bit for bit against libm's on random pairs whose quotients reach 2^40 (past the
// 2^29 where the float32 AVX-512 kernel hands over, Note [fmod of float on AVX-512]), exact
// multiples (a zero result keeps x's sign), and quotients that overflow the type (SLEEF's fmod
// gives NaN there).
template <typename M>
void check_fmod_bits() {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<M> mant(1, 2);
  std::uniform_int_distribution<int> ex(-60, 60), q(0, 40), ulps(-2, 2);
  std::vector<M> x, y;
  for (int i = 0; i < 20000; ++i) {
    const M b = std::ldexp(mant(g), ex(g)) * (g() & 1 ? 1 : -1);
    M a = std::ldexp(b * mant(g), q(g));
    if (i % 3 == 0) a = std::nearbyint(a / b) * b;  // a multiple, or within rounding of one
    if (const int u = ulps(g); u != 0) a = std::nextafter(a, u > 0 ? M(INFINITY) : M(-INFINITY));
    x.push_back(i % 2 ? -a : a), y.push_back(b);
  }
  // Quotients just below an integer that a double division rounds up to it: with Y = 2^p - 1
  // (p the type's digits) and X = Y - 1, X 2^(2p) / Y = 2^(2p) - 2^p - 1 - 1 / Y.
  const int p = std::numeric_limits<M>::digits;
  const M Y = std::ldexp(M(1), p) - 1, X = Y - 1;
  for (int s : {-40, 0, 20})
    for (M sign : {M(1), M(-1)}) x.push_back(sign * std::ldexp(X, 2 * p + s)), y.push_back(std::ldexp(Y, s));
  const M big = std::numeric_limits<M>::max() / 2, tiny = std::numeric_limits<M>::min() * 64;
  for (M a : {big, -big, M(1e30)})
    for (M b : {tiny, -tiny, M(1e-10), M(3.5)}) x.push_back(a), y.push_back(b);
  const int64_t n = int64_t(x.size());
  const Tensor r = ops::remainder(from_vector_of(x, {n}), from_vector_of(y, {n}));
  for (int64_t i = 0; i < n; ++i) {
    const M a = x[size_t(i)], b = y[size_t(i)];
    M want = std::fmod(a, b);
    if (want != 0 && ((b < 0) != (want < 0))) want += b;
    const M got = r.data_ptr<M>()[i];
    ASSERT_EQ(std::memcmp(&got, &want, sizeof(M)), 0)
        << std::hexfloat << a << " % " << b << ": " << got << " vs " << want << " in " << core::name(core::dtype_of<M>);
  }
}
TEST(VecMath, FmodIsExactForEveryQuotient) {
  check_fmod_bits<float>();
  check_fmod_bits<double>();
}

// pow's special cases (C99 Annex F, as libm and LibTorch give them): against libm, exact where
// libm's result is not finite or is an exact power, within 1 ulp otherwise.
TEST(VecMath, PowSpecialCasesAsLibm) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = std::numeric_limits<float>::denorm_min() * 7;
  std::vector<float> b, e;
  for (float x : {-2.0f, 2.0f, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, inf, -inf, nan, sub, -sub, 3e38f})
    for (float y : {3.0f, 2.5f, -1.0f, -3.0f, 0.0f, -0.0f, inf, -inf, nan, 0.5f, 1e-7f, 127.0f, -149.0f})
      b.push_back(x), e.push_back(y);
  const int64_t n = int64_t(b.size());
  const Tensor got = ops::pow(from_vector_of(b, {n}), from_vector_of(e, {n}));
  for (int64_t i = 0; i < n; ++i) {
    const float want = std::pow(b[size_t(i)], e[size_t(i)]), g = got.data_ptr<float>()[i];
    const std::string what = "pow(" + std::to_string(b[size_t(i)]) + ", " + std::to_string(e[size_t(i)]) + ")";
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(g)) << what << " = " << g;
    } else if (!std::isfinite(want) || want == 0) {
      EXPECT_EQ(g, want) << what;
      EXPECT_EQ(std::signbit(g), std::signbit(want)) << what << " sign";
    } else {
      EXPECT_LE(ulps<float>(g, std::pow((long double)b[size_t(i)], (long double)e[size_t(i)])), 1.0)
          << what << " = " << g;
    }
  }
}

}  // namespace
}  // namespace tb
