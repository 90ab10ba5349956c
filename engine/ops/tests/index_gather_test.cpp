// gather, scatter and scatter_add past the parallel grain (the loop over slices splits across
// threads once slices x indices per slice is large), against loops written here, at 1-3 threads;
// and a bad index in one slice of many: out-of-place ops (which check each slice as they reach
// it) and in-place ones (which check every index first) both raise naming it, and the in-place
// ones leave self exactly as it was. And a gather big enough for streaming stores.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/ops/index.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kThreadCounts[] = {1};  // as ci/tsan runs OpenMP (nonzero_test.cpp says why)
#else
constexpr int kThreadCounts[] = {1, 2, 3};
#endif

constexpr int64_t kRows = 300, kCols = 257;  // 77K elements: past kParallelGrain along either dim

// Each slice along `dim` of a (kRows, kCols) index a permutation of [0, size along dim), so plain
// scatter has no duplicate to resolve; gather and scatter_add take random indices.
Tensor permutation_index(int64_t dim, core::Generator& g) {
  const int64_t K = dim == 1 ? kCols : kRows, slices = dim == 1 ? kRows : kCols;
  std::vector<int64_t> v(size_t(kRows * kCols));
  const Tensor r = rand({slices, K}, DType::Float32, &g);
  for (int64_t s = 0; s < slices; ++s) {
    std::vector<int64_t> perm(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) perm[size_t(k)] = k;
    for (int64_t k = K - 1; k > 0; --k)  // Fisher-Yates from the random floats
      std::swap(perm[size_t(k)], perm[size_t(int64_t(r.data_ptr<float>()[s * K + k] * float(k + 1)) % (k + 1))]);
    for (int64_t k = 0; k < K; ++k) v[size_t(dim == 1 ? s * kCols + k : k * kCols + s)] = perm[size_t(k)];
  }
  return from_vector_of(v, {kRows, kCols});
}

float at(const Tensor& t, int64_t i, int64_t j) { return t.data_ptr<float>()[i * kCols + j]; }
int64_t iat(const Tensor& t, int64_t i, int64_t j) { return t.data_ptr<int64_t>()[i * kCols + j]; }

TEST(IndexGather, GatherAndScatterPastTheGrainMatchLoops) {
  const int before = num_threads();
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (int64_t dim : {0, 1}) {
      const std::string what = "dim " + std::to_string(dim) + " at " + std::to_string(threads) + " threads";
      core::Generator g(uint64_t(7 + dim));
      const Tensor self = randn({kRows, kCols}, DType::Float32, &g), src = randn({kRows, kCols}, DType::Float32, &g);
      const Tensor idx = randint(0, dim == 1 ? kCols : kRows, {kRows, kCols}, DType::Int64, &g);
      const Tensor perm = permutation_index(dim, g);

      const Tensor gathered = ops::gather(self, dim, idx);
      const Tensor scattered = ops::scatter(self, dim, perm, src);
      const Tensor added = ops::scatter_add(self, dim, idx, src);
      Tensor in_place = self.clone();
      ops::scatter_add_(in_place, dim, idx, src);

      std::vector<float> want_scatter(size_t(kRows * kCols)), want_add(size_t(kRows * kCols));
      std::memcpy(want_scatter.data(), self.data_ptr<float>(), want_scatter.size() * sizeof(float));
      want_add = want_scatter;
      for (int64_t i = 0; i < kRows; ++i)
        for (int64_t j = 0; j < kCols; ++j) {
          const int64_t gi = dim == 0 ? iat(idx, i, j) : i, gj = dim == 1 ? iat(idx, i, j) : j;
          ASSERT_EQ(at(gathered, i, j), at(self, gi, gj)) << "gather " << what << " at " << i << "," << j;
          const int64_t pi = dim == 0 ? iat(perm, i, j) : i, pj = dim == 1 ? iat(perm, i, j) : j;
          want_scatter[size_t(pi * kCols + pj)] = at(src, i, j);
        }
      // scatter_add in index order along each slice, as the kernel adds (one float rounding each).
      for (int64_t s = 0; s < (dim == 1 ? kRows : kCols); ++s)
        for (int64_t k = 0; k < (dim == 1 ? kCols : kRows); ++k) {
          const int64_t i = dim == 1 ? s : k, j = dim == 1 ? k : s;
          const int64_t ti = dim == 0 ? iat(idx, i, j) : i, tj = dim == 1 ? iat(idx, i, j) : j;
          want_add[size_t(ti * kCols + tj)] += at(src, i, j);
        }
      for (int64_t e = 0; e < kRows * kCols; ++e) {
        ASSERT_EQ(scattered.data_ptr<float>()[e], want_scatter[size_t(e)]) << "scatter " << what << " at " << e;
        ASSERT_EQ(added.data_ptr<float>()[e], want_add[size_t(e)]) << "scatter_add " << what << " at " << e;
        ASSERT_EQ(in_place.data_ptr<float>()[e], want_add[size_t(e)]) << "scatter_add_ " << what << " at " << e;
      }
    }
  }
  set_num_threads(before);
}

// The message must name the bad index.
template <typename F>
void expect_error_naming(F&& f, int64_t bad, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad) + " is out of bounds"), std::string::npos)
        << what << ": " << e.what();
  }
}

TEST(IndexGather, ABadIndexInOneSliceOfManyRaisesAndInPlaceOpsWriteNothing) {
  const int before = num_threads();
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (int64_t dim : {0, 1}) {
      const int64_t size = dim == 1 ? kCols : kRows;
      for (int64_t bad : {size, int64_t(-1), int64_t(1) << 40}) {
        // A bad index in the last slice, and one in a middle one (another thread's share).
        for (int64_t where : {kRows * kCols - 1, kRows * kCols / 2 + 3}) {
          const std::string what = "dim " + std::to_string(dim) + " index " + std::to_string(bad) + " at element " +
                                   std::to_string(where) + ", " + std::to_string(threads) + " threads";
          core::Generator g(uint64_t(11 + dim));
          const Tensor self = randn({kRows, kCols}, DType::Float32, &g),
                       src = randn({kRows, kCols}, DType::Float32, &g);
          Tensor idx = randint(0, size, {kRows, kCols}, DType::Int64, &g);
          idx.data_ptr<int64_t>()[where] = bad;
          expect_error_naming([&] { ops::gather(self, dim, idx); }, bad, "gather " + what);
          expect_error_naming([&] { ops::scatter(self, dim, idx, src); }, bad, "scatter " + what);
          expect_error_naming([&] { ops::scatter(self, dim, idx, 2.0); }, bad, "scatter of a value " + what);
          expect_error_naming([&] { ops::scatter_add(self, dim, idx, src); }, bad, "scatter_add " + what);
          const Tensor bf = self.to(DType::BFloat16);
          expect_error_naming([&] { ops::scatter(bf, dim, idx, src.to(DType::BFloat16), "add"); }, bad,
                              "bfloat16 scatter with add " + what);

          Tensor a = self.clone(), b = self.clone(), c = bf.clone();
          expect_error_naming([&] { ops::scatter_(a, dim, idx, src); }, bad, "scatter_ " + what);
          expect_error_naming([&] { ops::scatter_add_(b, dim, idx, src); }, bad, "scatter_add_ " + what);
          expect_error_naming([&] { ops::scatter_(c, dim, idx, src.to(DType::BFloat16), "add"); }, bad,
                              "bfloat16 scatter_ with add " + what);
          EXPECT_EQ(std::memcmp(a.data(), self.data(), size_t(self.numel()) * 4), 0) << "scatter_ wrote " << what;
          EXPECT_EQ(std::memcmp(b.data(), self.data(), size_t(self.numel()) * 4), 0) << "scatter_add_ wrote " << what;
          EXPECT_EQ(std::memcmp(c.data(), bf.data(), size_t(bf.numel()) * 2), 0) << "bf16 scatter_ wrote " << what;
        }
      }
    }
  }
  set_num_threads(before);
}

// A float32 gather whose result is too big to stay in cache (at least 8 MiB a thread) is written
// with non-temporal stores (gather_slice in index_gather.cpp): the same values, and a bad index in
// it still raises.
TEST(IndexGather, AStreamedGatherMatchesALoopAndStillRaises) {
  constexpr int64_t R = 2048, C = 3072;  // 24 MiB of float32 result: streamed at 1-3 threads
  const int before = num_threads();
  core::Generator g(23);
  const Tensor self = randn({R, C}, DType::Float32, &g);
  Tensor idx = randint(0, C, {R, C}, DType::Int64, &g);
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    const Tensor out = ops::gather(self, 1, idx);
    const float* o = out.data_ptr<float>();
    const float* s = self.data_ptr<float>();
    const int64_t* ip = idx.data_ptr<int64_t>();
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j)
        ASSERT_EQ(o[i * C + j], s[i * C + ip[i * C + j]]) << "at " << i << "," << j << ", " << threads << " threads";
  }
  idx.data_ptr<int64_t>()[R * C / 2 + 5] = -3;
  expect_error_naming([&] { ops::gather(self, 1, idx); }, -3, "streamed gather");
  set_num_threads(before);
}

// index_add, out of place (one pass over counting-sorted positions, Note [Out-of-place index_add in
// one pass]; along dim 2, rows of one float, a copy and index_add_) and in place (column blocks
// per thread), along each dim of a (3, 97, 211) float32 tensor with repeated indices and alpha
// 0.75, against a loop adding in position order (each addition rounded to float, as both kernels
// do), bit for bit at 1-3 threads; int64 and bool too; and a bad index raises naming it, leaving
// self as it was.
TEST(IndexGather, IndexAddAlongEveryDimMatchesALoop) {
  const int before = num_threads();
  const std::vector<int64_t> shape = {3, 97, 211};  // 61K elements: past the grain
  for (int threads : kThreadCounts) {
    set_num_threads(threads);
    for (int64_t dim : {0, 1, 2}) {
      const std::string what = "dim " + std::to_string(dim) + " at " + std::to_string(threads) + " threads";
      core::Generator g(uint64_t(31 + dim));
      const int64_t size = shape[size_t(dim)], n = size + 5;  // more positions than rows: repeats
      std::vector<int64_t> src_shape = shape;
      src_shape[size_t(dim)] = n;
      const Tensor self = randn(shape, DType::Float32, &g), src = randn(src_shape, DType::Float32, &g);
      const Tensor idx = randint(0, size, {n}, DType::Int64, &g);
      const Tensor out = ops::index_add(self, dim, idx, src, 0.75);
      Tensor in_place = self.clone();
      ops::index_add_(in_place, dim, idx, src, 0.75);
      std::vector<float> want(self.data_ptr<float>(), self.data_ptr<float>() + self.numel());
      const int64_t O = dim == 0 ? 1 : (dim == 1 ? shape[0] : shape[0] * shape[1]);
      const int64_t I = dim == 2 ? 1 : (dim == 1 ? shape[2] : shape[1] * shape[2]);
      for (int64_t o = 0; o < O; ++o)
        for (int64_t k = 0; k < n; ++k)
          for (int64_t i = 0; i < I; ++i) {
            float& w = want[size_t((o * size + idx.data_ptr<int64_t>()[k]) * I + i)];
            w = w + 0.75f * src.data_ptr<float>()[(o * n + k) * I + i];
          }
      for (int64_t e = 0; e < self.numel(); ++e) {
        ASSERT_EQ(out.data_ptr<float>()[e], want[size_t(e)]) << "index_add " << what << " at " << e;
        ASSERT_EQ(in_place.data_ptr<float>()[e], want[size_t(e)]) << "index_add_ " << what << " at " << e;
      }
    }
  }
  set_num_threads(before);
  core::Generator g(5);
  const Tensor idx = randint(0, 50, {70}, DType::Int64, &g);
  for (DType dt : {DType::Int64, DType::Bool}) {
    const Tensor self = randint(0, 2, {50, 800}, dt, &g), src = randint(0, 2, {70, 800}, dt, &g);
    Tensor in_place = self.clone();
    ops::index_add_(in_place, 0, idx, src, 3.0);
    const Tensor out = ops::index_add(self, 0, idx, src, 3.0);
    ASSERT_EQ(std::memcmp(out.data(), in_place.data(), size_t(out.numel()) * out.itemsize()), 0) << core::name(dt);
    if (dt == DType::Int64) {
      std::vector<int64_t> want(self.data_ptr<int64_t>(), self.data_ptr<int64_t>() + self.numel());
      for (int64_t k = 0; k < 70; ++k)
        for (int64_t j = 0; j < 800; ++j)
          want[size_t(idx.data_ptr<int64_t>()[k] * 800 + j)] += 3 * src.data_ptr<int64_t>()[k * 800 + j];
      for (int64_t e = 0; e < out.numel(); ++e) ASSERT_EQ(out.data_ptr<int64_t>()[e], want[size_t(e)]) << e;
    }
  }
  Tensor bad = idx.clone();
  bad.data_ptr<int64_t>()[40] = 50;
  const Tensor self = randn({50, 800}, DType::Float32, &g), src = randn({70, 800}, DType::Float32, &g);
  expect_error_naming([&] { ops::index_add(self, 0, bad, src); }, 50, "index_add");
  Tensor kept = self.clone();
  expect_error_naming([&] { ops::index_add_(kept, 0, bad, src); }, 50, "index_add_");
  ASSERT_EQ(std::memcmp(kept.data(), self.data(), size_t(self.numel()) * sizeof(float)), 0);
}

}  // namespace
}  // namespace tb
