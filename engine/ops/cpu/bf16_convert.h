// float32 -> bfloat16 for whole runs of results, bitwise equal to core::BFloat16(float) (round to
// nearest even, NaN kept quiet with its sign and top payload bits). Where the CPU has AVX512-BF16
// the conversion is one vcvtneps2bf16 per 16 values: the per-element scalar conversion kept
// gelu/bfloat16 at half LibTorch's speed (engine/ops/README.md, "Vector width"). The instruction
// treats float32 subnormal inputs as zero (float bits 0x00018001 give bf16 0x0000, not 0x0002),
// so lanes that hold one take the scalar path's integer rounding instead. Below AVX512-BF16, AVX2
// does the same integer rounding 8 lanes at a time (cvt_bf16x8_avx2). Also the non-temporal
// stores of big results, bfloat16 and float32, and the last-level cache size the latter test
// against (Notes [Streaming bf16 stores] and [Streaming float stores]).
#pragma once
#include <cstdint>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
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

#if defined(__AVX2__)
// 8 floats to 8 bfloat16 bit patterns in the low halves of 32-bit lanes, as BFloat16::from_float.
[[gnu::always_inline]] inline __m256i cvt_bf16x8_avx2(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd));
  const __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));  // NaN: keep, make quiet
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}
// 16 floats to 16 bfloat16 bit patterns.
[[gnu::always_inline]] inline __m256i cvt_bf16x16_any(const float* src) {
#if defined(TB_HAVE_AVX512BF16_STORE)
  return cvt_bf16x16(_mm512_loadu_ps(src));
#else
  const __m256i lo = cvt_bf16x8_avx2(_mm256_loadu_ps(src)), hi = cvt_bf16x8_avx2(_mm256_loadu_ps(src + 8));
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);  // pack works per 128-bit half
#endif
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
#elif defined(__AVX2__)
  // Without vcvtneps2bf16, the rounding in integer lanes: GCC's vectorisation of the scalar loop
  // below packs, permutes and blends about twice as much (layer_norm/bfloat16/rows' last pass, a
  // float row then this store, against the scalar conversion per element: 1.55 -> 0.96 ms for
  // 4M elements on one Zen 3 core, microbenchmark).
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), cvt_bf16x16_any(src + i));
#endif
  for (; i < n; ++i) dst[i] = core::BFloat16(src[i]);
}

// Note [Streaming bf16 stores]
// A contiguous bfloat16 result of at least kStreamBytes per thread cannot stay in cache for its
// reader (L2 is 512 KiB-2 MiB per core here), so storing it through the cache only costs a read
// of each line before it is overwritten: a third more memory traffic for a binary op like mul.
// Such results are written with non-temporal stores instead, which skip that read.
inline constexpr int64_t kStreamBytes = int64_t(8) << 20;

// Note [Streaming float stores]
// A float32 result streams only when its operands together (result and inputs) are at least 1.5
// times the last-level cache, glibc's rule for memcpy's non-temporal stores (a copy of 3/4 of the
// cache): then the cache cannot keep them for a reader anyway, and writing the result without
// first reading its lines saves a quarter to a third of the traffic. A 32 MiB L3 (the Zen 4 CI
// machines) holds a unary (4096, 1024) float32 op's 32 MiB, and streaming its result made
// neg/float32/sweep slower (0.23-0.24 -> 0.31-0.60 ms at two threads), while add/float32/16M
// (192 MiB) went 3.4-5.0 -> 2.3-3.6 ms and sub and div of (4096, 1024) (48 MiB) 1.03-1.29x ->
// 1.44-1.99x LibTorch (engine/ops/README.md, "Streaming float32 results past the last-level
// cache"). The test is on the whole operation, not a run times the threads: a loop that runs on
// one thread (remainder's) has one run of all of it, and a 16 MiB result of one run of 8 MiB a
// thread, streamed, took remainder/float32/sweep from 2.8 to 3.3-3.5 ms.
//
// The size of the largest cache CPU 0 sees, from sysfs (one instance of it: in a VM, sysconf gave
// the host socket's 320 MiB L3 where sysfs gives the 32 MiB the VM shares); 32 MiB where sysfs
// says nothing.
int64_t last_level_cache_bytes();
inline bool stream_float_result(int64_t run_bytes, int64_t footprint_bytes) {
  return run_bytes >= kStreamBytes && 2 * footprint_bytes >= 3 * last_level_cache_bytes();
}

#if defined(__AVX2__)
inline constexpr bool kHaveStreamingStore = true;
// store_bf16 with non-temporal stores (Note [Streaming bf16 stores]); dst 32-byte aligned. The
// caller issues stream_fence() before anything else may read dst.
inline void store_bf16_stream(core::BFloat16* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), cvt_bf16x16_any(src + i));
  store_bf16(dst + i, src + i, n - i);
}
inline void stream_fence() { _mm_sfence(); }
// n floats from src to dst with non-temporal stores; dst aligned to the vector (64 bytes with
// AVX-512, else 32). The caller fences.
inline void stream_floats(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
#else
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
#endif
  for (; i < n; ++i) dst[i] = src[i];
}
#if defined(__AVX512F__)
inline constexpr int64_t kStreamAlign = 64;  // stream_floats' store width
#else
inline constexpr int64_t kStreamAlign = 32;
#endif
#else
inline constexpr bool kHaveStreamingStore = false;
inline void store_bf16_stream(core::BFloat16* dst, const float* src, int64_t n) { store_bf16(dst, src, n); }
inline void stream_fence() {}
inline void stream_floats(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
inline constexpr int64_t kStreamAlign = 4;
#endif

}  // namespace tb::ops::cpu
