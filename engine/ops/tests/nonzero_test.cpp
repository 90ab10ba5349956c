// nonzero against an enumeration written here (every multi-index in row-major order whose element
// is nonzero), over ranks 0-4 (the kernel keeps ranks 1 and 2 in registers, the rest in a
// vector), masks that are random, empty, full, or nonzero only in some of the chunks the threads
// split the input into (sizes past the parallel grain), at 1-3 threads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/rng.h"
#include "engine/ops/index.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

void check(const Shape& shape, const std::vector<float>& v, const std::string& what) {
  const Tensor x = from_vector_of(v, shape);
  const Tensor got = ops::nonzero(x);
  const int64_t nd = int64_t(shape.size());
  std::vector<int64_t> want, idx(shape.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != 0) want.insert(want.end(), idx.begin(), idx.end());
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  ASSERT_EQ(got.dim(), 2) << what;
  ASSERT_EQ(got.size(1), nd) << what;
  ASSERT_EQ(got.size(0) * nd, int64_t(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got.data_ptr<int64_t>()[i], want[i]) << what << " at " << i;
}

#if defined(__SANITIZE_THREAD__)
constexpr int kThreadCounts[] = {1};  // as ci/tsan runs OpenMP (its header says why); sort_test.cpp too
#else
constexpr int kThreadCounts[] = {1, 2, 3};
#endif

TEST(Nonzero, MatchesAnEnumeration) {
  const int before = num_threads();
  uint64_t seed = 1;
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (const Shape& shape :
         std::vector<Shape>{{}, {7}, {100000}, {5, 9}, {300, 257}, {3, 4, 5}, {40, 30, 50}, {2, 3, 4, 5}}) {
      const int64_t n = core::checked_numel(shape, "test");
      core::Generator g(seed++);
      const Tensor r = rand({n}, DType::Float32, &g);
      for (const char* kind : {"random", "empty", "full", "first half", "last tenth"}) {
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          const std::string k = kind;
          const bool on = k == "random"       ? r.data_ptr<float>()[i] < 0.5f
                          : k == "empty"      ? false
                          : k == "full"       ? true
                          : k == "first half" ? i < n / 2
                                              : i >= n - n / 10;
          v[size_t(i)] = on ? 1.0f + float(i % 3) : (i % 2 ? 0.0f : -0.0f);
        }
        check(shape, v,
              std::string(kind) + " " + core::to_string(shape) + " at " + std::to_string(threads) + " threads");
        if (::testing::Test::HasFatalFailure()) break;
      }
    }
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace tb
