// float32 -> bfloat16 for whole runs of results, bitwise equal to core::BFloat16(float) (round to
// nearest even, NaN kept quiet with its sign and top payload bits). Where the CPU has AVX512-BF16
// the conversion is one vcvtneps2bf16 per 16 values: the per-element scalar conversion kept
// gelu/bfloat16 at half LibTorch's speed (engine/ops/README.md, "Vector width"). The instruction
// treats float32 subnormal inputs as zero (float bits 0x00018001 give bf16 0x0000, not 0x0002),
// so lanes that hold one take the scalar path's integer rounding instead.
#pragma once
#include <cstdint>
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include <immintrin.h>
#define TB_HAVE_AVX512BF16_STORE 1
#endif

#include "engine/core/dtype.h"

namespace tb::ops::cpu {

#if defined(TB_HAVE_AVX512BF16_STORE)
// 16 floats to 16 bfloat16 bit patterns.
[[gnu::always_inline]] inline __m256i cvt_bf16x16(__m512 v) {
  __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __mmask16 sub = _mm512_fpclass_ps_mask(v, 0x20);  // 0x20: subnormal
  if (sub) [[unlikely]] {
    // BFloat16::from_float's rounding (no NaN among these lanes): x + 0x7FFF + bit 16 of x. In
    // vector extensions: GCC 12 warns maybe-uninitialized inside _mm512_srli_epi32/_cvtepi32_epi16.
    using u32x16 = uint32_t __attribute__((vector_size(64)));
    using u16x16 = uint16_t __attribute__((vector_size(32)));
    const u32x16 x = reinterpret_cast<u32x16>(v);
    const u16x16 rounded = __builtin_convertvector((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16, u16x16);
    r = _mm256_mask_blend_epi16(sub, r, reinterpret_cast<__m256i>(rounded));
  }
  return r;
}
#endif

// dst[i] = BFloat16(src[i]) for i < n.
inline void store_bf16(core::BFloat16* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(TB_HAVE_AVX512BF16_STORE)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), cvt_bf16x16(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm256_mask_storeu_epi16(dst + i, tail, cvt_bf16x16(_mm512_maskz_loadu_ps(tail, src + i)));
    return;
  }
#endif
  for (; i < n; ++i) dst[i] = core::BFloat16(src[i]);
}

}  // namespace tb::ops::cpu
