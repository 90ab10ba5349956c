// The register-resident kernels of the peak suite (suites/peak/peak_bench.h): each call starts its
// accumulators from fixed values, runs a fixed number of rounds of one instruction on inputs that
// never change, and stores the accumulators, so every call's output can be compared bit for bit
// with a scalar-computed expectation (the compiler cannot drop the work, and a broken kernel fails
// the case). Each is compiled for its ISA by a target attribute; ask the *_unsupported functions
// before calling one.
#pragma once
#include <cstdint>
#include <string>

namespace tb::suites::peak {

// Independent accumulator chains per kernel: enough to cover the instruction's latency times
// its throughput (FMA: 4 cycles x 2 per cycle = 8 needed).
inline constexpr int kChains = 16;
inline constexpr int kAmxTiles = 4;  // C tiles; tmm4 holds A and tmm5 B

// Empty when the kernel can run here, else why not ("the CPU lacks avx512_bf16").
std::string fma_unsupported();
std::string bf16_dot_unsupported();
std::string amx_unsupported();  // also asks Linux for the tile data state (arch_prctl)

// acc[c][l] <- fma(acc[c][l], a[l], b[l]), `rounds` times: kChains zmm FMAs per round.
struct FmaData {
  alignas(64) float acc0[kChains][16];
  alignas(64) float a[16];
  alignas(64) float b[16];
};
void fma_kernel(const FmaData& d, int64_t rounds, float (&out)[kChains][16]);

// acc[c] <- vdpbf16ps(acc[c], a, b), `rounds` times: each lane l adds a[2l]*b[2l] + a[2l+1]*b[2l+1]
// (bf16 pairs, the bits in uint16).
struct Bf16DotData {
  alignas(64) float acc0[kChains][16];
  alignas(64) uint16_t a[32];
  alignas(64) uint16_t b[32];
};
void bf16_dot_kernel(const Bf16DotData& d, int64_t rounds, float (&out)[kChains][16]);

// C[t] <- tdpbf16ps(C[t], A, B) for t < kAmxTiles, `rounds` times: C 16x16 fp32, A 16x32 bf16,
// B 16 rows of 16 bf16 pairs (the VNNI layout: B[k][2n+j] is element (2k+j, n) of the 32x16 B).
struct AmxData {
  alignas(64) float c0[kAmxTiles][16][16];
  alignas(64) uint16_t a[16][32];
  alignas(64) uint16_t b[16][32];
};
void amx_kernel(const AmxData& d, int64_t rounds, float (&out)[kAmxTiles][16][16]);

}  // namespace tb::suites::peak
