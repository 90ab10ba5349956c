// The reduction engine (cpu/reduce_kernel.h) splits work two ways: many outputs, each a task that
// finishes its own result in place, or few outputs whose rows are split across the threads and
// merged afterwards. Every output of both, along rows (I = 1) and columns (I > 1), past the
// parallel grain at 1-3 threads, against a loop in long double: sum, mean (a finish that divides),
// var (a centered op), amax (a selection) and all (bool accumulators).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/rng.h"
#include "engine/ops/reduce.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kThreadCounts[] = {1};  // as ci/tsan runs OpenMP (nonzero_test.cpp says why)
#else
constexpr int kThreadCounts[] = {1, 2, 3};
#endif

struct Case {
  int64_t O, R, I;  // the input (O, R, I), reduced over R
  const char* what;
};

// Per output (o, i): sum, mean, unbiased var, max and all(x != 0) of x[o, :, i].
void check(const Tensor& x, const Case& c, const std::string& at) {
  const Tensor s = ops::sum(x, {1}), m = ops::mean(x, {1}), v = ops::var(x, {1}), mx = ops::amax(x, {1});
  const Tensor nz = ops::all(x, 1);
  const double* px = x.data_ptr<double>();
  const double *ps = s.data_ptr<double>(), *pm = m.data_ptr<double>(), *pv = v.data_ptr<double>();
  const double* pmx = mx.data_ptr<double>();
  const bool* pnz = nz.data_ptr<bool>();
  for (int64_t o = 0; o < c.O; ++o) {
    for (int64_t i = 0; i < c.I; ++i) {
      long double sum = 0, abs = 0, sq = 0, best = -INFINITY;
      bool all = true;
      for (int64_t r = 0; r < c.R; ++r) {
        const double e = px[(o * c.R + r) * c.I + i];
        sum += e, abs += std::fabs(e), best = std::max<long double>(best, e), all = all && e != 0;
      }
      const long double mean = sum / c.R;
      for (int64_t r = 0; r < c.R; ++r) {
        const long double d = px[(o * c.R + r) * c.I + i] - mean;
        sq += d * d;
      }
      const int64_t k = o * c.I + i;
      const std::string where = std::string(c.what) + " output " + std::to_string(k) + ", " + at;
      // Pairwise float64 sums: within a few units of n * eps of the sum of |x|.
      ASSERT_NEAR(ps[k], double(sum), 1e-13 * double(abs) + 1e-300) << "sum, " << where;
      ASSERT_NEAR(pm[k], double(mean), 1e-13 * double(abs) / c.R + 1e-300) << "mean, " << where;
      ASSERT_NEAR(pv[k], double(sq / (c.R - 1)), 1e-11 * double(sq / (c.R - 1))) << "var, " << where;
      ASSERT_EQ(pmx[k], double(best)) << "amax, " << where;
      ASSERT_EQ(pnz[k], all) << "all, " << where;
    }
  }
}

TEST(ReduceSplit, EveryOutputOfEveryWayOfSplittingMatchesALoop) {
  const Case cases[] = {
      {300, 1000, 1, "rows, one task per row"},
      {1, 100003, 1, "one row split across the threads"},
      {2, 70001, 1, "two rows split across the threads"},
      {1, 70, 3000, "columns in tiles, one task per tile"},
      {1, 5001, 100, "one tile, its rows split across the threads"},
      {3, 200, 1500, "columns of a middle dim"},
  };
  core::Generator g(11);
  const int before = num_threads();
  for (const Case& c : cases) {
    Tensor x = randn({c.O, c.R, c.I}, DType::Float64, &g);
    x.data_ptr<double>()[c.I] = 0.0;  // one zero: all(x != 0) is false for output 0 only
    for (int threads : kThreadCounts) {
      set_num_threads(threads);
      check(x, c, std::to_string(threads) + " threads");
    }
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace tb
