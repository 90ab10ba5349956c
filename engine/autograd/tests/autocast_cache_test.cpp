// Note [Autocast weight cache]: a parameter is cast once per cache lifetime, recast after an
// in-place change, not cached under no_grad or for non-leaves, emptied when the last guard or
// scope ends; gradients through a cached cast used by two backwards both reach the parameter.
#include <gtest/gtest.h>

#include "engine/autograd/autocast.h"
#include "engine/autograd/functions.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor/factories.h"

namespace tb {
namespace {

namespace A = tb::autograd;

TEST(AutocastCache, CastsAWeightOncePerScope) {
  Tensor w = ones({4, 4}, DType::Float32).requires_grad_(true);
  Tensor x = ones({2, 4}, DType::Float32);
  {
    A::AutocastCacheScope scope;
    Tensor c1, c2;
    {
      A::AutocastGuard g;
      c1 = A::autocast_lower(w);
      EXPECT_EQ(c1.dtype(), DType::BFloat16);
      EXPECT_TRUE(A::autocast_lower(w).is_same(c1));  // same forward: cached
    }
    EXPECT_EQ(A::autocast_cache_size(), 1u);  // the scope keeps it past the guard
    {
      A::AutocastGuard g;
      c2 = A::autocast_lower(w);
      EXPECT_TRUE(c2.is_same(c1));
      // Two backwards through the one cached cast (two micro-batches) both accumulate.
      tb::sum(tb::matmul(x, w)).backward();
    }
    {
      A::AutocastGuard g;
      tb::sum(tb::matmul(x, w)).backward();
    }
    EXPECT_DOUBLE_EQ(tb::sum(w.grad()).item_double(), 2.0 * 2 * 16);
    {
      A::NoGradGuard ng;
      w.copy_(tb::mul(w.detach(), 2.0));  // an optimizer step: the cached copy is stale
    }
    A::AutocastGuard g;
    Tensor c3 = A::autocast_lower(w);
    EXPECT_FALSE(c3.is_same(c1));
    EXPECT_DOUBLE_EQ(tb::sum(c3.to(DType::Float32)).item_double(), 32.0);
  }
  EXPECT_EQ(A::autocast_cache_size(), 0u);  // the last user ended
}

TEST(AutocastCache, OnlyLeavesThatRequireGradUnderGradMode) {
  Tensor w = ones({3}, DType::Float32).requires_grad_(true);
  Tensor plain = ones({3}, DType::Float32);
  A::AutocastGuard g;
  A::autocast_lower(plain);
  A::autocast_lower(tb::mul(w, 2.0));  // not a leaf
  {
    A::NoGradGuard ng;
    A::autocast_lower(w);  // no grad mode: a cast without history must not be served later
  }
  EXPECT_EQ(A::autocast_cache_size(), 0u);
  EXPECT_TRUE(A::autocast_lower(w).requires_grad());
  EXPECT_EQ(A::autocast_cache_size(), 1u);
}

// A weight re-pointed at another tensor's memory and version counter (FSDP's NO_SHARD layer
// weights share their master's), whose value happens to equal the old counter's: the cached cast
// is of other values, so it is not served.
TEST(AutocastCache, AnotherCounterAtTheSameValueIsAnotherVersion) {
  Tensor w = ones({3}, DType::Float32).requires_grad_(true);
  Tensor master = full({3}, 2.0, DType::Float32);
  A::AutocastGuard g;
  EXPECT_EQ(A::autocast_lower(w).to(DType::Float32).data_ptr<float>()[0], 1.0f);
  master.impl()->version->version = w.version();
  w.impl()->storage = master.storage();
  w.impl()->version = master.impl()->version;
  EXPECT_EQ(A::autocast_lower(w).to(DType::Float32).data_ptr<float>()[0], 2.0f);
}

}  // namespace
}  // namespace tb
