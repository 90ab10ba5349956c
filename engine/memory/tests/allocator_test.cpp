// The CPU caching allocator on a fresh instance, so every statistic starts at zero and each
// expected number follows from the size classes: requests up to 64 B take 64 B, up to 4 KiB the
// next power of two, beyond that whole 4 KiB pages, from 2 MiB whole 2 MiB pages.
#include <gtest/gtest.h>

#include "engine/core/tests/error_of.h"
#include "engine/memory/allocator.h"
#include "engine/memory/tests/fresh.h"

namespace tb::memory {
namespace {

using testing::error_of;

TEST(Allocator, SizeClasses) {
  EXPECT_EQ(block_size(0), 0u);
  EXPECT_EQ(block_size(1), 64u);
  EXPECT_EQ(block_size(64), 64u);
  EXPECT_EQ(block_size(65), 128u);
  EXPECT_EQ(block_size(4096), 4096u);
  EXPECT_EQ(block_size(4097), 8192u);
  EXPECT_EQ(block_size(12289), 16384u);  // 3 pages + 1 byte -> 4 pages
  EXPECT_EQ(block_size((2 << 20) - 1), 2u << 20);
  EXPECT_EQ(block_size((2 << 20) + 1), 4u << 20);  // 2 MiB granules from 2 MiB on
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(16 << 20), "16 MiB");
  EXPECT_EQ(format_bytes(int64_t(3) << 29), "1.5 GiB");
}

TEST(Allocator, StatsCountBlocksNotRequests) {
  Fresh f;
  DataPtr p1 = f.a.allocate(100);   // 128 B
  DataPtr p2 = f.a.allocate(5000);  // 8192 B
  Stats s = f.a.stats();
  EXPECT_EQ(s.allocated_bytes, 128 + 8192);
  EXPECT_EQ(s.reserved_bytes, 128 + 8192);
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.num_system_allocs, 2);
  EXPECT_EQ(s.num_cache_hits, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p1.get()) % 64, 0u) << "64-byte aligned";
  p1.reset();  // back to the cache: still reserved, no longer allocated
  s = f.a.stats();
  EXPECT_EQ(s.allocated_bytes, 8192);
  EXPECT_EQ(s.reserved_bytes, 128 + 8192);
  EXPECT_EQ(s.peak_allocated_bytes, 128 + 8192);
  DataPtr p3 = f.a.allocate(120);  // same 128 B class: from the cache
  s = f.a.stats();
  EXPECT_EQ(s.num_cache_hits, 1);
  EXPECT_EQ(s.num_system_allocs, 2);
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.allocated_bytes, 128 + 8192);
  DataPtr none = f.a.allocate(0);  // no block at all
  EXPECT_EQ(none.get(), nullptr);
  EXPECT_EQ(f.a.stats().num_allocs, 3);
  p2.reset();
  p3.reset();
  f.a.reset_peak();
  s = f.a.stats();
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.peak_allocated_bytes, 0);
  EXPECT_EQ(s.peak_reserved_bytes, 128 + 8192);
  f.a.empty_cache();
  EXPECT_EQ(f.a.stats().reserved_bytes, 0);
}

TEST(Allocator, SteadyStateReusesOneBlock) {
  Fresh f;
  for (int i = 0; i < 10; ++i) DataPtr p = f.a.allocate(1 << 20);
  const Stats s = f.a.stats();
  EXPECT_EQ(s.num_system_allocs, 1);
  EXPECT_EQ(s.num_cache_hits, 9);
  EXPECT_EQ(s.reserved_bytes, 1 << 20);
  EXPECT_EQ(s.allocated_bytes, 0);
}

TEST(Allocator, TagsAndRetag) {
  Fresh f;
  EXPECT_EQ(TagGuard::current(), Tag::Other);
  DataPtr p;
  {
    TagGuard g(Tag::Parameter);
    p = f.a.allocate(1000);  // 1024 B
  }
  EXPECT_EQ(TagGuard::current(), Tag::Other) << "the guard restores the tag";
  DataPtr q = f.a.allocate(10);  // 64 B, other
  Stats s = f.a.stats();
  EXPECT_EQ(s.allocated_by_tag[int(Tag::Parameter)], 1024);
  EXPECT_EQ(s.allocated_by_tag[int(Tag::Other)], 64);
  f.a.retag(p.get(), Tag::Gradient);
  s = f.a.stats();
  EXPECT_EQ(s.allocated_by_tag[int(Tag::Parameter)], 0);
  EXPECT_EQ(s.allocated_by_tag[int(Tag::Gradient)], 1024);
  p.reset();
  EXPECT_EQ(f.a.stats().allocated_by_tag[int(Tag::Gradient)], 0);
  {
    TagGuard outer(Tag::OptimizerState);
    TagGuard kept(Tag::Activation, /*keep_outer=*/true);
    EXPECT_EQ(TagGuard::current(), Tag::OptimizerState);
    TagGuard replaced(Tag::Activation);
    EXPECT_EQ(TagGuard::current(), Tag::Activation);
  }
  EXPECT_STREQ(tag_name(Tag::OptimizerState), "optimizer_state");
  EXPECT_STREQ(tag_name(Tag::Communication), "communication");
}

TEST(Allocator, CapGivesAnOutOfMemoryErrorThatExplains) {
  Fresh f;
  f.a.set_limit(1 << 20);
  DataPtr held;
  {
    TagGuard g(Tag::Activation);
    held = f.a.allocate(512 << 10);
  }
  try {
    DataPtr big = f.a.allocate(768 << 10);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested(), 768u << 10);
    EXPECT_STREQ(e.what(),
                 "allocate: out of memory: tried to allocate 768 KiB (786432 bytes, tag other) under a limit of 1 MiB "
                 "(TRAINBENCH_MEMORY_LIMIT). Held: 512 KiB by live tensors, 0 B cached but free (largest free block "
                 "0 B), 512 KiB reserved. Held by tag: activation=512 KiB. Largest live blocks: 512 KiB (activation). "
                 "Reduce the batch size or raise the limit.");
  }
  EXPECT_EQ(f.a.stats().allocated_bytes, 512 << 10) << "a refused request changes nothing";
  // Cached free blocks are returned to the system before the cap refuses a request.
  held.reset();
  DataPtr other_size = f.a.allocate(600 << 10);  // 600 KiB: 512 KiB cached + 600 KiB > 1 MiB
  EXPECT_EQ(f.a.stats().reserved_bytes, 600 << 10);
  EXPECT_EQ(error_of([&] { f.a.set_limit(-1); }),
            "set_limit: the memory limit must be >= 0 bytes (0 = no cap), got -1");
}

TEST(Allocator, ImpossibleSizesAreRefusedBeforeAnyArithmetic) {
  Fresh f;
  try {
    f.a.allocate(kMaxAllocation + 1);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("more than any allocation can hold"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.a.stats().num_allocs, 0);
  EXPECT_NE(error_of([] { block_size(kMaxAllocation + 1); }).find("larger than any block"), std::string::npos);
}

}  // namespace
}  // namespace tb::memory
