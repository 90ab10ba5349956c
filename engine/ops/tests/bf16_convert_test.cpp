// store_bf16 (cpu/bf16_convert.h) against the scalar conversion BFloat16(float), bit for bit: the
// vector instruction treats float32 subnormals as zero, so those lanes must take the fallback, and
// NaN must come out quiet with its sign and payload's top bits as BFloat16::from_float makes it.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "engine/ops/cpu/bf16_convert.h"

namespace tb {
namespace {

using core::BFloat16;

// The first element whose vector conversion differs from the scalar one, or -1.
int64_t first_mismatch(const std::vector<float>& src) {
  std::vector<BFloat16> got(src.size());
  ops::cpu::store_bf16(got.data(), src.data(), int64_t(src.size()));
  for (size_t i = 0; i < src.size(); ++i)
    if (got[i].bits != BFloat16(src[i]).bits) return int64_t(i);
  return -1;
}

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(StoreBf16, SpecialValuesMatchScalarConversion) {
  const std::vector<uint32_t> bits = {
      0x00000000, 0x80000000,              // +-0
      0x7F800000, 0xFF800000,              // +-inf
      0x7FC00000, 0xFFC00000,              // quiet NaN
      0x7F800001, 0xFF800001, 0x7FA00000,  // signalling NaN: must come out quiet (bit 6 of the bf16)
      0x7FFFFFFF, 0x7F80FFFF,              // NaN whose low payload bits would round up into the exponent
      0x00000001, 0x80000001,              // smallest subnormals: round to +-0
      0x00008000, 0x00008001, 0x00018000,  // subnormal ties: to even (0), up, to even (2)
      0x007FFFFF, 0x807FFFFF,              // largest subnormal: rounds up to the smallest normal
      0x00400000, 0x00123456,              // subnormals that keep bits in bfloat16
      0x00800000, 0x3F800000, 0x3F808000,  // smallest normal, 1, tie to even (down)
      0x3F818000, 0x3F80FFFF, 0x3F807FFF,  // tie to even (up), round up, round down
      0x7F7FFFFF, 0xFF7FFFFF,              // largest finite: rounds to +-inf
  };
  std::vector<float> src;
  for (uint32_t b : bits) src.push_back(from_bits(b));
  EXPECT_EQ(first_mismatch(src), -1);
  std::vector<BFloat16> got(src.size());
  ops::cpu::store_bf16(got.data(), src.data(), int64_t(src.size()));
  EXPECT_EQ(got[0].bits, 0x0000);
  EXPECT_EQ(got[1].bits, 0x8000);
  EXPECT_EQ(got[6].bits, 0x7FC0);   // signalling NaN made quiet
  EXPECT_EQ(got[9].bits, 0x7FFF);   // NaN stays NaN, not inf
  EXPECT_EQ(got[13].bits, 0x0000);  // 0x00008000: tie to even
  EXPECT_EQ(got[14].bits, 0x0001);  // 0x00008001: rounds up to the smallest bf16 subnormal
  EXPECT_EQ(got[15].bits, 0x0002);  // 0x00018000: tie to even (up)
  EXPECT_EQ(got[16].bits, 0x0080);  // largest float subnormal: the smallest normal, not 0
  EXPECT_EQ(got[19].bits, 0x0012);  // 0x00123456 keeps its top bits
  EXPECT_EQ(got[26].bits, 0x7F80);  // overflow to inf
}

// One subnormal among 15 normals in each position of a 16-lane vector, then a sweep over every
// 4099th float32 bit pattern (all exponents, signs and NaN payloads).
TEST(StoreBf16, SubnormalLanesAndBitPatternSweepMatchScalarConversion) {
  for (int lane = 0; lane < 16; ++lane) {
    std::vector<float> src(16, 1.5f);
    src[size_t(lane)] = from_bits(0x00018001u);
    EXPECT_EQ(first_mismatch(src), -1) << "subnormal in lane " << lane;
  }
  std::vector<float> sweep;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4099) sweep.push_back(from_bits(uint32_t(b)));
  const int64_t at = first_mismatch(sweep);
  EXPECT_EQ(at, -1) << "bits 0x" << std::hex << (at < 0 ? 0 : std::bit_cast<uint32_t>(sweep[size_t(at)]));
}

// The non-temporal variant (Note [Streaming bf16 stores]) on the same sweep, into a 32-byte
// aligned destination, with lengths that leave a tail for store_bf16.
TEST(StoreBf16, StreamingStoreMatchesScalarConversion) {
  std::vector<float> sweep;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4099) sweep.push_back(from_bits(uint32_t(b)));
  for (uint32_t b : {0x00018001u, 0x7F800001u, 0xFFC00000u, 0x7FFFFFFFu, 0x3F818000u, 0x7F7FFFFFu})
    sweep.push_back(from_bits(b));
  const int64_t n = int64_t(sweep.size());
  std::vector<BFloat16> storage(size_t(n) + 32);
  BFloat16* dst = storage.data();
  while (reinterpret_cast<uintptr_t>(dst) % 32) ++dst;
  for (int64_t len : {n, n - 5, int64_t(16), int64_t(7)}) {
    ops::cpu::store_bf16_stream(dst, sweep.data(), len);
    ops::cpu::stream_fence();
    int64_t bad = -1;
    for (int64_t i = 0; i < len && bad < 0; ++i)
      if (dst[i].bits != BFloat16(sweep[size_t(i)]).bits) bad = i;
    EXPECT_EQ(bad, -1) << "length " << len << ", bits 0x" << std::hex
                       << (bad < 0 ? 0 : std::bit_cast<uint32_t>(sweep[size_t(bad)]));
  }
}

// Every length up to three vectors, so the masked tail writes exactly n elements.
TEST(StoreBf16, TailsWriteExactlyNElements) {
  for (int64_t n = 0; n <= 48; ++n) {
    std::vector<float> src(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) src[size_t(i)] = 1.0f + float(i) / 3.0f;
    std::vector<BFloat16> dst(size_t(n) + 1);
    dst[size_t(n)].bits = 0xABCD;  // sentinel past the end
    ops::cpu::store_bf16(dst.data(), src.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(dst[size_t(i)].bits, BFloat16(src[size_t(i)]).bits) << n << " " << i;
    EXPECT_EQ(dst[size_t(n)].bits, 0xABCD) << "wrote past element " << n;
  }
}

}  // namespace
}  // namespace tb
