// The memory cap's forms: bytes, a fraction of the machine's memory, a percentage; and the
// machine's memory itself (MemTotal, or a lower cgroup limit).
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/core/tests/error_of.h"
#include "engine/memory/limit.h"
#include "engine/memory/tests/fresh.h"

namespace tb::memory {
namespace {

using testing::error_of;
using testing::expect_contains;

constexpr int64_t GiB = int64_t(1) << 30;

TEST(MemoryLimit, BytesFractionsAndPercentages) {
  EXPECT_EQ(parse_memory_limit("V", "0", 8 * GiB), 0);
  EXPECT_EQ(parse_memory_limit("V", "512M", 8 * GiB), int64_t(512) << 20);
  EXPECT_EQ(parse_memory_limit("V", "1.5G", 8 * GiB), 3 * GiB / 2) << "a whole byte count with a unit";
  EXPECT_EQ(parse_memory_limit("V", "0.25", 8 * GiB), 2 * GiB);
  EXPECT_EQ(parse_memory_limit("V", "1.0", 8 * GiB), 8 * GiB);
  EXPECT_EQ(parse_memory_limit("V", ".5", 8 * GiB), 4 * GiB);
  EXPECT_EQ(parse_memory_limit("V", "25%", 8 * GiB), 2 * GiB);
  EXPECT_EQ(parse_memory_limit("V", "12.5%", 8 * GiB), GiB);
  EXPECT_EQ(parse_memory_limit("V", "100%", 8 * GiB), 8 * GiB);
  EXPECT_EQ(parse_memory_limit("V", "0.0000000001", 8 * GiB), 1) << "never 0 (that would mean no cap)";
}

TEST(MemoryLimit, BadValuesNameTheForms) {
  for (const char* v : {"0.0", "1.5", "2.0", "0%", "101%", "-5%", "%", "abc%", "1..2", "0.5.", "lots", "-1"}) {
    SCOPED_TRACE(v);
    const std::string msg = error_of([&] { parse_memory_limit("TRAINBENCH_MEMORY_LIMIT", v, 8 * GiB); });
    expect_contains(msg, {"TRAINBENCH_MEMORY_LIMIT", "a fraction of the machine's memory", "\"25%\""});
  }
  expect_contains(error_of([] { parse_memory_limit("V", "0.5", 0); }), {"the machine's memory is unknown"});
}

TEST(MemoryLimit, MachineMemoryIsMemTotalOrALowerCgroupLimit) {
  const int64_t m = machine_memory_bytes();
  EXPECT_GT(m, int64_t(64) << 20);
  EXPECT_EQ(parse_memory_limit("V", "50%"), m / 2);
}

TEST(MemoryLimit, EnvironmentTakesEveryForm) {
  (void)cpu_allocator();  // made before the variables change (allocate() refers to it)
  const char* old = std::getenv("TRAINBENCH_MEMORY_LIMIT");
  const std::string saved = old ? old : "";
  ::setenv("TRAINBENCH_MEMORY_LIMIT", "10%", 1);
  EXPECT_EQ(CpuCachingAllocator().limit(), parse_memory_limit("V", "0.1"));
  ::setenv("TRAINBENCH_MEMORY_LIMIT", "150%", 1);
  expect_contains(error_of([] { CpuCachingAllocator a; }), {"TRAINBENCH_MEMORY_LIMIT", "'150%'"});
  if (old) ::setenv("TRAINBENCH_MEMORY_LIMIT", saved.c_str(), 1);
  else ::unsetenv("TRAINBENCH_MEMORY_LIMIT");
}

TEST(MemoryLimit, OtherVariablesAreStrictToo) {
  (void)cpu_allocator();  // made before the variables change (allocate() refers to it)
  struct Case {
    const char* name;
    const char* bad;
  };
  for (const Case& c : {Case{"TRAINBENCH_MEMORY_FAIL_AT", "-1"}, Case{"TRAINBENCH_MEMORY_FAIL_AT", "3x"},
                        Case{"TRAINBENCH_MEMORY_HISTORY", "-5"}, Case{"TRAINBENCH_MEMORY_HISTORY", "99999999999"},
                        Case{"TRAINBENCH_MEMORY_RELEASE_CACHE", "maybe"}}) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.bad);
    const char* old = std::getenv(c.name);
    const std::string saved = old ? old : "";
    ::setenv(c.name, c.bad, 1);
    expect_contains(error_of([] { CpuCachingAllocator a; }), {c.name});
    if (old) ::setenv(c.name, saved.c_str(), 1);
    else ::unsetenv(c.name);
  }
  ::setenv("TRAINBENCH_MEMORY_FAIL_AT", "2", 1);
  ::setenv("TRAINBENCH_MEMORY_HISTORY", "7", 1);
  {
    CpuCachingAllocator a;
    EXPECT_EQ(fail_at(a), 2);
    DataPtr p = a.allocate(10);
    EXPECT_THROW(a.allocate(10), OutOfMemoryError);
  }
  ::unsetenv("TRAINBENCH_MEMORY_FAIL_AT");
  ::unsetenv("TRAINBENCH_MEMORY_HISTORY");
}

}  // namespace
}  // namespace tb::memory
