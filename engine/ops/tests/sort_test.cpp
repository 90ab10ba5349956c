// sort against a comparison sort written here: std::stable_sort of the positions by the values
// read as double, NaN after every number (before, descending), as PyTorch orders them. Rows of
// every length the kernel treats differently (std::stable_sort below 256, the radix sort from
// 256, its threaded passes past 32768 elements in one row), every dtype, both directions and 1-3
// threads, over values drawn from a pool full of ties and of the floats a key mapping gets wrong:
// -0 beside +0, NaNs of both signs and other payloads, infinities, subnormals, the extremes.
// Values must come back bit for bit (a -0 stays -0, a NaN keeps its payload) and the positions
// exactly (a stable sort has one answer).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/index.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

template <typename T>
T from_bits(uint64_t b) {
  if constexpr (std::is_same_v<T, core::BFloat16> || std::is_same_v<T, core::Half>) {
    T t;
    t.bits = uint16_t(b);
    return t;
  } else if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<float>(uint32_t(b));
  } else {
    return std::bit_cast<double>(b);
  }
}

// The awkward values of T, by bit pattern where a conversion could lose them, plus small
// integers (ties).
template <typename T>
std::vector<T> pool() {
  std::vector<T> p;
  for (int i = -3; i <= 3; ++i) p.push_back(T(float(i)));
  if constexpr (std::is_same_v<T, bool>) {
    return {false, true};
  } else if constexpr (std::is_integral_v<T>) {
    p.push_back(std::numeric_limits<T>::min());
    p.push_back(std::numeric_limits<T>::max());
    p.push_back(T(std::numeric_limits<T>::min() + 1));
  } else {
    constexpr bool wide = sizeof(T) >= 4;
    constexpr int bits = int(sizeof(T)) * 8;
    const uint64_t sign = uint64_t(1) << (bits - 1);
    // Exponent all ones: +inf; with mantissa bits, NaN.
    const uint64_t inf = std::is_same_v<T, float>        ? 0x7f800000u
                         : std::is_same_v<T, double>     ? 0x7ff0000000000000u
                         : std::is_same_v<T, core::Half> ? 0x7c00u
                                                         : 0x7f80u;
    for (uint64_t b : {uint64_t(0), sign, inf, inf | sign, inf | 1, inf | 1 | sign, inf | (inf >> 1), uint64_t(1),
                       uint64_t(1) | sign, inf - 1, (inf - 1) | sign})
      p.push_back(from_bits<T>(b));
    if (wide) p.push_back(T(float(0.1)));
    // Neighbours one unit in the last place apart, of both signs: a key that drops a low bit ties them.
    for (float f : {1.0f, -1.0f, 2.5f, -2.5f}) {
      const T t(f);
      uint64_t b = 0;
      std::memcpy(&b, &t, sizeof(T));
      p.push_back(from_bits<T>(b + 1));
      p.push_back(from_bits<T>(b - 1));
    }
  }
  return p;
}

template <typename T>
double as_double(T v) {
  return double(static_cast<core::opmath_t<T>>(v));
}

// rows x L values drawn from pool<T>().
template <typename T>
Tensor pool_rows(int64_t rows, int64_t L, uint64_t seed) {
  const std::vector<T> p = pool<T>();
  core::Generator g(seed);
  const Tensor pick = randint(0, int64_t(p.size()), {rows * L}, DType::Int64, &g);
  std::vector<T> in(size_t(rows * L));
  for (size_t i = 0; i < in.size(); ++i) in[i] = p[size_t(pick.data_ptr<int64_t>()[i])];
  return from_vector_of(in, {rows, L});
}

// The first k of each row of x's stable sort, against ops::sort (k == L) or ops::topk (k < L,
// largest = descending): positions exactly, values bit for bit.
template <typename T>
void check_first_k(const Tensor& x, int64_t k, bool descending) {
  const int64_t rows = x.size(0), L = x.size(1);
  const auto [values, indices] = k == L ? ops::sort(x, true, -1, descending)
                                        : ops::topk(x, k, -1, /*largest=*/descending);
  ASSERT_TRUE(values.is_contiguous() && indices.is_contiguous());
  ASSERT_EQ(values.size(1), k);
  const T* got = values.data_ptr<T>();
  const int64_t* got_at = indices.data_ptr<int64_t>();
  using M = core::opmath_t<T>;  // compared in the type itself: a double would merge large int64s
  auto nan = [](M v) {
    if constexpr (std::is_floating_point_v<M>) return std::isnan(v);
    else return false;
  };
  auto before = [descending, nan](M a, M b) {
    if (nan(a) || nan(b)) return descending ? nan(a) && !nan(b) : nan(b) && !nan(a);
    return descending ? a > b : a < b;
  };
  std::vector<int64_t> order(static_cast<size_t>(L));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data_ptr<T>() + r * L;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return before(M(row[a]), M(row[b])); });
    for (int64_t i = 0; i < k; ++i) {
      const int64_t want = order[size_t(i)];
      ASSERT_EQ(got_at[r * k + i], want) << "row " << r << " position " << i << " of " << k << " of " << L
                                         << (descending ? " descending" : " ascending") << ": value "
                                         << as_double(row[want]);
      ASSERT_EQ(std::memcmp(&got[r * k + i], &row[want], sizeof(T)), 0) << "row " << r << " position " << i;
    }
  }
}

template <typename T>
void check_sort(int64_t rows, int64_t L, bool descending, uint64_t seed) {
  check_first_k<T>(pool_rows<T>(rows, L, seed), L, descending);
}

#if defined(__SANITIZE_THREAD__)
// Debian's libgomp is not built with TSan, which would report the threads of one parallel region
// as racing past barriers it cannot see; ci/tsan runs OpenMP on one thread for that reason (its
// header), and so does this test there.
constexpr int kThreadCounts[] = {1};
#else
constexpr int kThreadCounts[] = {1, 2, 3};
#endif

template <typename T>
void check_all_lengths(const char* name) {
  uint64_t seed = 1;
  const int before = num_threads();
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (const auto& [rows, L] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {4, 255}, {3, 256}, {2, 257}, {5, 1000}, {1, 4097}, {1, 40001}, {200, 300}})
      for (bool descending : {false, true}) {
        SCOPED_TRACE(std::string(name) + ", " + std::to_string(threads) + " threads, " + std::to_string(rows) + " x " +
                     std::to_string(L));
        check_sort<T>(rows, L, descending, seed++);
        if (::testing::Test::HasFatalFailure()) break;
      }
  }
  set_num_threads(before);
}

TEST(Sort, Float32MatchesAStableComparisonSort) { check_all_lengths<float>("float32"); }
TEST(Sort, Float64MatchesAStableComparisonSort) { check_all_lengths<double>("float64"); }
TEST(Sort, BFloat16MatchesAStableComparisonSort) { check_all_lengths<core::BFloat16>("bfloat16"); }
TEST(Sort, Float16MatchesAStableComparisonSort) { check_all_lengths<core::Half>("float16"); }
TEST(Sort, Int32MatchesAStableComparisonSort) { check_all_lengths<int32_t>("int32"); }
TEST(Sort, Int64MatchesAStableComparisonSort) { check_all_lengths<int64_t>("int64"); }
TEST(Sort, BoolMatchesAStableComparisonSort) { check_all_lengths<bool>("bool"); }

// topk with k below the row (Note [Small k] in cpu/sort.cpp for k <= 32 and rows of 4k or more,
// std::partial_sort past it): the stable sort's first k, so ties to the lower index, over the
// pool's ties, NaNs and zeros of both signs, and over rows already in order either way, where
// every element displaces the k-th (the small path's worst case).
template <typename T>
void check_topk_all(const char* name) {
  uint64_t seed = 100;
  const int before = num_threads();
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (const auto& [rows, L] : std::vector<std::pair<int64_t, int64_t>>{{3, 7}, {5, 131}, {40, 1000}, {1, 5000}})
      for (int64_t k : {int64_t(1), int64_t(2), int64_t(5), int64_t(10), int64_t(32), int64_t(33), L / 4, L - 1}) {
        if (k < 1 || k >= L) continue;
        for (bool largest : {false, true}) {
          SCOPED_TRACE(std::string(name) + ", " + std::to_string(threads) + " threads, " + std::to_string(rows) +
                       " x " + std::to_string(L) + ", k " + std::to_string(k) + (largest ? ", largest" : ", smallest"));
          check_first_k<T>(pool_rows<T>(rows, L, seed++), k, largest);
          if constexpr (!std::is_same_v<T, bool>) {
            // Ascending and descending runs (wrapping, so each row holds ties too).
            std::vector<T> up(size_t(rows * L)), down(size_t(rows * L));
            for (int64_t i = 0; i < rows * L; ++i) {
              up[size_t(i)] = T(float(i % 100));
              down[size_t(i)] = T(float(100 - i % 100));
            }
            check_first_k<T>(from_vector_of(up, {rows, L}), k, largest);
            check_first_k<T>(from_vector_of(down, {rows, L}), k, largest);
          }
          if (::testing::Test::HasFatalFailure()) break;
        }
      }
  }
  set_num_threads(before);
}

TEST(Topk, Float32IsTheStableSortsFirstK) { check_topk_all<float>("float32"); }
TEST(Topk, Float64IsTheStableSortsFirstK) { check_topk_all<double>("float64"); }
TEST(Topk, BFloat16IsTheStableSortsFirstK) { check_topk_all<core::BFloat16>("bfloat16"); }
TEST(Topk, Float16IsTheStableSortsFirstK) { check_topk_all<core::Half>("float16"); }
TEST(Topk, Int32IsTheStableSortsFirstK) { check_topk_all<int32_t>("int32"); }
TEST(Topk, Int64IsTheStableSortsFirstK) { check_topk_all<int64_t>("int64"); }

// topk over a whole row runs the same full sort: the k largest, NaN first.
TEST(Sort, TopkOfAWholeRowIsTheDescendingSort) {
  const std::vector<float> p = pool<float>();
  std::vector<float> in;
  for (int i = 0; i < 700; ++i) in.push_back(p[size_t(i * 7 % int(p.size()))]);
  const Tensor x = from_vector_of(in, {1, 700});
  const auto [tv, ti] = ops::topk(x, 700);
  const auto [sv, si] = ops::sort(x, true, -1, true);
  ASSERT_EQ(std::memcmp(tv.data_ptr<float>(), sv.data_ptr<float>(), 700 * sizeof(float)), 0);
  EXPECT_TRUE(std::isnan(tv.data_ptr<float>()[0]));
}

}  // namespace
}  // namespace tb
