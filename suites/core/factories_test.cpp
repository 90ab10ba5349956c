// Factories against LibTorch: dtype inference from the number arguments (Note [Factory dtypes]
// in engine/tensor/factories.h), values, shapes, and error parity, over grids of bool, int and
// float arguments; and shape overflow (random hostile dims) against torch::empty / as_strided.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/tensor/factories.h"
#include "reference/factories.h"
#include "reference/tensor.h"

namespace tb {
namespace {

using core::Scalar;

std::string str(const Scalar& s) {
  return s.is_bool() ? (s.i ? "True" : "False") : s.is_float() ? std::to_string(s.d) : std::to_string(s.i);
}
std::string str(std::optional<DType> d) { return d ? core::name(*d) : "none"; }

double eps(DType d) {
  switch (d) {
    case DType::Float64: return 0x1p-52;
    case DType::Float32: return 0x1p-23;
    case DType::Float16: return 0x1p-10;
    case DType::BFloat16: return 0x1p-7;
    default: return 0;
  }
}

// Runs both sides; both must fail, or both succeed with the same dtype, shape and values: equal,
// or within `ulps` units of the dtype's precision. (torch's arange computes lanes of a SIMD
// vector as base + i * step in the dtype, so its floating values depend on the host's vector
// width; the engine computes start + i * step in double and rounds once.)
template <typename E, typename R>
void expect_same(const std::string& what, E&& engine, R&& reference, double ulps = 0) {
  Tensor e, r;
  std::string e_err, r_err;
  try {
    e = engine();
  } catch (const core::Error& ex) {
    e_err = ex.what();
  }
  try {
    r = ref::from_ref(reference());
  } catch (const ref::RefError& ex) {
    r_err = ex.what();
  }
  ASSERT_EQ(e_err.empty(), r_err.empty()) << what << ": engine says '" << e_err << "', LibTorch says '" << r_err << "'";
  if (!e_err.empty()) return;
  ASSERT_EQ(core::name(e.dtype()), core::name(r.dtype())) << what;
  ASSERT_EQ(e.sizes(), r.sizes()) << what;
  if (e.dtype() == DType::Int64) {
    const Tensor ec = e.contiguous(), rc = r.contiguous();
    for (int64_t i = 0; i < e.numel(); ++i)
      ASSERT_EQ(ec.data_ptr<int64_t>()[i], rc.data_ptr<int64_t>()[i]) << what << " [" << i << "]";
  } else {
    const Tensor ec = e.to(DType::Float64).contiguous(), rc = r.to(DType::Float64).contiguous();
    for (int64_t i = 0; i < e.numel(); ++i) {
      const double a = ec.data_ptr<double>()[i], b = rc.data_ptr<double>()[i];
      if (std::isnan(b)) ASSERT_TRUE(std::isnan(a)) << what << " [" << i << "]";
      else if (ulps == 0) ASSERT_EQ(a, b) << what << " [" << i << "]";
      else ASSERT_LE(std::abs(a - b), ulps * eps(e.dtype()) * std::max(1.0, std::abs(b))) << what << " [" << i << "]";
    }
  }
}

bool integral(std::optional<DType> d) { return d && !core::is_floating(*d); }

TEST(Factories, ArangeInfersItsDtypeAndValuesAsLibTorch) {
  const std::vector<Scalar> starts = {0, 1, -3, 0.5, 2.0, -0.25, true};
  const std::vector<Scalar> ends = {1, 5, 17, 2.5, 1.0, -4, 10.75};
  const std::vector<Scalar> steps = {1, 2, -1, 0.1, 0.5, 1.5, -0.75, 3};
  const std::vector<std::optional<DType>> dtypes = {std::nullopt,   DType::Int64,   DType::Int32,
                                                    DType::Float32, DType::Float64, DType::BFloat16};
  int compared = 0;
  for (const Scalar& s : starts)
    for (const Scalar& e : ends)
      for (const Scalar& st : steps)
        for (const auto& dt : dtypes) {
          const std::string what = "arange(" + str(s) + ", " + str(e) + ", " + str(st) + ", dtype=" + str(dt) + ")";
          // torch divides by the step truncated to an integer dtype: where it is 0 torch dies of
          // SIGFPE (int64) or repeats the start (int32); the engine refuses instead.
          if (integral(dt) && std::trunc(st.d) == 0) {
            EXPECT_THROW(arange(s, e, st, dt), core::Error) << what;
            continue;
          }
          expect_same(
              what, [&] { return arange(s, e, st, dt); }, [&] { return ref::arange(s, e, st, dt); }, 2);
          ++compared;
        }
  EXPECT_GT(compared, 500);
  // The example: ten float32 values, not ten int64 zeros.
  Tensor t = arange(0, 1, 0.1);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.sizes(), Shape({10}));
  EXPECT_EQ(arange(5).dtype(), DType::Int64);
  EXPECT_EQ(arange(5.0).dtype(), DType::Float32);
}

TEST(Factories, FullInfersItsDtypeAndRangeChecksAsLibTorch) {
  const std::vector<Scalar> values = {0,     3,     -7,  2.5,          -2.7,     true, false, int64_t(1) << 40,
                                      1e10,  -1e10, 3e9, std::nan(""), INFINITY, -129, 200,   int64_t(INT64_MAX),
                                      9.3e18};
  const std::vector<std::optional<DType>> dtypes = {std::nullopt,   DType::Bool,    DType::Int32,   DType::Int64,
                                                    DType::Float32, DType::Float64, DType::BFloat16};
  for (const Scalar& v : values)
    for (const auto& dt : dtypes) {
      const std::string what = "full([2, 3], " + str(v) + ", dtype=" + str(dt) + ")";
      expect_same(
          what,
          [&] {
            return full({2, 3}, v, dt);
          },
          [&] {
            return ref::full({2, 3}, v, dt);
          });
    }
}

TEST(Factories, ScalarTensorAndLinspaceAreFloat32WhateverTheArguments) {
  for (const Scalar& v : std::vector<Scalar>{3, 2.5, true, -7})
    expect_same(
        "scalar_tensor(" + str(v) + ")", [&] { return scalar_tensor(v.d); },
        [&] { return ref::scalar_tensor(v, std::nullopt); });
  for (const auto& [a, b] : std::vector<std::pair<Scalar, Scalar>>{{0, 10}, {0, 1}, {-1, 2.5}, {3, 3}})
    for (int64_t n : {0, 1, 5, 11})
      expect_same(
          "linspace(" + str(a) + ", " + str(b) + ", " + std::to_string(n) + ")", [&] { return linspace(a.d, b.d, n); },
          [&] { return ref::linspace(a, b, n, std::nullopt); });
}

TEST(Factories, FromVectorIsOneDimensionalUnlessGivenAShape) {
  EXPECT_EQ(from_vector({2.5}).sizes(), Shape({1}));  // torch.tensor([2.5]) has shape (1,)
  EXPECT_EQ(from_vector({1, 2, 3}).sizes(), Shape({3}));
  EXPECT_EQ(from_vector({}).sizes(), Shape({0}));
  EXPECT_EQ(from_vector({2.5}, Shape{}).dim(), 0);
  EXPECT_EQ(from_vector({2.5}, Shape{}).item<double>(), 2.5);
  EXPECT_EQ(from_vector({1, 2, 3, 4}, Shape{2, 2}).sizes(), Shape({2, 2}));
  EXPECT_THROW(from_vector({1, 2, 3}, Shape{}), core::Error);
  EXPECT_THROW(from_vector({1e10}, DType::Int32), core::Error);  // no UB float -> int
  EXPECT_THROW(from_vector({std::nan("")}, DType::Int64), core::Error);
  EXPECT_EQ(from_vector({-2.7}, DType::Int32).item<int64_t>(), -2);  // truncation, as torch
}

// Shapes with a zero dim (nothing is allocated on either side) and hostile other dims: the
// engine refuses exactly the shapes LibTorch refuses and gives the same strides otherwise;
// shapes without a zero whose bytes overflow int64 are refused by both.
TEST(Factories, EmptyOverflowMatchesLibTorch) {
  std::mt19937_64 rng(20261202);
  const int64_t picks[] = {1,
                           2,
                           3,
                           5,
                           int64_t(1) << 20,
                           int64_t(1) << 31,
                           int64_t(1) << 32,
                           int64_t(1) << 61,
                           int64_t(1) << 62,
                           INT64_MAX / 3,
                           INT64_MAX - 1,
                           INT64_MAX};
  int zero_cases = 0, overflow_cases = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Shape s(1 + rng() % 4);
    for (int64_t& d : s) d = picks[rng() % std::size(picks)];
    const bool with_zero = rng() % 2;
    if (with_zero) s[rng() % s.size()] = 0;
    const DType dt = rng() % 2 ? DType::Float32 : DType::Float64;
    if (!with_zero) {
      __int128 bytes = core::itemsize(dt);
      bool over = false;
      for (int64_t d : s) over |= (bytes *= d) > INT64_MAX;
      if (!over) continue;  // a valid shape of this size would allocate exabytes on both sides
      ++overflow_cases;
    } else {
      ++zero_cases;
    }
    const std::string what = "empty(" + core::to_string(s) + ", " + core::name(dt) + ")";
    Tensor e;
    bool e_ok = true, r_ok = true;
    ref::Tensor r;
    try {
      e = empty(s, dt);
    } catch (const core::Error&) {
      e_ok = false;
    }
    try {
      r = ref::empty_checked(s, dt);
    } catch (const ref::RefError&) {
      r_ok = false;
    }
    ASSERT_EQ(e_ok, r_ok) << what;
    if (e_ok) {
      ASSERT_EQ(e.strides(), r.strides()) << what;
    }
  }
  EXPECT_GT(zero_cases, 500);
  EXPECT_GT(overflow_cases, 100);
}

TEST(Factories, AsStridedReachMatchesLibTorch) {
  std::mt19937_64 rng(7);
  const int64_t sizes[] = {0, 1, 2, 3, 5, int64_t(1) << 31, int64_t(1) << 62, INT64_MAX};
  const int64_t strides[] = {0, 1, 2, 4, int64_t(1) << 31, int64_t(1) << 61, int64_t(1) << 62, INT64_MAX};
  const int64_t offsets[] = {0, 1, 9, 10, int64_t(1) << 62, INT64_MAX};
  for (int iter = 0; iter < 3000; ++iter) {
    Shape sz(1 + rng() % 3), st(sz.size());
    for (int64_t& d : sz) d = sizes[rng() % std::size(sizes)];
    for (int64_t& d : st) d = strides[rng() % std::size(strides)];
    const int64_t off = offsets[rng() % std::size(offsets)];
    const std::string what = "empty({10}).as_strided(" + core::to_string(sz) + ", " + core::to_string(st) + ", " +
                             std::to_string(off) + ")";
    bool e_ok = true, r_ok = true;
    try {
      empty({10}).as_strided(sz, st, off);
    } catch (const core::Error&) {
      e_ok = false;
    }
    try {
      ref::as_strided_of(10, sz, st, off);
    } catch (const ref::RefError&) {
      r_ok = false;
    }
    ASSERT_EQ(e_ok, r_ok) << what;
  }
}

}  // namespace
}  // namespace tb
