// Elementwise float32 results bigger than the last-level cache are written with non-temporal
// stores (Note [Streaming float stores] in cpu/bf16_convert.h): after a scalar head that aligns
// the output, a chunk at a time from a buffer. The values must be those of plain stores: add and
// mul (exact per element, so a loop here is the reference bit for bit) into a fresh result and in
// place on a view one element into its storage (a misaligned start), and maximum and minimum
// (their own loop), with NaNs planted, at 1-3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/rng.h"
#include "engine/ops/cpu/bf16_convert.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kThreadCounts[] = {1};  // as ci/tsan runs OpenMP (nonzero_test.cpp says why)
#else
constexpr int kThreadCounts[] = {1, 2, 3};
#endif

TEST(StreamedResults, LastLevelCacheIsAPlausibleSize) {
  const int64_t b = ops::cpu::last_level_cache_bytes();
  EXPECT_GE(b, int64_t(256) << 10);
  EXPECT_LE(b, int64_t(1) << 40);
}

bool same(float x, float y) { return x == y || (x != x && y != y); }  // NaN is NaN

TEST(StreamedResults, BigFloatResultsMatchPlainStores) {
  // Past the cache at any thread count (each thread's run past kStreamBytes too), and odd.
  const int64_t llc = ops::cpu::last_level_cache_bytes();
  const int64_t n = std::max<int64_t>(llc, 3 * ops::cpu::kStreamBytes) / 4 + 12345;
  if (n > (int64_t(64) << 20)) GTEST_SKIP() << "last-level cache of " << llc << " bytes: too big a test";
  core::Generator g(5);
  const Tensor a = randn({n + 1}, DType::Float32, &g), b = randn({n}, DType::Float32, &g);
  for (int64_t i : {int64_t(3), n / 2, n - 1}) {  // NaNs in the head, a streamed chunk and the tail
    const_cast<float*>(a.data_ptr<float>())[i] = NAN;
    const_cast<float*>(b.data_ptr<float>())[i + 7 < n ? i + 7 : i] = NAN;
  }
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const int before = num_threads();
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    const std::string at = std::to_string(threads) + " threads";
    const Tensor sum = ops::add(a.narrow(0, 0, n), b), prod = ops::mul(a.narrow(0, 0, n), b);
    const Tensor hi = ops::maximum(a.narrow(0, 0, n), b), lo = ops::minimum(a.narrow(0, 0, n), b);
    Tensor c = a.clone();
    Tensor view = c.narrow(0, 1, n);  // starts 4 bytes into its storage: a head before the streams
    ops::add_(view, b);
    const float* ps = sum.data_ptr<float>();
    const float* pp = prod.data_ptr<float>();
    const float* pc = c.data_ptr<float>();
    const float *phi = hi.data_ptr<float>(), *plo = lo.data_ptr<float>();
    ASSERT_EQ(pc[0], pa[0]) << "in place wrote before its view, " << at;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same(ps[i], pa[i] + pb[i])) << "add at " << i << ", " << at;
      ASSERT_TRUE(same(pp[i], pa[i] * pb[i])) << "mul at " << i << ", " << at;
      ASSERT_TRUE(same(pc[i + 1], pa[i + 1] + pb[i])) << "add_ at " << i << ", " << at;
      // NaN where either input is one (a few of each are planted below), else the larger / smaller.
      const bool nan = pa[i] != pa[i] || pb[i] != pb[i];
      ASSERT_TRUE(nan ? phi[i] != phi[i] : phi[i] == std::max(pa[i], pb[i])) << "maximum at " << i << ", " << at;
      ASSERT_TRUE(nan ? plo[i] != plo[i] : plo[i] == std::min(pa[i], pb[i])) << "minimum at " << i << ", " << at;
    }
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace tb
