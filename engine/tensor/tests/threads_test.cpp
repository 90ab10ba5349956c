// num_threads() and ThreadLimit: a limit applies to the thread that set it, nests, and is undone.
#include <gtest/gtest.h>

#include <thread>

#include "engine/core/tests/error_of.h"
#include "engine/tensor/iterator.h"

namespace tb {
namespace {

TEST(Threads, ALimitAppliesToItsThreadOnlyAndIsUndone) {
  const int before = num_threads();
  set_num_threads(2);
  int inside = 0, nested = 0, after = 0, other = 0;
  std::thread t([&] {
    {
      ThreadLimit one(1);
      inside = num_threads();
      {
        ThreadLimit more(8);  // a limit never raises the count above the engine's
        nested = num_threads();
      }
      std::thread([&] { other = num_threads(); }).join();  // a new thread has no limit
    }
    after = num_threads();
  });
  t.join();
  EXPECT_EQ(inside, 1);
  EXPECT_EQ(nested, 2);
  EXPECT_EQ(other, 2);
  EXPECT_EQ(after, 2);
  EXPECT_EQ(num_threads(), 2);
  testing::expect_contains(testing::error_of([] { ThreadLimit bad(0); }), {"must be >= 1"});
  set_num_threads(before);
}

}  // namespace
}  // namespace tb
