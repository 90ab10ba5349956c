// dist/placement: the cores each rank of a world on one machine gets (Note [A core of its own]),
// TRAINBENCH_RANK_CPUS's form and errors, and a rank pinning every thread of its process.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tests/error_of.h"
#include "engine/dist/placement.h"

namespace {

using tb::dist::format_rank_cpus;
using tb::dist::parse_rank_cpus;
using tb::dist::plan_rank_cpus;
using Lists = std::vector<std::vector<int>>;
using tb::testing::error_of;

std::vector<int> affinity_of(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(tid, sizeof set, &set), 0);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

TEST(Placement, WholeCoresPerRankWhenTheWorldFits) {
  const Lists two{{0}, {1}};
  EXPECT_EQ(plan_rank_cpus(2, 1, two), (Lists{{0}, {1}}));
  EXPECT_EQ(plan_rank_cpus(1, 1, two), (Lists{{0, 1}}));  // one rank: every core
  EXPECT_EQ(plan_rank_cpus(1, 2, two), (Lists{{0, 1}}));
  EXPECT_EQ(plan_rank_cpus(4, 1, two), Lists{});  // oversubscribed: left to the scheduler
  EXPECT_EQ(plan_rank_cpus(2, 2, two), Lists{});
  // Hardware threads stay with their core: 4 cores of 2 threads (siblings c and c + 4).
  const Lists smt{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  EXPECT_EQ(plan_rank_cpus(2, 1, smt), (Lists{{0, 4, 1, 5}, {2, 6, 3, 7}}));
  EXPECT_EQ(plan_rank_cpus(4, 1, smt), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(plan_rank_cpus(3, 1, smt), (Lists{{0, 4}, {1, 5}, {2, 6}}));  // a core left over
  // Threads count cores, not hardware threads.
  EXPECT_EQ(plan_rank_cpus(4, 2, smt), Lists{});
  EXPECT_EQ(plan_rank_cpus(0, 1, two), Lists{});
  EXPECT_EQ(plan_rank_cpus(2, 0, two), Lists{});
}

TEST(Placement, ThisProcessesCoresCoverItsMask) {
  const Lists cores = tb::dist::cores_of_this_process();
  std::vector<int> all;
  for (const auto& c : cores) {
    EXPECT_FALSE(c.empty());
    all.insert(all.end(), c.begin(), c.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, affinity_of(0));
}

TEST(Placement, RankCpusFormAndErrors) {
  EXPECT_EQ(format_rank_cpus({{0}, {1}}), "0;1");
  EXPECT_EQ(format_rank_cpus({{0, 4, 1, 5}, {2, 6}}), "0,4,1,5;2,6");
  EXPECT_EQ(parse_rank_cpus("V", "0,4,1,5;2,6", 2), (Lists{{0, 4, 1, 5}, {2, 6}}));
  EXPECT_EQ(parse_rank_cpus("V", "0-3", 1), (Lists{{0, 1, 2, 3}}));
  for (auto [v, world] : std::vector<std::pair<const char*, int>>{
           {"0;1", 3}, {"0;1;2", 2}, {"", 1}, {"0;", 2}, {";0", 2}, {"0;0", 2}, {"0-2;2", 2}, {"x", 1}, {"0 ;1", 2}})
    EXPECT_NE(error_of([&] { parse_rank_cpus("TRAINBENCH_RANK_CPUS", v, world); }).find("TRAINBENCH_RANK_CPUS"),
              std::string::npos)
        << "'" << v << "' for a world of " << world << " was accepted";
  EXPECT_NE(error_of([] { parse_rank_cpus("V", "0;1;2", 2); }).find("for a world of 2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_rank_cpus("V", "0-1;1", 2); }).find("CPU 1 to two ranks"), std::string::npos);
}

TEST(Placement, ARankPinsEveryThreadOfItsProcess) {
  const std::vector<int> before = affinity_of(0);
  if (before.size() < 2) GTEST_SKIP() << "one CPU: nothing to pin apart";
  ::unsetenv("TRAINBENCH_RANK_CPUS");
  EXPECT_EQ(tb::dist::pin_rank_from_env(0, 2), 0);  // unset: nothing pinned
  EXPECT_EQ(tb::dist::pinned_cpus(), 0);

  // A thread started before the pin (as a thread pool's are) must move too.
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  pid_t tid = 0;
  std::thread t([&] {
    std::unique_lock<std::mutex> lock(m);
    tid = gettid();
    cv.notify_all();
    cv.wait(lock, [&] { return go; });
  });
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return tid != 0; });
  }
  const std::string lists = std::to_string(before[0]) + ";" + std::to_string(before[1]);
  ::setenv("TRAINBENCH_RANK_CPUS", lists.c_str(), 1);
  EXPECT_EQ(tb::dist::pin_rank_from_env(1, 2), 1);
  EXPECT_EQ(tb::dist::pinned_cpus(), 1);
  EXPECT_EQ(affinity_of(0), std::vector<int>{before[1]});
  EXPECT_EQ(affinity_of(tid), std::vector<int>{before[1]});
  std::vector<int> seen_by_new;
  std::thread([&] { seen_by_new = affinity_of(0); }).join();  // inherits the mask
  EXPECT_EQ(seen_by_new, std::vector<int>{before[1]});

  ::setenv("TRAINBENCH_RANK_CPUS", "0;1;2", 1);
  EXPECT_NE(error_of([] { tb::dist::pin_rank_from_env(0, 2); }).find("for a world of 2"), std::string::npos);
  ::setenv("TRAINBENCH_RANK_CPUS", "0;1023", 1);  // a CPU this machine lacks: the kernel refuses
  if (std::find(before.begin(), before.end(), 1023) == before.end())
    EXPECT_NE(error_of([] { tb::dist::pin_rank_from_env(1, 2); }).find("refused"), std::string::npos);
  ::unsetenv("TRAINBENCH_RANK_CPUS");

  // Restore the mask for the tests after this one.
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : before) CPU_SET(c, &set);
  for (pid_t x : {pid_t(0), tid}) ASSERT_EQ(sched_setaffinity(x, sizeof set, &set), 0);
  {
    std::lock_guard<std::mutex> lock(m);
    go = true;
  }
  cv.notify_all();
  t.join();
}

}  // namespace
