// Tensors through the process-wide CPU allocator: a repeated shape is served from the cache,
// bytes are counted under the current tag, and the cap turns an over-budget tensor into an
// OutOfMemoryError naming the request and the tags that hold memory (moved from
// suites/core/allocator_test.cpp; the allocator alone: engine/memory/tests/allocator_test.cpp).
#include <gtest/gtest.h>

#include <functional>

#include "engine/core/env.h"
#include "engine/memory/allocator.h"
#include "engine/memory/oom.h"
#include "engine/memory/site.h"
#include "engine/tensor/factories.h"

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
  EXPECT_EQ(during.allocated_by_tag[int(memory::Tag::Parameter)] - before.allocated_by_tag[int(memory::Tag::Parameter)],
            4096);
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

// The copies Tensor's methods make name themselves in an OOM report (and in snapshots), unless an
// enclosing op already named the allocation: a reshape that must copy, outside any op, is
// "reshape", not nameless.
TEST(Allocator, TensorMethodCopiesNameTheirOp) {
  auto& a = memory::cpu_allocator();
  const Tensor x = empty({64, 32});
  const Tensor xt = x.transpose(0, 1);  // not contiguous: each method below must copy
  const auto op_of_failed_copy = [&](const std::function<void()>& copy) -> std::string {
    memory::set_fail_at(a, 1);
    try {
      copy();
    } catch (const memory::OutOfMemoryError& e) {
      const memory::OomReport* r = memory::oom_report(e);
      return r && r->site.op ? r->site.op : "(none)";
    }
    memory::set_fail_at(a, 0);
    return "(no allocation)";
  };
  EXPECT_EQ(op_of_failed_copy([&] { (void)xt.reshape({-1}); }), "reshape");
  EXPECT_EQ(op_of_failed_copy([&] { (void)xt.contiguous(); }), "contiguous");
  EXPECT_EQ(op_of_failed_copy([&] { (void)xt.clone(); }), "clone");
  EXPECT_EQ(op_of_failed_copy([&] { (void)xt.to(DType::Float64); }), "to");
  EXPECT_EQ(op_of_failed_copy([&] {
              memory::OpScope outer("attention");
              (void)xt.reshape({-1});
            }),
            "attention");
  EXPECT_EQ(op_of_failed_copy([&] { (void)x.reshape({-1}); }), "(no allocation)") << "a view allocates nothing";
}

TEST(Allocator, ParsesByteCounts) {  // the parser itself: engine/core/tests/env_test.cpp
  EXPECT_EQ(core::parse_bytes("V", "512"), 512);
  EXPECT_EQ(core::parse_bytes("V", "64M"), int64_t(64) << 20);
  EXPECT_EQ(core::parse_bytes("V", "2G"), int64_t(2) << 30);
  EXPECT_THROW(core::parse_bytes("V", "lots"), core::Error);
  EXPECT_THROW(core::parse_bytes("V", "5X"), core::Error);
}

}  // namespace
}  // namespace tb
