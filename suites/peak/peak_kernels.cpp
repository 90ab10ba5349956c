// See peak_kernels.h. The loops keep every accumulator in a register (16 chains, unrolled); the
// inputs are loaded once per call, so a call touches memory only at its start and end.
#include "suites/peak/peak_kernels.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tb::suites::peak {
namespace {

// CPUID leaf 7: EBX bit 16 avx512f; EDX bit 22 amx-bf16, bit 24 amx-tile; sub-leaf 1 EAX bit 5
// avx512_bf16.
bool cpuid_bit(unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(7, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}

// The OS saves the AVX-512 state (XCR0 bits 1, 2, 5, 6, 7): without it the instructions fault.
bool os_saves_avx512() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xE6u) == 0xE6u;
}

}  // namespace

std::string fma_unsupported() {
  if (!cpuid_bit(0, 1, 16)) return "the CPU lacks avx512f";
  if (!os_saves_avx512()) return "the OS does not enable the AVX-512 state (XCR0)";
  return "";
}

std::string bf16_dot_unsupported() {
  if (std::string why = fma_unsupported(); !why.empty()) return why;
  if (!cpuid_bit(1, 0, 5)) return "the CPU lacks avx512_bf16";
  return "";
}

std::string amx_unsupported() {
  if (!cpuid_bit(0, 3, 24) || !cpuid_bit(0, 3, 22)) return "the CPU lacks amx_tile/amx_bf16";
  // Linux >= 5.16 hands out the tile data state (XFEATURE_XTILEDATA = 18) only on request; the
  // grant is for the whole process, so asking again is harmless.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return std::string("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): ") + std::strerror(errno);
  return "";
}

__attribute__((target("avx512f"))) void fma_kernel(const FmaData& d, int64_t rounds, float (&out)[kChains][16]) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_load_ps(d.acc0[c]);
  const __m512 a = _mm512_load_ps(d.a), b = _mm512_load_ps(d.b);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  for (int c = 0; c < kChains; ++c) _mm512_store_ps(out[c], acc[c]);
}

__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_kernel(const Bf16DotData& d, int64_t rounds,
                                                                   float (&out)[kChains][16]) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_load_ps(d.acc0[c]);
  const __m512bh a = (__m512bh)_mm512_load_si512(d.a), b = (__m512bh)_mm512_load_si512(d.b);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  for (int c = 0; c < kChains; ++c) _mm512_store_ps(out[c], acc[c]);
}

namespace {
// LDTILECFG's 64-byte operand: palette 1, then per tile its bytes per row and its rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);
}  // namespace

__attribute__((target("amx-tile,amx-bf16"))) void amx_kernel(const AmxData& d, int64_t rounds,
                                                             float (&out)[kAmxTiles][16][16]) {
  static_assert(kAmxTiles == 4, "the tile numbers below are immediates");
  TileConfig cfg;
  for (int t = 0; t < 6; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;  // every tile 16 rows of 64 bytes
  _tile_loadconfig(&cfg);
  _tile_loadd(0, d.c0[0], 64);
  _tile_loadd(1, d.c0[1], 64);
  _tile_loadd(2, d.c0[2], 64);
  _tile_loadd(3, d.c0[3], 64);
  _tile_loadd(4, d.a, 64);
  _tile_loadd(5, d.b, 64);
  for (int64_t r = 0; r < rounds; ++r) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  _tile_stored(0, out[0], 64);
  _tile_stored(1, out[1], 64);
  _tile_stored(2, out[2], 64);
  _tile_stored(3, out[3], 64);
  _tile_release();
}

}  // namespace tb::suites::peak
