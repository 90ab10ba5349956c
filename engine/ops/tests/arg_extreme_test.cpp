// max/min along a dim with indices, argmax/argmin, against a scan written here: the first
// element that no later one beats, a NaN beating every number (the first NaN wins). Rows along the
// last dim take a vectorised reduction and a search (reduce.cpp, arg_reduce); other dims the
// element-wise scan. Values drawn from a few integers (ties), -0 and +0, infinities and NaN, in
// every dtype, rows of lengths around the vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/tests/values.h"

namespace tb {
namespace {

using testing::values;

// Row-major (rows, L) values: small integers, with -0, +-inf and NaN for floating dtypes.
std::vector<double> draw(int64_t n, bool floating, uint64_t seed) {
  core::Generator g(seed);
  const Tensor pick = randint(0, 12, {n}, DType::Int64, &g);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = pick.data_ptr<int64_t>()[i];
    v[size_t(i)] = k < 7       ? double(k - 3)
                   : !floating ? double(k)
                   : k == 7    ? -0.0
                   : k == 8    ? INFINITY
                   : k == 9    ? -INFINITY
                   : k == 10   ? 5.0
                               : NAN;
  }
  return v;
}

// The scan: index of the first element no later one beats.
int64_t scan(const std::vector<double>& row, bool want_max) {
  int64_t at = 0;
  for (size_t r = 1; r < row.size(); ++r) {
    const double v = row[r], b = row[size_t(at)];
    if (std::isnan(b)) break;
    if (std::isnan(v) || (want_max ? v > b : v < b)) at = int64_t(r);
  }
  return at;
}

TEST(ArgExtreme, MatchesTheScanAlongEveryDim) {
  const DType dts[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32, DType::Int64};
  uint64_t seed = 1;
  for (DType dt : dts)
    for (int64_t L : {1, 5, 16, 17, 100, 1000})
      for (int nan_rate : {0, 1}) {
        const int64_t rows = 7;
        std::vector<double> v = draw(rows * L, core::is_floating(dt), seed++);
        if (!nan_rate)
          for (double& x : v)
            if (std::isnan(x)) x = 2;
        const Tensor x = from_vector(v, {rows, L}, dt);
        for (bool want_max : {true, false}) {
          const auto [val, idx] = want_max ? ops::max(x, 1) : ops::min(x, 1);
          const Tensor arg = want_max ? ops::argmax(x, 1) : ops::argmin(x, 1);
          // Along dim 0 of the transpose: the same rows through the element-wise scan.
          const auto [val_t, idx_t] = want_max ? ops::max(x.t().contiguous(), 0) : ops::min(x.t().contiguous(), 0);
          const std::vector<double> got_v = values(val), got_vt = values(val_t);
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<double> row(v.begin() + r * L, v.begin() + (r + 1) * L);
            const int64_t want = scan(row, want_max);
            const std::string what = std::string(core::name(dt)) + " L " + std::to_string(L) + " row " +
                                     std::to_string(r) + (want_max ? " max" : " min");
            ASSERT_EQ(idx.data_ptr<int64_t>()[r], want) << what;
            ASSERT_EQ(arg.data_ptr<int64_t>()[r], want) << what;
            ASSERT_EQ(idx_t.data_ptr<int64_t>()[r], want) << what << " (dim 0)";
            const double wv = row[size_t(want)];
            if (std::isnan(wv)) {
              ASSERT_TRUE(std::isnan(got_v[size_t(r)]) && std::isnan(got_vt[size_t(r)])) << what;
            } else {
              ASSERT_EQ(got_v[size_t(r)], wv) << what;
              ASSERT_EQ(std::signbit(got_v[size_t(r)]), std::signbit(wv)) << what << ": the sign of a zero";
              ASSERT_EQ(got_vt[size_t(r)], wv) << what;
            }
          }
        }
      }
}

// When the extreme is a zero, the value returned is the first zero met, with its sign (a
// reduction's own max of -0 and +0 could be either).
TEST(ArgExtreme, ZerosKeepTheSignOfTheFirst) {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16})
    for (int64_t L : {2, 17, 40}) {
      std::vector<double> v;
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t i = 0; i < L; ++i)
          v.push_back(i == 0 ? (r % 2 ? -0.0 : 0.0) : i % 3 == 0 ? -1.0 : (i + r) % 2 ? -0.0 : 0.0);
      const Tensor x = from_vector(v, {4, L}, dt);
      const std::vector<double> mx = values(std::get<0>(ops::max(x, 1)));
      for (int64_t r = 0; r < 4; ++r)
        ASSERT_EQ(std::signbit(mx[size_t(r)]), r % 2 == 1) << core::name(dt) << " L " << L << " row " << r;
    }
}

}  // namespace
}  // namespace tb
