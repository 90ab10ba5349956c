// The profiler's recording core: off costs nothing and records nothing; nesting, self vs total
// time, threads and their lanes, one profile at a time, key_averages and the table's sums.
// The trace JSON is parsed in engine/train/tests/profiler_hooks_test.cpp (core has no JSON reader).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/profiler.h"

namespace tb::profiler {
namespace {

void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

const Event& find(const Trace& t, std::string_view name) {
  for (const Event& e : t.events)
    if (e.name == name) return e;
  throw std::runtime_error("no event " + std::string(name));
}

TEST(Profiler, OffRecordsNothing) {
  EXPECT_FALSE(enabled());
  Scope s("idle", Category::Op);
  EXPECT_FALSE(s.active());
  {
    Profile p;
    EXPECT_TRUE(enabled());
    Trace t = p.stop();
    EXPECT_TRUE(t.events.empty());  // the scope above was opened before the profile
  }
  EXPECT_FALSE(enabled());
}

TEST(Profiler, NestingSelfAndTotal) {
  Profile p;
  {
    RecordFunction outer("outer");
    spin_for(std::chrono::microseconds(300));
    {
      Scope a("inner", Category::Op);
      spin_for(std::chrono::microseconds(500));
    }
    {
      Scope b("inner", Category::Op);
      Scope c("leaf", Category::Backward);
      spin_for(std::chrono::microseconds(200));
    }
  }
  Trace t = p.stop();
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.threads.size(), 1u);
  EXPECT_EQ(t.threads[0].name, "main");
  const Event& outer = find(t, "outer");
  EXPECT_EQ(outer.cat, Category::User);
  int64_t inner_total = 0;
  for (const Event& e : t.events) {
    EXPECT_LE(e.start_ns, e.end_ns);
    EXPECT_GE(e.start_ns, outer.start_ns);
    EXPECT_LE(e.end_ns, outer.end_ns);
    if (std::string_view(e.name) == "inner") inner_total += e.end_ns - e.start_ns;
  }
  // Self = duration minus the direct children (the two "inner"), not the grandchild "leaf".
  EXPECT_EQ(outer.self_ns, outer.end_ns - outer.start_ns - inner_total);
  EXPECT_GE(outer.self_ns, 300'000);
  const Event& leaf = find(t, "leaf");
  EXPECT_EQ(leaf.self_ns, leaf.end_ns - leaf.start_ns);
  EXPECT_GE(leaf.self_ns, 200'000);

  const std::vector<OpStat> stats = key_averages(t.events);
  ASSERT_EQ(stats.size(), 3u);
  int64_t self_sum = 0;
  for (const OpStat& s : stats) {
    self_sum += s.self_ns;
    if (s.name == "inner") {
      EXPECT_EQ(s.calls, 2);
      EXPECT_EQ(s.total_ns, inner_total);
      EXPECT_EQ(s.self_ns, inner_total - (leaf.end_ns - leaf.start_ns));
    }
  }
  // Self times of one thread's nested events add up to the outermost event's span.
  EXPECT_EQ(self_sum, outer.end_ns - outer.start_ns);
}

TEST(Profiler, ThreadsGetTheirOwnLanes) {
  Profile p;
  std::thread th([] {
    set_thread_name("worker");
    Scope s("on_worker", Category::Data);
    spin_for(std::chrono::microseconds(100));
  });
  {
    Scope s("on_main", Category::Op);
    spin_for(std::chrono::microseconds(100));
  }
  th.join();
  Trace t = p.stop();
  ASSERT_EQ(t.threads.size(), 2u);
  const Event& w = find(t, "on_worker");
  const Event& m = find(t, "on_main");
  EXPECT_NE(w.tid, m.tid);
  for (const Thread& th2 : t.threads) EXPECT_EQ(th2.name, th2.tid == w.tid ? "worker" : "main");
  // A second profile starts clean: the exited worker's lane is gone, the old events too.
  Profile p2(Profile::Options{.rank = 3});
  { Scope s("again", Category::Op); }
  Trace t2 = p2.stop();
  ASSERT_EQ(t2.events.size(), 1u);
  EXPECT_EQ(t2.rank, 3);
  EXPECT_EQ(std::string_view(t2.events[0].name), "again");
}

TEST(Profiler, OneAtATimeAndStopOnce) {
  Profile p;
  EXPECT_THROW(Profile second, core::Error);
  p.stop();
  EXPECT_THROW(p.stop(), core::Error);
  Profile third;  // the first one ended: allowed
  EXPECT_TRUE(enabled());
}

TEST(Profiler, OpenScopesAtStopAreLeftOut) {
  auto p = std::make_unique<Profile>();
  Scope open("still_open", Category::Op);
  { Scope closed("closed", Category::Op); }
  Trace t = p->stop();
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(std::string_view(t.events[0].name), "closed");
}

TEST(Profiler, ArgsAndAnnotation) {
  Profile p;
  {
    Scope s("all_reduce", Category::Collective);
    s.arg("bytes", int64_t(4096));
    s.arg("dtype", "float32");
  }
  { Scope k("mul", Category::Op); }
  annotate_last_op("\"input_shapes\":[[2, 3]]");
  annotate_last_op("\"ignored\":1");  // the event has args now
  Trace t = p.stop();
  EXPECT_EQ(find(t, "all_reduce").args, "\"bytes\":4096,\"dtype\":\"float32\"");
  EXPECT_EQ(find(t, "mul").args, "\"input_shapes\":[[2, 3]]");
  const std::string json = chrome_trace_json({t});
  EXPECT_NE(json.find("\"ph\":\"X\",\"name\":\"all_reduce\",\"cat\":\"collective\",\"pid\":0"), std::string::npos);
  EXPECT_NE(json.find("\"process_name\""), std::string::npos);
}

TEST(Profiler, TableSortsAndSums) {
  std::vector<OpStat> stats = {{"a", Category::Op, 10, 5'000'000, 1'000'000},
                               {"b", Category::Backward, 2, 3'000'000, 3'000'000},
                               {"c", Category::Optimizer, 1, 9'000'000, 500'000}};
  const std::string by_self = table(stats, SortBy::SelfTime);
  EXPECT_LT(by_self.find("\nb "), by_self.find("\na "));
  EXPECT_LT(by_self.find("\na "), by_self.find("\nc "));
  EXPECT_NE(by_self.find("Self time total: 4.500 ms"), std::string::npos) << by_self;
  const std::string by_calls = table(stats, SortBy::Calls, 1);
  EXPECT_NE(by_calls.find("\na "), std::string::npos);
  EXPECT_EQ(by_calls.find("\nb "), std::string::npos);
  // a: 10 calls, 5 ms total -> 500 us average.
  EXPECT_NE(by_calls.find("500.0"), std::string::npos) << by_calls;
}

}  // namespace
}  // namespace tb::profiler
