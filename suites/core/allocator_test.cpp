// The bf16/f16 conversions checked exhaustively against LibTorch. The caching allocator's own
// tests need no LibTorch: engine/memory/tests and engine/tensor/tests/tensor_memory_test.cpp.
#include <gtest/gtest.h>

#include "engine/memory/allocator.h"
#include "engine/tensor/factories.h"
#include "reference/tensor.h"
#include "reference/views.h"

namespace tb {
namespace {

// Every 16-bit pattern of bf16 and f16 widens to float exactly as in LibTorch, and the midpoints
// between neighbours (the rounding ties) narrow back the same way: round to nearest even.
TEST(Conversions, EveryHalfAndBFloat16MatchesLibTorch) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    // Build all 65536 bit patterns as a tensor of dt over the same bytes.
    auto buf = std::make_shared<std::vector<uint16_t>>(65536);
    for (int i = 0; i < 65536; ++i) (*buf)[i] = uint16_t(i);
    Tensor all = from_blob(buf->data(), {65536}, {1}, dt, buf);
    Tensor widened = all.to(DType::Float32);
    Tensor expected = ref::from_ref(ref::to(ref::to_ref(all), DType::Float32));
    const float* w = widened.data_ptr<float>();
    const float* e = expected.data_ptr<float>();
    for (int i = 0; i < 65536; ++i) {
      if (std::isnan(e[i])) {
        EXPECT_TRUE(std::isnan(w[i])) << i;
        continue;
      }
      ASSERT_EQ(w[i], e[i]) << core::name(dt) << " bits " << i;
    }
    // Midpoints between neighbours exercise round-to-nearest-even on the way back.
    Tensor mids = empty({65535}, DType::Float32);
    float* m = mids.data_ptr<float>();
    for (int i = 0; i < 65535; ++i) m[i] = 0.5f * (w[i] + w[i + 1]);
    Tensor narrowed = mids.to(dt).to(DType::Float32);
    Tensor ref_narrowed = ref::from_ref(ref::to(ref::to(ref::to_ref(mids), dt), DType::Float32));
    const float* n = narrowed.data_ptr<float>();
    const float* rn = ref_narrowed.data_ptr<float>();
    for (int i = 0; i < 65535; ++i) {
      if (std::isnan(rn[i])) {
        EXPECT_TRUE(std::isnan(n[i])) << i;
        continue;
      }
      ASSERT_EQ(n[i], rn[i]) << core::name(dt) << " midpoint " << i << " = " << m[i];
    }
  }
}

}  // namespace
}  // namespace tb
