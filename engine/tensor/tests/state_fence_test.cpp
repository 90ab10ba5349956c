// State fences (Note [State fences]): every registered fence runs, in registration order, until
// its StateFence is destroyed; with none registered state_fence() does nothing.
#include <gtest/gtest.h>

#include <string>

#include "engine/tensor/state_fence.h"

namespace tb {
namespace {

TEST(StateFence, RunsRegisteredFencesUntilDestroyed) {
  std::string calls;
  state_fence();
  {
    StateFence a([&] { calls += "a"; });
    state_fence();
    {
      StateFence b([&] { calls += "b"; });
      state_fence();
    }
    state_fence();
  }
  state_fence();
  EXPECT_EQ(calls, "aaba");
}

}  // namespace
}  // namespace tb
