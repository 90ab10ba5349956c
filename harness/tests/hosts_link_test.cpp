// The link profiles' launch settings that need no hosts: the TCP fragment size a shaped link's
// launches use (Note [Long messages over a shaped link] in harness/hosts.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "harness/hosts.h"

namespace tb::harness {
namespace {

TEST(TcpFragment, AboutOneMillisecondOfTheNominalRate) {
  EXPECT_EQ(tcp_fragment_bytes(link_profile("1g-200us")), 128u * 1024);   // 125 000 B per ms, in 64 KiB
  EXPECT_EQ(tcp_fragment_bytes(link_profile("10g-50us")), 1280u * 1024);  // 1 250 000 B per ms
  EXPECT_EQ(tcp_fragment_bytes({"fast", 100, 0, ""}), 12224u * 1024);     // 12 500 000 B, rounded up
}

TEST(TcpFragment, NeverBelowTheBtlSendSizeAndUnsetWhereUnshaped) {
  EXPECT_EQ(tcp_fragment_bytes({"slow", 0.01, 0, ""}), 128u * 1024);  // Open MPI's max_send_size
  EXPECT_EQ(tcp_fragment_bytes(link_profile("unshaped")), 0u);
  EXPECT_EQ(tcp_fragment_bytes({"bad", -1, 0, ""}), 0u);
  EXPECT_EQ(tcp_fragment_bytes({"nan", std::nan(""), 0, ""}), 0u);
  // Past any real link: Open MPI's own default, not an overflowed size_t.
  EXPECT_EQ(tcp_fragment_bytes({"huge", 1e300, 0, ""}), 2147482624u);
  EXPECT_EQ(tcp_fragment_bytes({"inf", std::numeric_limits<double>::infinity(), 0, ""}), 2147482624u);
}

}  // namespace
}  // namespace tb::harness
