// The profiler's recording core: off costs nothing and records nothing; nesting, self vs total
// time (exact, on a synthetic clock), OpScope's one-event-per-call rule, labels grouping
// key_averages, threads and their lanes, one profile at a time, key_averages and the table's sums.
// The trace JSON is parsed in engine/train/tests/profiler_hooks_test.cpp (core has no JSON reader).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <tuple>

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

// A clock the test moves by hand: every timestamp is known, so self times are exact numbers.
int64_t g_fake_now = 0;
int64_t fake_clock() { return g_fake_now; }
struct FakeClock {
  FakeClock() {
    g_fake_now = 1'000;
    set_clock_for_testing(&fake_clock);
  }
  ~FakeClock() { set_clock_for_testing(nullptr); }
};

const Event& find_nth(const Trace& t, std::string_view name, int n) {
  for (const Event& e : t.events)
    if (e.name == name && n-- == 0) return e;
  throw std::runtime_error("no event " + std::string(name));
}

TEST(Profiler, SelfTimeIsExactOnASyntheticTimeline) {
  FakeClock clock;
  Profile p;
  {
    RecordFunction step("step", Category::Step);  // [1000, 2000]
    g_fake_now = 1'100;
    {
      Scope a("linear", Category::Op);  // [1100, 1400]
      {
        Scope b("copy_", Category::Op);  // [1100, 1150]: starts at its parent's very timestamp
        g_fake_now = 1'150;
      }
      g_fake_now = 1'400;
      Scope zero("empty", Category::Op);  // [1400, 1400]: ends at its parent's very timestamp
    }
    {
      Scope c("linear", Category::Op);  // [1400, 1500]: starts where the sibling ended
      g_fake_now = 1'500;
    }
    g_fake_now = 2'000;
  }
  Trace t = p.stop();
  ASSERT_EQ(t.events.size(), 5u);
  const Event& step = find(t, "step");
  EXPECT_EQ(step.end_ns - step.start_ns, 1'000);
  EXPECT_EQ(step.self_ns, 1'000 - 300 - 100);
  EXPECT_EQ(find_nth(t, "linear", 0).self_ns, 300 - 50);
  EXPECT_EQ(find_nth(t, "linear", 1).self_ns, 100);
  EXPECT_EQ(find(t, "copy_").self_ns, 50);
  EXPECT_EQ(find(t, "empty").self_ns, 0);
  // Ties keep the order of opening: the parent before its child that starts at the same time.
  EXPECT_EQ(std::string_view(t.events[1].name), "linear");
  EXPECT_EQ(std::string_view(t.events[2].name), "copy_");
  EXPECT_EQ(std::string_view(t.events[3].name), "empty");  // closed before its sibling opened at 1400
  EXPECT_EQ(std::string_view(t.events[4].name), "linear");
  for (const OpStat& s : key_averages(t.events)) {
    if (s.name == "linear") EXPECT_EQ(std::make_tuple(s.calls, s.total_ns, s.self_ns), std::make_tuple(2, 400, 350));
    if (s.name == "step") EXPECT_EQ(s.self_ns, 600);
  }
}

TEST(Profiler, OpScopeIsOneEventPerCall) {
  FakeClock clock;
  Profile p;
  const core::Shape shape{3, 2};
  {
    Scope kernel("contiguous", Category::Op);  // autograd::kernel's event for tb::contiguous
    g_fake_now += 10;
    OpScope method("contiguous", {{&shape, core::DType::Float32}});  // Tensor::contiguous inside it: no event
    EXPECT_FALSE(method.active());
    g_fake_now += 10;
    OpScope copy("copy_",
                 {{&shape, core::DType::Float32}, {nullptr, core::DType::Float32}});  // another op: its own event
    EXPECT_TRUE(copy.active());
    g_fake_now += 30;
  }
  {
    RecordFunction user("clone");  // a user's label of the same name is not an op: both are kept
    OpScope method("clone", {{&shape, core::DType::BFloat16}});
    EXPECT_TRUE(method.active());
    g_fake_now += 5;
  }
  Trace t = p.stop();
  ASSERT_EQ(t.events.size(), 4u);
  const Event& k = find(t, "contiguous");
  EXPECT_EQ(k.self_ns, 20);
  EXPECT_EQ(find(t, "copy_").self_ns, 30);
  EXPECT_EQ(find(t, "copy_").args, "\"input_shapes\":[[3, 2],[]],\"input_dtypes\":[\"float32\",\"undefined\"]");
  EXPECT_EQ(find_nth(t, "clone", 1).args, "\"input_shapes\":[[3, 2]],\"input_dtypes\":[\"bfloat16\"]");
  EXPECT_EQ(find_nth(t, "clone", 1).cat, Category::Op);
}

TEST(Profiler, LabelsSplitKeyAveragesAndShowInTheTrace) {
  Profile p;
  for (const char* label : {"ddp/bucket 0", "ddp/bucket 1", "ddp/bucket 0", ""}) {
    Scope s("all_reduce", Category::Collective);
    s.label(label);
    s.arg("bytes", int64_t(64));
  }
  Trace t = p.stop();
  std::map<std::string, int64_t> calls;
  for (const OpStat& s : key_averages(t.events)) calls[s.name + "|" + s.label] = s.calls;
  EXPECT_EQ(calls, (std::map<std::string, int64_t>{{"all_reduce|", 1},
                                                   {"all_reduce|ddp/bucket 0", 2},
                                                   {"all_reduce|ddp/bucket 1", 1}}));
  const std::string tab = table(key_averages(t.events), SortBy::Calls);
  EXPECT_NE(tab.find("\nall_reduce [ddp/bucket 0] "), std::string::npos) << tab;
  EXPECT_NE(tab.find("\nall_reduce "), std::string::npos) << tab;
  const std::string json = chrome_trace_json({t});
  EXPECT_NE(json.find("\"args\":{\"bytes\":64,\"label\":\"ddp/bucket 1\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"args\":{\"bytes\":64}"), std::string::npos) << "no label key without a label";
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
