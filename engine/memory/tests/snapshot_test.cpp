// The memory snapshot on a fresh allocator: the recorded events match a known sequence of
// allocations and frees, the ring keeps the newest max_entries, the live blocks and statistics
// agree, the JSON carries them (docs/memory.md), and an OOM writes it when a directory is set.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/tests/error_of.h"
#include "engine/core/tests/scratch_dir.h"
#include "engine/memory/oom.h"
#include "engine/memory/site.h"
#include "engine/memory/snapshot.h"
#include "engine/memory/tests/fresh.h"

namespace tb::memory {
namespace {

constexpr int64_t KiB = 1024, MiB = 1024 * 1024;

struct Expected {
  Action action;
  int64_t size, requested;
  Tag tag;
  const char* op;
};

void expect_events(const std::vector<Event>& got, const std::vector<Expected>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(got[i].action, want[i].action);
    EXPECT_EQ(got[i].size, want[i].size);
    EXPECT_EQ(got[i].requested, want[i].requested);
    EXPECT_EQ(got[i].tag, want[i].tag);
    if (want[i].op) EXPECT_STREQ(got[i].site.op, want[i].op);
    else EXPECT_EQ(got[i].site.op, nullptr);
    if (i) EXPECT_GE(got[i].time_us, got[i - 1].time_us);
  }
}

TEST(Snapshot, EventsMatchAKnownSequence) {
  Fresh f;
  DataPtr before = f.a.allocate(100);  // before recording: live, without a time
  record_history(f.a, 100);
  DataPtr w, x;
  {
    TagGuard g(Tag::Parameter);
    OpScope op("randn");
    ModuleScope m("fc1");
    w = f.a.allocate(3000);  // 4 KiB, new segment
  }
  {
    TagGuard g(Tag::Activation);
    OpScope op("matmul");
    x = f.a.allocate(size_t(MiB));  // new segment
  }
  x.reset();  // cached
  {
    OpScope op("relu");
    x = f.a.allocate(size_t(MiB) - 5);  // the cached 1 MiB block: no segment
  }
  f.a.set_limit(2 * MiB);
  EXPECT_THROW(
      {
        OpScope op("cat");
        f.a.allocate(size_t(3 * MiB));
      },
      OutOfMemoryError);
  before.reset();
  f.a.empty_cache();  // the 128 B block goes back to the system
  const Snapshot s = snapshot(f.a);
  const uintptr_t waddr = reinterpret_cast<uintptr_t>(w.get()), xaddr = reinterpret_cast<uintptr_t>(x.get());
  expect_events(s.events, {
                              {Action::SegmentAlloc, 4 * KiB, 4 * KiB, Tag::Other, nullptr},
                              {Action::Alloc, 4 * KiB, 3000, Tag::Parameter, "randn"},
                              {Action::SegmentAlloc, MiB, MiB, Tag::Other, nullptr},
                              {Action::Alloc, MiB, MiB, Tag::Activation, "matmul"},
                              {Action::Free, MiB, MiB, Tag::Activation, "matmul"},
                              {Action::Alloc, MiB, MiB - 5, Tag::Other, "relu"},
                              {Action::Oom, 4 * MiB, 3 * MiB, Tag::Other, "cat"},
                              {Action::Free, 128, 100, Tag::Other, nullptr},
                              {Action::SegmentFree, 128, 128, Tag::Other, nullptr},
                          });
  EXPECT_EQ(s.events[1].address, waddr);
  EXPECT_STREQ(s.events[1].site.module, "fc1");
  EXPECT_EQ(s.events[3].address, xaddr);
  EXPECT_EQ(s.events[5].address, xaddr) << "reused from the cache";
  EXPECT_EQ(s.events[6].address, 0u);
  EXPECT_EQ(s.max_entries, 100u);
  EXPECT_EQ(s.dropped_events, 0);
  // Live blocks, largest first, with their sites and times; nothing cached after empty_cache.
  ASSERT_EQ(s.live.size(), 2u);
  EXPECT_EQ(s.live[0].address, xaddr);
  EXPECT_EQ(s.live[0].size, MiB);
  EXPECT_EQ(s.live[0].requested, MiB - 5);
  EXPECT_STREQ(s.live[0].site.op, "relu");
  EXPECT_EQ(s.live[1].address, waddr);
  EXPECT_EQ(s.live[1].tag, Tag::Parameter);
  EXPECT_GT(s.live[1].time_us, 0);
  EXPECT_TRUE(s.cached.empty());
  EXPECT_EQ(s.stats.allocated_bytes, MiB + 4 * KiB);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.limit, 2 * MiB);
}

TEST(Snapshot, TheRingKeepsTheNewestEntries) {
  Fresh f;
  record_history(f.a, 5);
  for (int i = 1; i <= 4; ++i) {
    DataPtr p = f.a.allocate(size_t(i) * 64);  // 64, 128, 192->256, 256: segment, alloc, free (cache hit: no segment)
  }
  Snapshot s = snapshot(f.a);
  ASSERT_EQ(s.events.size(), 5u);
  // The last request (256 B) hit the cached 256 B block: alloc, free; before it the third's
  // segment_alloc, alloc, free.
  EXPECT_EQ(s.events[0].action, Action::SegmentAlloc);
  EXPECT_EQ(s.events[0].size, 256);
  EXPECT_EQ(s.events[3].action, Action::Alloc);
  EXPECT_EQ(s.events[3].requested, 256);
  EXPECT_EQ(s.events[4].action, Action::Free);
  EXPECT_EQ(s.dropped_events, 3 * 3 + 2 - 5);
  // Shrinking keeps the newest; 0 turns recording off and drops them.
  record_history(f.a, 2);
  s = snapshot(f.a);
  ASSERT_EQ(s.events.size(), 2u);
  EXPECT_EQ(s.events[1].action, Action::Free);
  record_history(f.a, 0);
  DataPtr p = f.a.allocate(64);
  s = snapshot(f.a);
  EXPECT_TRUE(s.events.empty());
  EXPECT_EQ(s.live.at(0).time_us, 0) << "no clock read while history is off";
  EXPECT_EQ(testing::error_of([&] { record_history(f.a, size_t(1) << 40); }).find("record_history: at most"), 0u);
}

TEST(Snapshot, JsonCarriesStatsLiveCachedAndEvents) {
  Fresh f;
  record_history(f.a, 10);
  DataPtr kept;
  {
    TagGuard g(Tag::Gradient);
    OpScope op("MmBackward0");
    LabelScope l("accumulate");
    kept = f.a.allocate(5000);
  }
  DataPtr gone = f.a.allocate(100);
  gone.reset();
  const nlohmann::json j = nlohmann::json::parse(snapshot_json(snapshot(f.a)));
  EXPECT_EQ(j["format"], "trainbench.memory_snapshot");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["reason"], "on_demand");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["stats"]["allocated_bytes"], 8192);
  EXPECT_EQ(j["stats"]["reserved_bytes"], 8192 + 128);
  EXPECT_EQ(j["stats"]["cached_free_bytes"], 128);
  EXPECT_EQ(j["stats"]["largest_free_block_bytes"], 128);
  EXPECT_EQ(j["stats"]["allocated_by_tag"]["gradient"], 8192);
  EXPECT_EQ(j["history"]["max_entries"], 10);
  ASSERT_EQ(j["live"].size(), 1u);
  EXPECT_EQ(j["live"][0]["address"], reinterpret_cast<uintptr_t>(kept.get()));
  EXPECT_EQ(j["live"][0]["requested"], 5000);
  EXPECT_EQ(j["live"][0]["tag"], "gradient");
  EXPECT_EQ(j["live"][0]["op"], "MmBackward0");
  EXPECT_EQ(j["live"][0]["label"], "accumulate");
  EXPECT_TRUE(j["live"][0]["module"].is_null());
  ASSERT_EQ(j["cached"].size(), 1u);
  EXPECT_EQ(j["cached"][0]["size"], 128);
  ASSERT_EQ(j["events"].size(), 5u);  // segment_alloc, alloc, segment_alloc, alloc, free
  EXPECT_EQ(j["events"][1]["action"], "alloc");
  EXPECT_EQ(j["events"][1]["op"], "MmBackward0");
  EXPECT_EQ(j["events"][4]["action"], "free");
  EXPECT_EQ(j["events"][4]["size"], 128);
  EXPECT_EQ(j["events"][4]["requested"], 100);
  EXPECT_FALSE(j.contains("oom"));
}

TEST(Snapshot, WrittenOnOomWhenADirectoryIsSet) {
  Fresh f;
  const testing::ScratchDir dir("tb_memory_snapshot_");
  for (const char* v : {"TRAINBENCH_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"}) ::unsetenv(v);  // rank 0
  set_oom_snapshot_dir(f.a, (dir / "nested").string());
  record_history(f.a, 16);
  f.a.set_limit(MiB);
  OpScope op("embedding");
  DataPtr held = f.a.allocate(600 * KiB);
  std::string msg;
  try {
    f.a.allocate(600 * KiB);
  } catch (const OutOfMemoryError& e) {
    msg = e.what();
    ASSERT_NE(oom_report(e), nullptr);
    EXPECT_EQ(oom_report(e)->snapshot_path, (dir / "nested" / snapshot_file_name(0)).string());
  }
  const std::filesystem::path file = dir / "nested" / "memory_snapshot_rank0.json";
  ASSERT_TRUE(std::filesystem::exists(file)) << msg;
  EXPECT_NE(msg.find("Snapshot: " + file.string()), std::string::npos) << msg;
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["reason"], "oom");
  EXPECT_EQ(j["oom"]["reason"], "limit");
  EXPECT_EQ(j["oom"]["requested"], 600 * KiB);
  EXPECT_EQ(j["oom"]["op"], "embedding");
  EXPECT_EQ(j["oom"]["allocated_bytes"], 600 * KiB);
  EXPECT_EQ(j["oom"]["largest_live"][0]["op"], "embedding");
  EXPECT_EQ(j["events"].back()["action"], "oom");
  EXPECT_EQ(j["live"].size(), 1u);
  // A path that cannot be a directory: the OOM is still thrown, the report says why no file.
  const std::filesystem::path blocker = dir / "file";
  std::ofstream(blocker) << "x";
  set_oom_snapshot_dir(f.a, blocker.string());
  try {
    f.a.allocate(600 * KiB);
    ADD_FAILURE() << "expected an OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(oom_report(e)->snapshot_path.find("(not written: write_snapshot: cannot create the snapshot directory"),
              0u)
        << oom_report(e)->snapshot_path;
  }
}

TEST(Snapshot, OpScopesNestAndLabelsAreInterned) {
  EXPECT_EQ(current_site().op, nullptr);
  {
    OpScope outer("adamw.step");
    OpScope kept("mul", /*keep_outer=*/true);
    EXPECT_STREQ(current_site().op, "adamw.step");
    OpScope replaced("sqrt");
    EXPECT_STREQ(current_site().op, "sqrt");
  }
  EXPECT_EQ(current_site().op, nullptr);
  {
    OpScope kept("mul", /*keep_outer=*/true);
    EXPECT_STREQ(current_site().op, "mul") << "no outer op: the inner names it";
  }
  std::string text = "phase ";
  text += "one";
  EXPECT_EQ(intern(text), intern("phase one"));
  EXPECT_NE(intern(text), text.c_str());
  {
    LabelScope l(text);
    text = "changed";
    EXPECT_STREQ(current_site().label, "phase one") << "the label is a copy";
  }
  EXPECT_EQ(current_site().label, nullptr);
}

}  // namespace
}  // namespace tb::memory
