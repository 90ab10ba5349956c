// Sizes and strides that overflow int64 are errors, never undefined behaviour, in every place
// shapes are multiplied: numel, contiguous strides (also when numel is 0), storage bytes, and
// the storage reach of as_strided / from_blob. Expected outcomes are PyTorch's (torch 2.x):
//   torch.empty(0, 2**62, 2**62)  -> "Stride calculation overflowed"
//   torch.empty(0, 2**61, 3)      -> numel 0, strides (3 * 2**61, 3, 1)
//   torch.empty(2**62, 2**62, 0)  -> "Storage size calculation overflowed"
//   torch.empty(2**60, 4)         -> "Storage size calculation overflowed" (bytes > 2^63)
//   empty(0).as_strided((0, 5), (2**62, 2**62)) is valid; empty(10).as_strided((2, 5), (2**62, 2**62)) overflows.
// suites/core/factories_test.cpp checks random shapes against LibTorch itself.
#include <gtest/gtest.h>

#include <random>

#include "engine/core/error.h"
#include "engine/core/shape.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

constexpr int64_t P61 = int64_t(1) << 61, P62 = int64_t(1) << 62;

TEST(Shape, StridesMustBeRepresentableEvenWhenEmpty) {
  EXPECT_THROW(empty({0, P62, P62}), core::Error);
  EXPECT_THROW(empty({0, P62, P62, 4}), core::Error);
  EXPECT_THROW(empty({0, INT64_MAX, 2}), core::Error);
  EXPECT_THROW(empty({0, P62, 3}), core::Error);
  Tensor ok = empty({0, P61, 3});
  EXPECT_EQ(ok.numel(), 0);
  EXPECT_EQ(ok.strides(), Shape({3 * P61, 3, 1}));
}

TEST(Shape, NumelAndBytesOverflowAreErrors) {
  EXPECT_THROW(empty({P62, P62, 0}), core::Error);
  EXPECT_THROW(empty({P62, 4}), core::Error);
  EXPECT_THROW(empty({P61, 4}), core::Error);
  EXPECT_THROW(empty({int64_t(1) << 60, 4}), core::Error);  // 2^62 elements, 2^64 bytes
  EXPECT_THROW(empty({int64_t(1) << 31, int64_t(1) << 31, 2}), core::Error);
  EXPECT_THROW(empty({INT64_MAX}, DType::Float64), core::Error);
  const std::string msg = [] {
    try {
      empty({0, P62, P62});
    } catch (const core::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 4611686018427387904, 4611686018427387904]"), std::string::npos) << msg;
}

TEST(Shape, StorageReachOverflowIsAnError) {
  Tensor none = empty({0});
  Tensor v = none.as_strided({0, 5}, {P62, P62});  // nothing is reached
  EXPECT_EQ(v.numel(), 0);
  Tensor ten = empty({10});
  EXPECT_THROW(ten.as_strided({2, 5}, {P62, P62}), core::Error);
  EXPECT_THROW(ten.as_strided({2, 5}, {P61, 1}), core::Error);
  EXPECT_THROW(ten.as_strided({2}, {1}, INT64_MAX), core::Error);
  EXPECT_THROW(ten.as_strided({INT64_MAX, 2}, {1, 1}), core::Error);
  EXPECT_THROW(ten.as_strided({3, 4}, {4, 1}), core::Error);  // 12 elements past a storage of 10
  float buf[4] = {};
  EXPECT_THROW(from_blob(buf, {3, 3}, {P62, P62}, DType::Float32), core::Error);
  EXPECT_THROW(from_blob(buf, {2}, {P62}, DType::Float64), core::Error);
}

// Found by fuzz_env under UBSan: numel, flatten, view and the strided loop multiplied sizes in
// int64 and overflowed on [2^63 - 1, 2, 0], whose numel is 0. (Release builds computed 0 anyway;
// this test catches the class under the sanitizer preset.)
TEST(Shape, HugeSizesBesideAZeroAreSafe) {
  Tensor t = empty({0}).as_strided({INT64_MAX, 2, 0}, {1, 1, 1});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.flatten(0, -1).sizes(), Shape({0}));
  EXPECT_EQ(t.contiguous().numel(), 0);
  EXPECT_EQ(t.clone().strides(), Shape({2, 1, 1}));
  EXPECT_EQ(t.view({0}).sizes(), Shape({0}));
  EXPECT_EQ(t.reshape({0, 5}).sizes(), Shape({0, 5}));
  Tensor z = zeros({INT64_MAX, 0});
  EXPECT_EQ(z.numel(), 0);
}

// Random dims from hostile ranges: every outcome is a tensor whose metadata is consistent, or a
// core::Error; never a crash, and never an allocation past a small cap.
TEST(Shape, RandomHugeDimsNeverMisbehave) {
  auto& a = memory::cpu_allocator();
  const int64_t old = a.limit();
  a.set_limit(a.stats().reserved_bytes + (64 << 20));
  std::mt19937_64 rng(1234);
  const int64_t picks[] = {0, 1, 2, 3, 7, P61, P62, INT64_MAX, INT64_MAX - 1, -1, INT64_MIN, int64_t(1) << 32, 1 << 20};
  int made = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    Shape s(rng() % 5);
    for (int64_t& d : s) d = picks[rng() % std::size(picks)];
    try {
      Tensor t = empty(s, DType(rng() % 2 ? DType::Float32 : DType::Float64));
      ++made;
      EXPECT_EQ(t.numel(), core::checked_numel(s, "test"));
      EXPECT_LE(t.numel() * int64_t(t.itemsize()), int64_t(64) << 20);
    } catch (const core::Error&) {
    }
  }
  a.set_limit(old);
  EXPECT_GT(made, 0);
}

}  // namespace
}  // namespace tb
