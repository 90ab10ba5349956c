// The caching allocator: reuse in steady state, statistics by tag, the memory cap and its OOM
// message; and the bf16/f16 conversions checked exhaustively against LibTorch.
#include <gtest/gtest.h>

#include "engine/core/env.h"
#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"
#include "reference/tensor.h"
#include "reference/views.h"

namespace tb {
namespace {

TEST(Allocator, SteadyStateReusesBlocks) {
  auto& a = memory::cpu_allocator();
  { Tensor warm = empty({1 << 20}); }
  const auto before = a.stats();
  for (int i = 0; i < 10; ++i) Tensor t = empty({1 << 20});
  const auto after = a.stats();
  EXPECT_EQ(after.num_system_allocs, before.num_system_allocs) << "a repeated shape must come from the cache";
  EXPECT_EQ(after.num_cache_hits - before.num_cache_hits, 10);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
}

TEST(Allocator, CountsBytesByTag) {
  auto& a = memory::cpu_allocator();
  const auto before = a.stats();
  memory::TagGuard g(memory::Tag::Parameter);
  Tensor p = empty({1000});  // 4000 B -> a 4096 B block
  const auto during = a.stats();
  EXPECT_EQ(during.allocated_by_tag[int(memory::Tag::Parameter)] - before.allocated_by_tag[int(memory::Tag::Parameter)], 4096);
  EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
}

TEST(Allocator, CapThrowsOutOfMemoryWithDetails) {
  auto& a = memory::cpu_allocator();
  const int64_t old = a.limit();
  a.empty_cache();
  a.set_limit(a.stats().allocated_bytes + (8 << 20));
  Tensor held;
  {
    memory::TagGuard g(memory::Tag::Activation);
    held = empty({1 << 20});  // 4 MiB under the activation tag
  }
  try {
    Tensor big = empty({4 << 20});  // 16 MiB: over the cap
    FAIL() << "expected OutOfMemoryError";
  } catch (const memory::OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("16 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("activation=4 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("TRAINBENCH_MEMORY_LIMIT"), std::string::npos) << msg;
    EXPECT_EQ(e.requested(), uint64_t(16) << 20);
  }
  a.set_limit(old);
}

TEST(Allocator, ParsesByteCounts) {  // the parser itself: suites/core/env_test.cpp
  EXPECT_EQ(core::parse_bytes("V", "512"), 512);
  EXPECT_EQ(core::parse_bytes("V", "64M"), int64_t(64) << 20);
  EXPECT_EQ(core::parse_bytes("V", "2G"), int64_t(2) << 30);
  EXPECT_THROW(core::parse_bytes("V", "lots"), core::Error);
  EXPECT_THROW(core::parse_bytes("V", "5X"), core::Error);
}

// Every 16-bit pattern of bf16 and f16 widens to float exactly as in LibTorch, and the midpoints
// between neighbours (the rounding ties) narrow back the same way: round to nearest even.
TEST(Conversions, EveryHalfAndBFloat16MatchesLibTorch) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    // Build all 65536 bit patterns as a tensor of dt over the same bytes.
    auto buf = std::make_shared<std::vector<uint16_t>>(65536);
    for (int i = 0; i < 65536; ++i) (*buf)[i] = uint16_t(i);
    Tensor all = from_blob(buf->data(), {65536}, {1}, dt, buf);
    Tensor widened = all.to(DType::Float32);
    Tensor expected = ref::from_ref(ref::to(ref::to_ref(all), DType::Float32));
    const float* w = widened.data_ptr<float>();
    const float* e = expected.data_ptr<float>();
    for (int i = 0; i < 65536; ++i) {
      if (std::isnan(e[i])) { EXPECT_TRUE(std::isnan(w[i])) << i; continue; }
      ASSERT_EQ(w[i], e[i]) << core::name(dt) << " bits " << i;
    }
    // Midpoints between neighbours exercise round-to-nearest-even on the way back.
    Tensor mids = empty({65535}, DType::Float32);
    float* m = mids.data_ptr<float>();
    for (int i = 0; i < 65535; ++i) m[i] = 0.5f * (w[i] + w[i + 1]);
    Tensor narrowed = mids.to(dt).to(DType::Float32);
    Tensor ref_narrowed = ref::from_ref(ref::to(ref::to(ref::to_ref(mids), dt), DType::Float32));
    const float* n = narrowed.data_ptr<float>();
    const float* rn = ref_narrowed.data_ptr<float>();
    for (int i = 0; i < 65535; ++i) {
      if (std::isnan(rn[i])) { EXPECT_TRUE(std::isnan(n[i])) << i; continue; }
      ASSERT_EQ(n[i], rn[i]) << core::name(dt) << " midpoint " << i << " = " << m[i];
    }
  }
}

}  // namespace
}  // namespace tb
