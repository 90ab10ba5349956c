// Out-of-memory on a fresh allocator: what the error reports (text and OomReport), that the
// process goes on after a caught OOM (a retry after freeing succeeds), that the statistics stay
// consistent with the live blocks (by tag too, the refused request counted nowhere but num_ooms),
// the injected k-th failure, and the cache that cannot be released (fragmentation).
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "engine/core/tests/error_of.h"
#include "engine/memory/oom.h"
#include "engine/memory/site.h"
#include "engine/memory/snapshot.h"
#include "engine/memory/tests/fresh.h"

namespace tb::memory {
namespace {

using testing::expect_contains;

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

// The statistics agree with the live blocks: allocated is their sum, by tag too, and reserved
// is allocated plus the cached blocks.
void expect_consistent(const CpuCachingAllocator& a) {
  const Snapshot s = snapshot(a);
  int64_t live = 0, cached = 0;
  std::array<int64_t, kNumTags> by_tag{};
  for (const auto& b : s.live) {
    live += b.size;
    by_tag[size_t(b.tag)] += b.size;
  }
  for (const auto& c : s.cached) cached += c.size;
  EXPECT_EQ(s.stats.allocated_bytes, live);
  EXPECT_EQ(s.stats.allocated_by_tag, by_tag);
  EXPECT_EQ(s.stats.reserved_bytes, live + cached);
  EXPECT_GE(s.stats.reserved_bytes, s.stats.allocated_bytes);
  EXPECT_GE(s.stats.peak_allocated_bytes, s.stats.allocated_bytes);
}

// The OutOfMemoryError that f throws, which must carry a report (fails the test otherwise).
template <typename F>
OomError oom_of(F&& f) {
  try {
    f();
  } catch (const OutOfMemoryError& e) {
    if (const auto* o = dynamic_cast<const OomError*>(&e)) return *o;
    ADD_FAILURE() << "an OutOfMemoryError without a report: " << e.what();
  }
  ADD_FAILURE() << "expected an OutOfMemoryError";
  return OomError(std::make_shared<OomReport>());
}

TEST(OutOfMemory, ReportNamesRequestCapHeldCachedTagsSiteAndLargestBlocks) {
  Fresh f;
  f.a.set_limit(4 * MiB);
  DataPtr weight, act, small;
  {
    TagGuard g(Tag::Parameter);
    ModuleScope m("blocks.0.fc1");
    OpScope op("randn");
    weight = f.a.allocate(size_t(2 * MiB));
  }
  {
    TagGuard g(Tag::Activation);
    ModuleScope m("blocks.0.fc1");
    OpScope op("matmul");
    act = f.a.allocate(size_t(1 * MiB));
  }
  small = f.a.allocate(3000);  // 4 KiB, then freed: 4 KiB cached
  small.reset();
  LabelScope label("step 7");
  ModuleScope m("blocks.1.fc2");
  OpScope op("linear");
  TagGuard g(Tag::Activation);
  const OomError e = oom_of([&] { f.a.allocate(size_t(1536 * KiB)); });
  ASSERT_NE(oom_report(e), nullptr);
  const OomReport& r = *oom_report(e);
  EXPECT_EQ(r.reason, "limit");
  EXPECT_EQ(r.requested, uint64_t(1536 * KiB));
  EXPECT_EQ(e.requested(), uint64_t(1536 * KiB));
  EXPECT_EQ(r.block, 1536 * KiB);
  EXPECT_EQ(r.limit, 4 * MiB);
  EXPECT_EQ(r.allocated, 3 * MiB);
  EXPECT_EQ(r.reserved, 3 * MiB) << "the 4 KiB cached block was released before refusing";
  EXPECT_EQ(r.cached_free, 0);
  EXPECT_EQ(r.largest_free_block, 0);
  EXPECT_EQ(r.allocated_by_tag[size_t(Tag::Parameter)], 2 * MiB);
  EXPECT_EQ(r.allocated_by_tag[size_t(Tag::Activation)], 1 * MiB);
  EXPECT_EQ(r.tag, Tag::Activation);
  EXPECT_STREQ(r.site.op, "linear");
  EXPECT_STREQ(r.site.module, "blocks.1.fc2");
  EXPECT_STREQ(r.site.label, "step 7");
  ASSERT_EQ(r.largest_live.size(), 2u);
  EXPECT_EQ(r.largest_live[0].size, 2 * MiB);
  EXPECT_STREQ(r.largest_live[0].site.op, "randn");
  EXPECT_STREQ(r.largest_live[1].site.op, "matmul");
  EXPECT_STREQ(r.largest_live[1].site.module, "blocks.0.fc1");
  EXPECT_STREQ(e.what(),
               "allocate: out of memory: tried to allocate 1.5 MiB (1572864 bytes, tag activation) for linear in "
               "blocks.1.fc2 (label step 7) under a limit of 4 MiB (TRAINBENCH_MEMORY_LIMIT). Held: 3 MiB by live "
               "tensors, 0 B cached but free (largest free block 0 B), 3 MiB reserved. Held by tag: parameter=2 MiB "
               "activation=1 MiB. Largest live blocks: 2 MiB (parameter) made by randn in blocks.0.fc1; 1 MiB "
               "(activation) made by matmul in blocks.0.fc1. Reduce the batch size or raise the limit.");
}

TEST(OutOfMemory, TheProcessGoesOnAndARetryAfterFreeingSucceeds) {
  Fresh f;
  f.a.set_limit(8 * MiB);
  std::vector<DataPtr> held;
  for (int i = 0; i < 3; ++i) {
    TagGuard g(i == 0 ? Tag::Parameter : Tag::Activation);
    held.push_back(f.a.allocate(size_t(2 * MiB)));
  }
  const Stats before = f.a.stats();
  const int64_t ooms_before = num_ooms(f.a);
  EXPECT_THROW(f.a.allocate(size_t(4 * MiB)), OutOfMemoryError);
  const Stats after = f.a.stats();
  // The refused request is counted nowhere but num_ooms.
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.num_allocs, before.num_allocs);
  EXPECT_EQ(after.num_system_allocs, before.num_system_allocs);
  EXPECT_EQ(after.peak_allocated_bytes, before.peak_allocated_bytes);
  EXPECT_EQ(after.allocated_by_tag, before.allocated_by_tag);
  EXPECT_EQ(num_ooms(f.a), ooms_before + 1);
  expect_consistent(f.a);
  // Free two activations and retry: it fits now (the 4 MiB cached is released to make room).
  held.pop_back();
  held.pop_back();
  expect_consistent(f.a);
  DataPtr retry = f.a.allocate(size_t(4 * MiB));
  ASSERT_NE(retry.get(), nullptr);
  static_cast<char*>(retry.get())[4 * MiB - 1] = 1;  // the block is really there
  const Stats s = f.a.stats();
  EXPECT_EQ(s.allocated_bytes, 6 * MiB);
  EXPECT_EQ(s.allocated_by_tag[size_t(Tag::Parameter)], 2 * MiB);
  EXPECT_EQ(s.allocated_by_tag[size_t(Tag::Other)], 4 * MiB);
  EXPECT_EQ(s.allocated_by_tag[size_t(Tag::Activation)], 0);
  EXPECT_LE(s.reserved_bytes, 8 * MiB);
  expect_consistent(f.a);
  // Many OOMs in a row leave no trace either.
  for (int i = 0; i < 20; ++i) EXPECT_THROW(f.a.allocate(size_t(3 * MiB)), OutOfMemoryError);
  EXPECT_EQ(num_ooms(f.a), ooms_before + 21);
  EXPECT_EQ(f.a.stats().allocated_bytes, 6 * MiB);
  expect_consistent(f.a);
  held.clear();
  retry.reset();
  EXPECT_EQ(f.a.stats().allocated_bytes, 0);
  expect_consistent(f.a);
}

TEST(OutOfMemory, FailAtKRefusesExactlyTheKthRequestOnce) {
  Fresh f;
  set_fail_at(f.a, 3);
  EXPECT_EQ(fail_at(f.a), 3);
  DataPtr a = f.a.allocate(100);
  DataPtr zero = f.a.allocate(0);  // no request: does not count
  DataPtr b = f.a.allocate(100);
  EXPECT_EQ(fail_at(f.a), 1);
  OpScope op("adamw.step");
  const OomError e = oom_of([&] { f.a.allocate(5000); });
  ASSERT_NE(oom_report(e), nullptr);
  EXPECT_EQ(oom_report(e)->reason, "fail_at");
  EXPECT_EQ(oom_report(e)->requested, 5000u);
  EXPECT_STREQ(oom_report(e)->site.op, "adamw.step");
  expect_contains(e.what(), {"4.88 KiB (5000 bytes", "for adamw.step", "fault injection", "TRAINBENCH_MEMORY_FAIL_AT",
                             "Held: 256 B by live tensors"});
  EXPECT_EQ(fail_at(f.a), 0) << "fires once";
  DataPtr c = f.a.allocate(5000);  // the retry succeeds
  const Stats s = f.a.stats();
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(num_ooms(f.a), 1);
  EXPECT_EQ(s.allocated_bytes, 128 + 128 + 8192);
  expect_consistent(f.a);
  // k = 1 is the very next request, from the cache as well.
  c.reset();
  set_fail_at(f.a, 1);
  EXPECT_THROW(f.a.allocate(5000), OutOfMemoryError);
  EXPECT_NE(f.a.allocate(5000).get(), nullptr);
  EXPECT_EQ(testing::error_of([&] { set_fail_at(f.a, -1); }),
            "set_fail_at: k counts allocation requests from now (1 = the next one, 0 = off), got -1");
}

TEST(OutOfMemory, CacheThatCannotBeReleasedShowsAsCachedButFree) {
  Fresh f;
  f.a.set_limit(8 * MiB);
  set_release_cache(f.a, false);
  std::vector<DataPtr> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(f.a.allocate(size_t(1 * MiB)));
  for (int i = 0; i < 6; i += 2) blocks[size_t(i)].reset();  // 3 MiB cached in 1 MiB blocks
  const OomError e = oom_of([&] { f.a.allocate(size_t(4 * MiB)); });
  ASSERT_NE(oom_report(e), nullptr);
  EXPECT_EQ(oom_report(e)->allocated, 3 * MiB);
  EXPECT_EQ(oom_report(e)->cached_free, 3 * MiB);
  EXPECT_EQ(oom_report(e)->largest_free_block, 1 * MiB);
  expect_contains(e.what(), {"3 MiB cached but free (largest free block 1 MiB)", "6 MiB reserved"});
  DataPtr fits = f.a.allocate(size_t(1 * MiB));  // a cached block of the right size still serves
  EXPECT_EQ(f.a.stats().num_cache_hits, 1);
  expect_consistent(f.a);
  set_release_cache(f.a, true);  // now the cache goes back to the system before refusing
  EXPECT_NE(f.a.allocate(size_t(2 * MiB)).get(), nullptr);
  expect_consistent(f.a);
}

TEST(OutOfMemory, ImpossibleSizeReportNamesTheSite) {
  Fresh f;
  OpScope op("empty");
  const OomError e = oom_of([&] { f.a.allocate(kMaxAllocation + 1); });
  ASSERT_NE(oom_report(e), nullptr);
  EXPECT_EQ(oom_report(e)->reason, "too_large");
  EXPECT_EQ(oom_report(e)->block, 0);
  expect_contains(e.what(), {std::to_string(kMaxAllocation + 1) + " bytes for empty", "more than any allocation"});
  EXPECT_EQ(num_ooms(f.a), 1);
  EXPECT_EQ(f.a.stats().num_allocs, 0);
}

// Threads allocating, freeing and hitting the cap at once: the statistics stay consistent
// (ThreadSanitizer checks the locking in ci/tsan).
TEST(OutOfMemory, ConcurrentOomsKeepTheStatisticsConsistent) {
  Fresh f;
  f.a.set_limit(16 * MiB);
  record_history(f.a, 1000);
  std::atomic<int> ooms{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      OpScope op(t % 2 ? "odd" : "even");
      std::vector<DataPtr> mine;
      for (int i = 0; i < 200; ++i) {
        try {
          mine.push_back(f.a.allocate(size_t((i % 7 + 1) * 256 * KiB)));
        } catch (const OutOfMemoryError&) {
          ++ooms;
          mine.clear();
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_GT(ooms.load(), 0) << "4 threads x up to 200 blocks must hit a 16 MiB cap";
  EXPECT_EQ(num_ooms(f.a), ooms.load());
  EXPECT_EQ(f.a.stats().allocated_bytes, 0);
  expect_consistent(f.a);
}

}  // namespace
}  // namespace tb::memory
