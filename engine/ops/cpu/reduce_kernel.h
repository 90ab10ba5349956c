// The reduction engine of the reduce and nn_norm families: a contiguous input seen as
// (O, R, I) is reduced over R into (O, I). Summation is pairwise (blocks of kBlock elements
// summed into kLanes independent accumulators, then block results combined as a binary tree),
// so float32 error grows like log(n), not n, and matches LibTorch's cascade sum within float32
// tolerances at 16M elements. This is not an op: reduce.cpp and nn_norm.cpp build ops on it.
//
// An Op provides, for an accumulator type Acc and input element type T:
//   Acc init();  Acc step(Acc a, T v, Acc c);  Acc merge(Acc a, Acc b);  Acc finish(Acc a, Acc c, int64_t n)
// where c is the per-output "center" (kCentered: the mean for var, the max for logsumexp; else 0)
// and n is R.
#pragma once
#include <algorithm>
#include <bit>
#include <concepts>
#include <cmath>
#include <cstdint>
#include <memory>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#include <vector>

#include "engine/ops/cpu/vec_math.h"
#include "engine/tensor/iterator.h"
#include "engine/tensor/tensor.h"

namespace tb::ops::cpu {

inline constexpr int64_t kLanes = 32;      // independent accumulators: several SIMD registers
inline constexpr int64_t kBlock = 512;     // leaf of the pairwise tree along a contiguous row
inline constexpr int64_t kRowLeaf = 16;    // leaf of the pairwise tree across rows (I > 1)
inline constexpr int64_t kColTile = 1024;  // columns handled together when I > 1

// Accumulator type of sums: float for bf16/f16/f32, double for f64, int64 for integers and bool.
template <typename T>
struct sum_acc {
  using type = int64_t;
};
template <>
struct sum_acc<float> {
  using type = float;
};
template <>
struct sum_acc<double> {
  using type = double;
};
template <>
struct sum_acc<core::BFloat16> {
  using type = float;
};
template <>
struct sum_acc<core::Half> {
  using type = float;
};
template <typename T>
using sum_acc_t = typename sum_acc<T>::type;

template <typename T>
inline auto load(T v) {
  return static_cast<core::opmath_t<T>>(v);
}
template <typename T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Float lanes for ops that can run on whole vectors over float32 and bfloat16 (sum; max and min
// below): 4 independent 16-lane accumulators keep the adders busy, and a leaf of kVecBlock
// elements amortises the horizontal merge. Each lane sums kVecBlock / 64 values before the
// pairwise tree takes over.
using vfloat = float __attribute__((vector_size(64)));
inline constexpr int64_t kVecBlock = 2048;
template <typename Op>
concept VectorFloatOp = requires(const Op& op, vfloat v) {
  { op.vinit() } -> std::same_as<vfloat>;
  { op.vstep(v, v) } -> std::same_as<vfloat>;   // fold 16 elements into the accumulators
  { op.vmerge(v, v) } -> std::same_as<vfloat>;  // combine two accumulators
};

// Selections (max, min) run on 8-lane vectors instead: GCC splits arithmetic on 64-byte vectors
// into two AVX2 ops, but below AVX-512 it lowers their comparisons and `?:` lane by lane, with
// branches (max over 16M floats took 44 ms on Zen 3, ten times sum's 4.3 ms); on 8 lanes they
// are one vcmpps and one vblendvps. The result does not depend on the lanes' grouping.
using vhalf = float __attribute__((vector_size(32)));
template <typename Op>
concept HalfVectorOp = requires(const Op& op, vhalf v) {
  { op.hstep(v, v) } -> std::same_as<vhalf>;   // fold 8 elements into an accumulator
  { op.hmerge(v, v) } -> std::same_as<vhalf>;  // combine two accumulators
};

// 16 consecutive elements as float lanes: float32 as is, bfloat16 widened (its bits are the top
// half of a float32, so widening is a shift).
inline vfloat load16(const float* p) {
  vfloat v;
  __builtin_memcpy(&v, p, sizeof(vfloat));
  return v;
}
inline vfloat load16(const core::BFloat16* p) {
  using vu16 = uint16_t __attribute__((vector_size(32)));
  using vu32 = uint32_t __attribute__((vector_size(64)));
  vu16 h;
  __builtin_memcpy(&h, p, sizeof(vu16));
  return std::bit_cast<vfloat>(__builtin_convertvector(h, vu32) << 16);
}

// 8 consecutive elements as float lanes (see load16).
inline vhalf load8(const float* p) {
  vhalf v;
  __builtin_memcpy(&v, p, sizeof(vhalf));
  return v;
}
inline vhalf load8(const core::BFloat16* p) {
  using vu16 = uint16_t __attribute__((vector_size(16)));
  using vu32 = uint32_t __attribute__((vector_size(32)));
  vu16 h;
  __builtin_memcpy(&h, p, sizeof(vu16));
  return std::bit_cast<vhalf>(__builtin_convertvector(h, vu32) << 16);
}

// 16 consecutive elements as two 8-lane vectors: float32 as two loads; bfloat16 from one 32-byte
// load, the even elements by a shift and the odd ones by a mask (each 32-bit lane holds two
// elements). For ops whose result does not depend on which lane holds which element (sums,
// selections). On AVX2 this is 1 load and 2 integer ops per 16 elements where load8's widening
// takes 2 loads, 2 vpmovzxwd and 2 shifts: sum/bfloat16/16M on one Zen 3 core, 2.0 -> 1.4 ms
// (microbenchmark), the speed of float32 per byte.
inline void load16_split(const float* p, vhalf& a, vhalf& b) {
  a = load8(p);
  b = load8(p + 8);
}
inline void load16_split(const core::BFloat16* p, vhalf& even, vhalf& odd) {
  using vu32 = uint32_t __attribute__((vector_size(32)));
  vu32 h;
  __builtin_memcpy(&h, p, sizeof(vu32));
  even = std::bit_cast<vhalf>(h << 16);
  odd = std::bit_cast<vhalf>(h & 0xFFFF0000u);
}

// 32 consecutive bfloat16 elements as two 16-lane vectors from one 64-byte load (load16_split's
// 16-lane form): 1 load and 2 integer ops per 32 elements where load16 takes 2 loads, 2 vpmovzxwd
// and 2 shifts. With the 2 KiB prefetch of the 8-lane loop, sum/bfloat16/16M on an Emerald Rapids
// VM (alternated binaries, 2 pairs): one thread 1.56 -> 1.14-1.22 ms, two 0.79-0.80 -> 0.60-0.68
// ms; LibTorch 1.43-1.66 / 0.79-0.86 ms.
inline void load32_split(const core::BFloat16* p, vfloat& even, vfloat& odd) {
  using vu32 = uint32_t __attribute__((vector_size(64)));
  vu32 h;
  __builtin_memcpy(&h, p, sizeof(vu32));
  even = std::bit_cast<vfloat>(h << 16);
  odd = std::bit_cast<vfloat>(h & 0xFFFF0000u);
}

// Four accumulators of V's lanes over p[0, n), folded by step and combined by merge, then the
// lanes in order and the tail by op.step (c: the center of centered ops, else 0).
template <typename V, typename T, typename Op, typename Step, typename Merge>
float lanes_leaf(const T* p, int64_t n, const Op& op, V init, Step step, Merge merge, float c = 0.0f) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V a0 = init, a1 = init, a2 = init, a3 = init;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    if constexpr (L == 16 && std::is_same_v<T, core::BFloat16>) {
      __builtin_prefetch(reinterpret_cast<const char*>(p + i) + 2048);
      V v0, v1, v2, v3;
      load32_split(p + i, v0, v1);
      load32_split(p + i + 32, v2, v3);
      a0 = step(a0, v0), a1 = step(a1, v1), a2 = step(a2, v2), a3 = step(a3, v3);
    } else if constexpr (L == 16) {
      a0 = step(a0, load16(p + i));
      a1 = step(a1, load16(p + i + L));
      a2 = step(a2, load16(p + i + 2 * L));
      a3 = step(a3, load16(p + i + 3 * L));
    } else {
      if constexpr (std::is_same_v<T, core::BFloat16>) {
        // The cache line 2 KiB ahead (this iteration reads one line): the hardware prefetcher
        // alone leaves this loop waiting (sum/bfloat16/16M on one Zen 3 core, microbenchmark:
        // 1.50 -> 1.30 ms; 1 and 8 KiB ahead about as good, 4 KiB worse).
        __builtin_prefetch(reinterpret_cast<const char*>(p + i) + 2048);
      }
      V v0, v1, v2, v3;
      load16_split(p + i, v0, v1);
      load16_split(p + i + 16, v2, v3);
      a0 = step(a0, v0), a1 = step(a1, v1), a2 = step(a2, v2), a3 = step(a3, v3);
    }
  }
  const V v = merge(merge(a0, a1), merge(a2, a3));
  float r = op.init();
  for (int64_t k = 0; k < L; ++k) r = op.merge(r, v[k]);
  for (; i < n; ++i) r = op.step(r, p[i], c);
  return r;
}

// Centered sums on 8-lane vectors (layer_norm's sum(x - c) and sum((x - c)^2), nn_norm.cpp):
// the plain kLanes loop of reduce_run is vectorised by GCC with load8's widening and ran at
// half this speed on Zen 3 (both passes over a (4096, 1024) bfloat16 input: 0.97 -> 0.44 ms,
// microbenchmark, one core).
template <typename Op>
concept CenteredHalfOp = requires(const Op& op, vhalf v) {
  { op.hstep_c(v, v, v) } -> std::same_as<vhalf>;  // fold 8 elements centered on the third
  { op.hmerge(v, v) } -> std::same_as<vhalf>;      // combine two accumulators
};

// Selections (see select_leaf below).
template <typename Op>
concept SelectOp = HalfVectorOp<Op> && requires {
  { Op::kSelectMax } -> std::convertible_to<bool>;  // max (true) or min
  { Op::kSelectAbs } -> std::convertible_to<bool>;  // of |x| (norm's inf orders)
};

#if defined(__AVX512F__)
// Selections on AVX-512 (max and min, of x or of |x|): vmaxps/vminps into four 16-lane
// accumulators and one unordered compare per two vectors noting any NaN: 3 instructions per 16
// elements where the `?:` lanes above take 4 per 8 (max over 16M bfloat16 values: 5.0 -> 3.8 ms on
// one core, the speed of sum, i.e. the read bandwidth). vmaxps alone does not propagate NaN, so a
// leaf that holds one is redone by the op's own lane code (hstep), whose NaN rule then applies.
// The intrinsics used are the masked forms or ones without a pass-through operand: GCC 12 flags
// the unmasked ones' _mm512_undefined_* as maybe-uninitialized when inlined (-Werror here).
inline __m512 load16_ps(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16_ps(const core::BFloat16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(__mmask16(-1), _mm512_maskz_cvtepu16_epi32(__mmask16(-1), h), 16));
}
// The selection of p[0, n) into out, or false when p holds a NaN.
template <typename T, typename Op>
bool select_leaf(const T* p, int64_t n, const Op& op, float& out) {
  constexpr bool kMax = Op::kSelectMax, kAbs = Op::kSelectAbs;
  constexpr __mmask16 all = __mmask16(-1);
  auto sel = [](__m512 a, __m512 v) {
    return kMax ? _mm512_mask_max_ps(a, all, a, v) : _mm512_mask_min_ps(a, all, a, v);
  };
  auto get = [](const T* q) {
    const __m512 v = load16_ps(q);
    return kAbs ? _mm512_abs_ps(v) : v;
  };
  __m512 a0 = _mm512_set1_ps(float(op.init())), a1 = a0, a2 = a0, a3 = a0;
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 v0 = get(p + i), v1 = get(p + i + 16), v2 = get(p + i + 32), v3 = get(p + i + 48);
    nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q);
    a0 = sel(a0, v0), a1 = sel(a1, v1), a2 = sel(a2, v2), a3 = sel(a3, v3);
  }
  if (nan) return false;
  float lanes[16];
  _mm512_storeu_ps(lanes, sel(sel(a0, a1), sel(a2, a3)));
  float r = lanes[0];
  for (int k = 1; k < 16; ++k) r = (kMax ? lanes[k] > r : lanes[k] < r) ? lanes[k] : r;
  for (; i < n; ++i) {
    float v = float(p[i]);
    if (v != v) return false;
    if (kAbs) v = std::fabs(v);
    r = (kMax ? v > r : v < r) ? v : r;
  }
  out = r;
  return true;
}
#elif defined(__AVX2__)
// The same selection leaf on AVX2 (8 lanes): vmaxps/vminps into four accumulators and one
// unordered compare per two vectors noting any NaN, where the portable `?:` lanes take a compare,
// a NaN compare, an or and a blend per 8 elements. bfloat16 is widened 16 at a time from one
// 32-byte load: a shift gives the even elements as floats, a mask the odd ones (a selection does
// not care which lane holds which element).
inline void load16_pair(const float* p, __m256& a, __m256& b) {
  a = _mm256_loadu_ps(p);
  b = _mm256_loadu_ps(p + 8);
}
inline void load16_pair(const core::BFloat16* p, __m256& a, __m256& b) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  a = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  b = _mm256_castsi256_ps(_mm256_and_si256(h, _mm256_set1_epi32(int32_t(0xFFFF0000u))));
}
// The selection of p[0, n) into out, or false when p holds a NaN.
template <typename T, typename Op>
bool select_leaf(const T* p, int64_t n, const Op& op, float& out) {
  constexpr bool kMax = Op::kSelectMax, kAbs = Op::kSelectAbs;
  auto sel = [](__m256 a, __m256 v) { return kMax ? _mm256_max_ps(a, v) : _mm256_min_ps(a, v); };
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 a0 = _mm256_set1_ps(float(op.init())), a1 = a0, a2 = a0, a3 = a0, nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v0, v1, v2, v3;
    load16_pair(p + i, v0, v1);
    load16_pair(p + i + 16, v2, v3);
    if (kAbs) {
      v0 = _mm256_and_ps(v0, abs_mask), v1 = _mm256_and_ps(v1, abs_mask);
      v2 = _mm256_and_ps(v2, abs_mask), v3 = _mm256_and_ps(v3, abs_mask);
    }
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    a0 = sel(a0, v0), a1 = sel(a1, v1), a2 = sel(a2, v2), a3 = sel(a3, v3);
  }
  if (_mm256_movemask_ps(nan)) return false;
  float lanes[8];
  _mm256_storeu_ps(lanes, sel(sel(a0, a1), sel(a2, a3)));
  float r = lanes[0];
  for (int k = 1; k < 8; ++k) r = (kMax ? lanes[k] > r : lanes[k] < r) ? lanes[k] : r;
  for (; i < n; ++i) {
    float v = float(p[i]);
    if (v != v) return false;
    if (kAbs) v = std::fabs(v);
    r = (kMax ? v > r : v < r) ? v : r;
  }
  out = r;
  return true;
}
#endif

template <typename T, typename Op>
float vector_leaf(const T* p, int64_t n, const Op& op) {
#if defined(__AVX512F__) || defined(__AVX2__)
  if constexpr (SelectOp<Op>) {
    float r;
    if (select_leaf(p, n, op, r)) return r;
  }
#endif
  // Ops with both forms (sum) take 16 lanes on AVX-512 and 8 below it: on AVX2, GCC keeps the
  // 64-byte accumulators of the 16-lane leaf partly in memory.
#if defined(__AVX512F__)
  constexpr bool kHalf = HalfVectorOp<Op> && !VectorFloatOp<Op>;
#else
  constexpr bool kHalf = HalfVectorOp<Op>;
#endif
  if constexpr (kHalf) {
    return lanes_leaf(
        p, n, op, vhalf{} + float(op.init()), [&](vhalf a, vhalf v) { return op.hstep(a, v); },
        [&](vhalf a, vhalf b) { return op.hmerge(a, b); });
  } else {
    return lanes_leaf(
        p, n, op, op.vinit(), [&](vfloat a, vfloat v) { return op.vstep(a, v); },
        [&](vfloat a, vfloat b) { return op.vmerge(a, b); });
  }
}

// One contiguous run p[0, n): pairwise over blocks, kLanes accumulators inside a block.
template <bool kCentered, typename Acc, typename T, typename Op>
Acc reduce_run(const T* p, int64_t n, Acc c, const Op& op) {
  if constexpr (!kCentered &&
                (std::is_same_v<T, float> || std::is_same_v<T, core::BFloat16>)&&std::is_same_v<Acc, float> &&
                (VectorFloatOp<Op> || HalfVectorOp<Op>)) {
    if (n <= kVecBlock) return vector_leaf(p, n, op);
    const int64_t h = (n / 2 + kVecBlock - 1) / kVecBlock * kVecBlock;
    // Left half first, in its own statement: argument evaluation order is unspecified (GCC goes
    // right to left), and walking memory backwards defeats the hardware prefetcher (2x slower).
    const Acc left = reduce_run<kCentered>(p, h, c, op);
    return op.merge(left, reduce_run<kCentered>(p + h, n - h, c, op));
  }
  if constexpr (kCentered &&
                (std::is_same_v<T, float> || std::is_same_v<T, core::BFloat16>)&&std::is_same_v<Acc, float> &&
                CenteredHalfOp<Op>) {
    if (n <= kVecBlock) {
      const vhalf cv = vhalf{} + c;
      return lanes_leaf(
          p, n, op, vhalf{} + float(op.init()), [&](vhalf a, vhalf v) { return op.hstep_c(a, v, cv); },
          [&](vhalf a, vhalf b) { return op.hmerge(a, b); }, c);
    }
    const int64_t h = (n / 2 + kVecBlock - 1) / kVecBlock * kVecBlock;
    const Acc left = reduce_run<kCentered>(p, h, c, op);  // left first: see above
    return op.merge(left, reduce_run<kCentered>(p + h, n - h, c, op));
  }
  if (n > kBlock) {
    const int64_t h = (n / 2 + kBlock - 1) / kBlock * kBlock;
    const Acc left = reduce_run<kCentered>(p, h, c, op);  // left first: see above
    return op.merge(left, reduce_run<kCentered>(p + h, n - h, c, op));
  }
  Acc acc[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) acc[k] = op.init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) acc[k] = op.step(acc[k], p[i + k], c);
  for (int64_t k = 0; i < n; ++i, ++k) acc[k] = op.step(acc[k], p[i], c);
  for (int64_t w = kLanes / 2; w > 0; w /= 2)
    for (int64_t k = 0; k < w; ++k) acc[k] = op.merge(acc[k], acc[k + w]);
  return acc[0];
}

// Columns [0, w) of R rows (row stride I): out[j] = reduce_r p[r * I + j]; pairwise over rows.
// c: w centers (or null when !kCentered); scratch: room for w * (depth) accumulators.
template <bool kCentered, typename Acc, typename T, typename Op>
void reduce_cols(const T* p, int64_t R, int64_t I, int64_t w, const Acc* c, Acc* out, Acc* scratch, const Op& op) {
  if (R > kRowLeaf) {
    const int64_t h = (R / 2 + kRowLeaf - 1) / kRowLeaf * kRowLeaf;
    reduce_cols<kCentered>(p, h, I, w, c, out, scratch, op);
    reduce_cols<kCentered>(p + h * I, R - h, I, w, c, scratch, scratch + w, op);
    for (int64_t j = 0; j < w; ++j) out[j] = op.merge(out[j], scratch[j]);
    return;
  }
  int64_t j0 = 0;
#if !defined(__AVX512F__)
  // Below AVX-512, GCC keeps the 64-byte accumulators of the loop after this one on the stack
  // (as in vector_leaf), so ops with 8-lane forms (sum) take 32 columns in four 8-lane ones.
  if constexpr (!kCentered &&
                (std::is_same_v<T, float> || std::is_same_v<T, core::BFloat16>)&&std::is_same_v<Acc, float> &&
                VectorFloatOp<Op> && HalfVectorOp<Op>) {
    for (; j0 + 32 <= w; j0 += 32) {
      vhalf a0 = vhalf{} + float(op.init()), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = p + r * I + j0;
        a0 = op.hstep(a0, load8(row)), a1 = op.hstep(a1, load8(row + 8));
        a2 = op.hstep(a2, load8(row + 16)), a3 = op.hstep(a3, load8(row + 24));
      }
      __builtin_memcpy(out + j0, &a0, sizeof(vhalf));
      __builtin_memcpy(out + j0 + 8, &a1, sizeof(vhalf));
      __builtin_memcpy(out + j0 + 16, &a2, sizeof(vhalf));
      __builtin_memcpy(out + j0 + 24, &a3, sizeof(vhalf));
    }
  }
#endif
  if constexpr (!kCentered &&
                (std::is_same_v<T, float> || std::is_same_v<T, core::BFloat16>)&&std::is_same_v<Acc, float> &&
                VectorFloatOp<Op>) {
    // 64 columns at a time in four vector accumulators kept in registers down the leaf's rows,
    // stored once: the scalar loop below loads and stores out[j] for every row. Same order of
    // additions per column, so the same sums.
    for (; j0 + 64 <= w; j0 += 64) {
      vfloat a0 = op.vinit(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t r = 0; r < R; ++r) {
        const T* row = p + r * I + j0;
        a0 = op.vstep(a0, load16(row)), a1 = op.vstep(a1, load16(row + 16));
        a2 = op.vstep(a2, load16(row + 32)), a3 = op.vstep(a3, load16(row + 48));
      }
      __builtin_memcpy(out + j0, &a0, sizeof(vfloat));
      __builtin_memcpy(out + j0 + 16, &a1, sizeof(vfloat));
      __builtin_memcpy(out + j0 + 32, &a2, sizeof(vfloat));
      __builtin_memcpy(out + j0 + 48, &a3, sizeof(vfloat));
    }
  }
  // The columns left (all of them for other ops): out[j] updated row by row.
  p += j0, out += j0, w -= j0;
  for (int64_t j = 0; j < w; ++j) out[j] = op.init();
  for (int64_t r = 0; r < R; ++r) {
    const T* row = p + r * I;
    if constexpr (kCentered) {
      for (int64_t j = 0; j < w; ++j) out[j] = op.step(out[j], row[j], c[j]);
    } else {
      for (int64_t j = 0; j < w; ++j) out[j] = op.step(out[j], row[j], Acc());
    }
  }
}

// x: (O, R, I) contiguous; center: (O, I) or null. Returns the finished (O * I) accumulators,
// written into res (a contiguous tensor of dtype_of<Acc> with O * I elements).
template <bool kCentered, typename Acc, typename T, typename Op>
void reduce_oi(const T* x, int64_t O, int64_t R, int64_t I, const Acc* center, Acc* res, const Op& op) {
  const int64_t nout = O * I;
  if (nout == 0) return;
  const int nt = num_threads();
  const bool par = nt > 1 && O * R * I >= kParallelGrain;
  if (I == 1) {
    // Rows: one task per row, or (few rows) each row split across the threads.
    const int64_t split = (par && O < nt) ? std::max<int64_t>(1, std::min<int64_t>(nt, R / kBlock)) : 1;
    if (split == 1) {
      // Each task finishes its own output: a serial pass over O partial results after the
      // parallel loop, half of them in the other core's cache, cost sum over (4096, 1024) rows
      // 7% of its time on Zen 4 (perf).
#pragma omp parallel for num_threads(par ? nt : 1) schedule(static)
      for (int64_t o = 0; o < O; ++o) {
        const Acc c = kCentered ? center[o] : Acc();
        res[o] = op.finish(reduce_run<kCentered>(x + o * R, R, c, op), c, R);
      }
      return;
    }
    std::unique_ptr<Acc[]> part(new Acc[size_t(O * split)]);  // not vector: vector<bool> packs bits
    const int64_t per = (R + split - 1) / split;
    const int64_t tasks = O * split;
#pragma omp parallel for num_threads(par ? nt : 1) schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / split, s = t % split;
      const int64_t b = std::min(R, s * per), e = std::min(R, b + per);
      const Acc c = kCentered ? center[o] : Acc();
      part[size_t(t)] = reduce_run<kCentered>(x + o * R + b, e - b, c, op);
    }
    for (int64_t o = 0; o < O; ++o) {
      Acc a = part[size_t(o * split)];
      for (int64_t s = 1; s < split; ++s) a = op.merge(a, part[size_t(o * split + s)]);
      res[o] = op.finish(a, kCentered ? center[o] : Acc(), R);
    }
    return;
  }
  // Columns: vectorised across I in tiles; rows split across threads only when tiles are few.
  const int64_t ntile = (I + kColTile - 1) / kColTile;
  const int64_t split = (par && O * ntile < nt && R >= 2 * kRowLeaf) ? nt : 1;
  const int64_t per = (R + split - 1) / split;
  int depth = 2;
  for (int64_t r = per; r > kRowLeaf; r = (r + 1) / 2) ++depth;
  // One split: each task reduces and finishes its tile in res itself (as the rows above).
  std::unique_ptr<Acc[]> part(split > 1 ? new Acc[size_t(split * nout)] : nullptr);
  const int64_t tasks = O * ntile * split;
#pragma omp parallel num_threads(par ? nt : 1)
  {
    std::unique_ptr<Acc[]> scratch(new Acc[size_t(kColTile * depth)]);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t s = t % split, tile = (t / split) % ntile, o = t / (split * ntile);
      const int64_t i0 = tile * kColTile, w = std::min(kColTile, I - i0);
      const int64_t b = std::min(R, s * per), e = std::min(R, b + per);
      const Acc* c = kCentered ? center + o * I + i0 : nullptr;
      Acc* out = split > 1 ? part.get() + s * nout + o * I + i0 : res + o * I + i0;
      reduce_cols<kCentered>(x + (o * R + b) * I + i0, e - b, I, w, c, out, scratch.get(), op);
      if (split == 1)
        for (int64_t j = 0; j < w; ++j) out[j] = op.finish(out[j], kCentered ? c[j] : Acc(), R);
    }
  }
  if (split == 1) return;
  for (int64_t k = 0; k < nout; ++k) {
    Acc a = part[size_t(k)];
    for (int64_t s = 1; s < split; ++s) a = op.merge(a, part[size_t(s * nout + k)]);
    res[k] = op.finish(a, kCentered ? center[k] : Acc(), R);
  }
}

}  // namespace tb::ops::cpu
