// The strict parsers of engine/core/env.h with hostile values: every malformed, out-of-range or
// padded value is an error naming the variable and the value; nothing wraps or saturates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/core/env.h"
#include "engine/core/error.h"
#include "engine/core/tests/error_of.h"

namespace tb {
namespace {

using testing::error_of;

const char* const kHostile[] = {"1e30",
                                "inf",
                                "-inf",
                                "nan",
                                "-1",
                                "99999999999G",
                                "0x10",
                                "",
                                " 5",
                                "5 ",
                                "9223372036854775808",
                                "18446744073709551616",
                                "5X",
                                "G",
                                "1.5.2",
                                "+5",
                                "1e3",
                                "5\n",
                                "5 M",
                                "--5",
                                "0.5",
                                ".5",
                                "5.",
                                "1K1",
                                "abc"};

TEST(Env, BytesAcceptTheDocumentedForms) {
  EXPECT_EQ(core::parse_bytes("V", "0"), 0);
  EXPECT_EQ(core::parse_bytes("V", "512"), 512);
  EXPECT_EQ(core::parse_bytes("V", "512B"), 512);
  EXPECT_EQ(core::parse_bytes("V", "4K"), 4096);
  EXPECT_EQ(core::parse_bytes("V", "4k"), 4096);
  EXPECT_EQ(core::parse_bytes("V", "64M"), int64_t(64) << 20);
  EXPECT_EQ(core::parse_bytes("V", "64MiB"), int64_t(64) << 20);
  EXPECT_EQ(core::parse_bytes("V", "2G"), int64_t(2) << 30);
  EXPECT_EQ(core::parse_bytes("V", "1.5G"), int64_t(3) << 29);
  EXPECT_EQ(core::parse_bytes("V", "3T"), int64_t(3) << 40);
  EXPECT_EQ(core::parse_bytes("V", "9223372036854775807"), INT64_MAX);
  EXPECT_EQ(core::parse_bytes("V", "8388607T"), int64_t(8388607) << 40);  // just below 2^63
}

TEST(Env, BytesRefuseHostileValuesNamingTheVariable) {
  for (const char* v : kHostile) {
    const std::string msg = error_of([&] { core::parse_bytes("TRAINBENCH_MEMORY_LIMIT", v); });
    EXPECT_NE(msg.find("TRAINBENCH_MEMORY_LIMIT"), std::string::npos) << "'" << v << "' was accepted";
    EXPECT_NE(msg.find("byte count"), std::string::npos) << msg;
  }
  // Exactly 2^63 bytes (8 EiB) does not fit int64; a fraction of a byte is not a byte count.
  EXPECT_NE(error_of([] { core::parse_bytes("V", "8388608T"); }), "");
  EXPECT_NE(error_of([] { core::parse_bytes("V", "1.3K"); }), "");  // 1331.2 bytes
  EXPECT_NE(error_of([] { core::parse_bytes("V", "0.1"); }), "");
}

TEST(Env, IntegersAreDecimalAndInRange) {
  EXPECT_EQ(core::parse_int64("V", "42"), 42);
  EXPECT_EQ(core::parse_int64("V", "-7"), -7);
  EXPECT_EQ(core::parse_int64("V", "9223372036854775807"), INT64_MAX);
  EXPECT_EQ(core::parse_int64("V", "-9223372036854775808"), INT64_MIN);
  for (const char* v : kHostile) {
    if (std::string(v) == "-1") continue;  // a valid int64 (refused below by a range)
    const std::string msg = error_of([&] { core::parse_int64("TRAINBENCH_FASHION_EPOCHS", v); });
    EXPECT_NE(msg.find("TRAINBENCH_FASHION_EPOCHS"), std::string::npos) << "'" << v << "' was accepted";
  }
  const std::string msg = error_of([] { core::parse_int64("TRAINBENCH_FASHION_EPOCHS", "-1", 1, 1000); });
  EXPECT_NE(msg.find("'-1'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 1000]"), std::string::npos) << msg;
}

TEST(Env, SeedsAreUnsigned64) {
  EXPECT_EQ(core::parse_uint64("TRAINBENCH_SEED", "18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(core::parse_uint64("TRAINBENCH_SEED", "0"), 0u);
  for (const char* v : {"abc", "-1", "18446744073709551616", "", " 5", "5 ", "0x10", "1e3"}) {
    const std::string msg = error_of([&] { core::parse_uint64("TRAINBENCH_SEED", v); });
    EXPECT_NE(msg.find("TRAINBENCH_SEED"), std::string::npos) << "'" << v << "' was accepted";
  }
}

TEST(Env, DoublesAreFiniteAndInRange) {
  EXPECT_EQ(core::parse_double("V", "2.5", 0, 10), 2.5);
  EXPECT_EQ(core::parse_double("V", "1e-3", 0, 10), 1e-3);
  for (const char* v : {"1e30", "inf", "nan", "-1", "", " 5", "5 ", "0x10", "abc", "5s"})
    EXPECT_NE(error_of([&] {
                core::parse_double("TRAINBENCH_DIST_TIMEOUT", v, 1e-3, 1e9);
              }).find("TRAINBENCH_DIST_TIMEOUT"),
              std::string::npos)
        << "'" << v << "' was accepted";
}

TEST(Env, BoolsAndChoices) {
  EXPECT_TRUE(core::parse_bool("V", "1"));
  EXPECT_TRUE(core::parse_bool("V", "TRUE"));
  EXPECT_FALSE(core::parse_bool("V", "off"));
  for (const char* v : {"2", "", " 1", "yes please", "tru"})
    EXPECT_NE(error_of([&] { core::parse_bool("V", v); }), "") << v;
  EXPECT_EQ(core::parse_choice("V", "auto", {"always", "auto"}), "auto");
  const std::string msg = error_of([] { core::parse_choice("TRAINBENCH_DDP_OVERLAP", "Auto", {"always", "auto"}); });
  EXPECT_NE(msg.find("TRAINBENCH_DDP_OVERLAP"), std::string::npos) << msg;
  EXPECT_NE(msg.find("always, auto"), std::string::npos) << msg;
}

TEST(Env, CpuListsAsTasksetWritesThem) {
  EXPECT_EQ(core::parse_cpu_list("V", "0"), (std::vector<int>{0}));
  EXPECT_EQ(core::parse_cpu_list("V", "0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(core::parse_cpu_list("V", "4,0-1"), (std::vector<int>{4, 0, 1}));  // the order written
  EXPECT_EQ(core::parse_cpu_list("V", "7-7"), (std::vector<int>{7}));
  EXPECT_EQ(core::parse_cpu_list("V", "1023"), (std::vector<int>{1023}));
  EXPECT_EQ(core::parse_cpu_list("V", "0-1023").size(), 1024u);
  for (const char* v : {"",   ",",  "0,",  ",0",   "1,,2",   "-1",  "+1",    "1-",  "-",           "3-1", "1-2-3",
                        "0 ", " 0", "0x1", "1024", "0-1024", "1,1", "0-2,2", "1.0", "99999999999", "a"})
    EXPECT_NE(error_of([&] { core::parse_cpu_list("V", v); }), "") << "'" << v << "' was accepted";
  const std::string msg = error_of([] { core::parse_cpu_list("TRAINBENCH_RANK_CPUS", "0-x"); });
  EXPECT_NE(msg.find("TRAINBENCH_RANK_CPUS"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CPU list"), std::string::npos) << msg;
}

TEST(Env, ValuesInMessagesAreEscapedAndBounded) {
  const std::string msg = error_of([] { core::parse_bytes("V", std::string("\x01\xff'") + std::string(500, 'x')); });
  EXPECT_NE(msg.find("\\x01\\xff\\x27"), std::string::npos) << msg;
  EXPECT_LT(msg.size(), 400u) << msg;
}

TEST(Env, UnsetOrEmptyMeansTheDefault) {
  ::unsetenv("TB_ENV_TEST_VAR");
  EXPECT_EQ(core::env_int64("TB_ENV_TEST_VAR", 7), 7);
  ::setenv("TB_ENV_TEST_VAR", "", 1);
  EXPECT_EQ(core::env_bytes("TB_ENV_TEST_VAR", 9), 9);
  ::setenv("TB_ENV_TEST_VAR", "abc", 1);
  EXPECT_NE(error_of([] { core::env_uint64("TB_ENV_TEST_VAR", 1); }).find("TB_ENV_TEST_VAR"), std::string::npos);
  ::setenv("TB_ENV_TEST_VAR", "2G", 1);
  EXPECT_EQ(core::env_bytes("TB_ENV_TEST_VAR", 0), int64_t(2) << 30);
  ::unsetenv("TB_ENV_TEST_VAR");
}

}  // namespace
}  // namespace tb
