// Note [Vector math from SLEEF]
// exp, expm1, log, log1p, sin and cos went through libm one element at a time: an out-of-line
// call the compiler cannot vectorise, 7-14x slower than LibTorch (exp of 4M floats: 12.5 ms
// against 1.7 ms at one thread). LibTorch's vector kernels call SLEEF, a vectorised math library
// with a 1.0-ulp bound (its `_u10` functions); Debian packages it (libsleef-dev), so the engine
// calls the same functions, on whole registers: AVX-512 where the build targets it, else AVX2
// (Zen 3), else libm. Every element goes through the vector form, the last partial register
// padded, so an element's result never depends on where it sits in a tensor. Float exp, log, sin,
// cos, pow and fmod on AVX-512 are the exception: our own, faster than Debian's SLEEF in the same
// accuracy class (Note [exp and log of float on AVX-512], Note [sin and cos of float on AVX-512],
// Note [pow of float on AVX-512], Note [fmod of float on AVX-512]). tanh takes this path on
// AVX-512 alone (Note [tanh of float on AVX-512]; elsewhere ew::tanh_fast).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>
#endif

#include "engine/core/dtype.h"
#include "engine/ops/cpu/bf16_convert.h"
#include "engine/tensor/iterator.h"

namespace tb::ops::cpu {

enum class VecFn { Exp, Expm1, Log, Log1p, Sin, Cos, Tanh, Sigmoid, Silu };
enum class VecFn2 { Pow, Fmod };  // pow at 1.0 ulp; fmod exact

namespace sleef_detail {

// Note [log1p of huge x]
// SLEEF's log1p is bounded for x up to 1e38 (float) and 1e307 (double) only: past them 3.5.1
// returns inf (log1p(1.0008e38f) = inf, found by VecMath.Float32BitPatternsWithinOneUlp). There
// 1 + x rounds to x in the type, so log(x) is log1p(x) to the last place, and those lanes take it.
inline constexpr float kLog1pMaxF = 1e38f;
inline constexpr double kLog1pMaxD = 1e307;

template <VecFn F, typename M>
M scalar(M x) {
  if constexpr (F == VecFn::Exp) return std::exp(x);
  else if constexpr (F == VecFn::Expm1) return std::expm1(x);
  else if constexpr (F == VecFn::Log) return std::log(x);
  else if constexpr (F == VecFn::Log1p) return std::log1p(x);
  else if constexpr (F == VecFn::Sin) return std::sin(x);
  else if constexpr (F == VecFn::Cos) return std::cos(x);
  else if constexpr (F == VecFn::Tanh) return std::tanh(x);
  else {  // sigmoid and silu = x sigmoid(x): e^x / (1 + e^x) for x < 0 (no overflow of e^-x)
    const M e = std::exp(-std::fabs(x));
    const M s = (x < M(0) ? e : M(1)) / (M(1) + e);
    return F == VecFn::Sigmoid ? s : x * s;
  }
}

template <VecFn2 F, typename M>
M scalar2(M a, M b) {
  if constexpr (F == VecFn2::Pow) return std::pow(a, b);
  else return std::fmod(a, b);
}

#if defined(__AVX512F__)
constexpr int64_t kBytes = 64;
// Note [exp and log of float on AVX-512]
// The exp and log ops of float32 and bfloat16 (computed in float) land here, and Debian's SLEEF
// 3.5.1 is slower than the vector math LibTorch calls (its build with MKL takes VML's exp and log:
// exp/float32/16M 0.67-0.81x and log 0.49-0.58x at two threads). These two, in SLEEF's accuracy
// class, run 1.35x (exp) and 1.5x (log) faster than SLEEF's on a register (engine/ops/README.md):
// - exp: x = n ln2 + r with ln2 in two parts, |r| <= ln2 / 2, Cephes' degree-6 polynomial, and
//   vscalefps for the 2^n, which rounds once, so subnormal results and overflow come out right.
//   Largest error over every float: 0.89 ulp.
// - log: x = 2^e m with m in [sqrt(1/2), sqrt 2) by integer arithmetic on the bits (subnormals
//   scaled by 2^23 first), f = m - 1, log(1 + f) = f - f^2 / 2 + f^3 P(f) with Cephes' degree-8 P,
//   e ln2 added in two parts. Largest error over every float: 0.83 ulp.
// Both bounds were measured against double over all 2^32 inputs by a standalone probe of these
// instruction sequences; VecMath.DISABLED_Float32OwnFunctionsOfEveryFloatWithinOneUlp repeats that
// through the ops, by hand (22 minutes at load 3; passed; tanh was added to it later).
// engine/ops/tests/vec_math_test.cpp checks 1 ulp over sweeps, every 65521st bit pattern and the
// IEEE special values in CI.
// exp on x in [-104, 89], where the clamps below change nothing: the whole body for registers
// whose every lane is there (the common case), without the clamps and the NaN fix-up.
inline __m512 exp_float_core(__m512 xc) {
  constexpr __mmask16 all = 0xffff;  // masked forms: see exp_float
  const __m512 xl = _mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_mask_roundscale_ps(xl, all, xl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 y = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));  // Horner to the end: 1.01 -> 0.89 ulp
  return _mm512_mask_scalef_ps(y, all, y, n);
}
inline __m512 exp_float(__m512 x) {
  const __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_GE_OQ);
  if (_mm512_mask_cmp_ps_mask(lo, x, _mm512_set1_ps(89.0f), _CMP_LE_OQ) == 0xffff) return exp_float_core(x);
  // Past these every result is 0 or inf; clamping keeps n finite (NaN is put back at the end).
  // The masked forms with every lane set: GCC 12's unmasked ones start from _mm512_undefined_ps,
  // which -Wmaybe-uninitialized reports once inlined.
  constexpr __mmask16 all = 0xffff;
  const __m512 hi = _mm512_mask_min_ps(x, all, x, _mm512_set1_ps(89.0f));
  const __m512 xc = _mm512_mask_max_ps(hi, all, hi, _mm512_set1_ps(-104.0f));
  return _mm512_mask_mov_ps(exp_float_core(xc), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
// log of every lane, or of the normal positive lanes alone (kNormal: no subnormal scaling and no
// special values; their results are the same bits as the general path's).
template <bool kNormal, bool kCorrect = false>
inline __m512 log_float_body(__m512 x, __m512 c = _mm512_setzero_ps()) {
  constexpr __mmask16 all = 0xffff;  // masked forms: see exp_float
  const __mmask16 sub = kNormal ? 0 : _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  const __m512 xs = kNormal ? x : _mm512_mask_mul_ps(x, sub, x, _mm512_set1_ps(8388608.0f));  // 2^23
  // The bits relative to sqrt(1/2)'s: the exponent above it, and the mantissa moved into
  // [sqrt(1/2), sqrt 2).
  const __m512i t = _mm512_sub_epi32(_mm512_castps_si512(xs), _mm512_set1_epi32(0x3f3504f3));
  __m512i e = _mm512_mask_srai_epi32(t, all, t, 23);
  if constexpr (!kNormal) e = _mm512_mask_sub_epi32(e, sub, e, _mm512_set1_epi32(23));
  const __m512 m = _mm512_castsi512_ps(
      _mm512_add_epi32(_mm512_and_si512(t, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x3f3504f3)));
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f));
  __m512 p = _mm512_set1_ps(7.0376836292E-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.1514610310E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.1676998740E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.2420140846E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.4249322787E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.6668057665E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.0000714765E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-2.4999993993E-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.3333331174E-1f));
  const __m512 z = _mm512_mul_ps(f, f);
  const __m512 ef = _mm512_mask_cvtepi32_ps(f, all, e);
  __m512 y = kCorrect ? _mm512_fmadd_ps(_mm512_mul_ps(p, f), z, c) : _mm512_mul_ps(_mm512_mul_ps(p, f), z);
  y = _mm512_fmadd_ps(ef, _mm512_set1_ps(-2.12194440e-4f), y);  // ln2 = 0.693359375 - 2.12194440e-4
  y = _mm512_fmadd_ps(z, _mm512_set1_ps(-0.5f), y);
  __m512 res = _mm512_fmadd_ps(ef, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
  if constexpr (kNormal) return res;
  // log(+inf) = +inf, log(+-0) = -inf, log(x < 0) = NaN, NaN stays NaN.
  res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ), x);
  res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_set1_ps(-INFINITY));
  res = _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(NAN));
  return _mm512_mask_mov_ps(res, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
inline __m512 log_float(__m512 x) {
  const __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(1.17549435e-38f), _CMP_GE_OQ);  // normal, > 0
  if (_mm512_mask_cmp_ps_mask(lo, x, _mm512_set1_ps(INFINITY), _CMP_LT_OQ) == 0xffff) return log_float_body<true>(x);
  return log_float_body<false>(x);
}
// Note [expm1 of float on AVX-512]
// Computed in double, 8 lanes at a time: x = n ln2 + r with |r| <= ln2 / 2 (one fma: its error,
// about n 2^-53, is far below float's), expm1(r) = r + r^2 h(r) with h Taylor's to r^7 / 9!
// (truncation below 2^-31 of the result), then 2^n expm1(r) + (2^n - 1), which double holds to
// 2^-50, and one rounding to float: within 0.5 + 2^-6 ulp. Float arithmetic would lose up to an
// ulp in 2^n e + (2^n - 1) at n = 1 without double-float sums, which cost about as much as this.
// Largest error over every float against double, and the speed against SLEEF's: engine/ops/
// README.md "expm1 of float32 on AVX-512". x is clamped to [-104, 89] first (past it the result
// is -1 or inf, and 2^n stays finite); NaN and both zeros are put back at the end.
inline __m512d expm1_double_body(__m512d x) {
  constexpr __mmask8 all = 0xff;  // masked forms: see exp_float
  const __m512d xl = _mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634));
  const __m512d n = _mm512_mask_roundscale_pd(xl, all, xl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d r = _mm512_fmadd_pd(n, _mm512_set1_pd(-0.6931471805599453), x);
  __m512d h = _mm512_set1_pd(1.0 / 362880);
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 40320));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 5040));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 720));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 120));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 24));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(1.0 / 6));
  h = _mm512_fmadd_pd(h, r, _mm512_set1_pd(0.5));
  const __m512d e = _mm512_fmadd_pd(_mm512_mul_pd(h, r), r, r);  // expm1(r)
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d p = _mm512_mask_scalef_pd(one, all, one, n);  // 2^n
  return _mm512_fmadd_pd(p, e, _mm512_sub_pd(p, one));
}
inline __m512 expm1_float(__m512 x) {
  constexpr __mmask16 all = 0xffff;  // masked forms throughout: see exp_float
  const __m512 hi = _mm512_mask_min_ps(x, all, x, _mm512_set1_ps(89.0f));
  const __m512 xc = _mm512_mask_max_ps(hi, all, hi, _mm512_set1_ps(-104.0f));
  constexpr __mmask8 all8 = 0xff;  // as pow_float's halves
  const __m512d lo8 = expm1_double_body(_mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, xc, 0)));
  const __m512d hi8 = expm1_double_body(_mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, xc, 1)));
  const __m512 res = _mm512_maskz_insertf32x8(all, _mm512_castps256_ps512(_mm512_maskz_cvtpd_ps(all8, lo8)),
                                              _mm512_maskz_cvtpd_ps(all8, hi8), 1);
  const __mmask16 keep = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) |
                         _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
  return _mm512_mask_mov_ps(res, keep, x);
}
// Note [log1p of float on AVX-512]
// log1p(x) = log(u) + log(1 + d / u) with u = 1 + x rounded and d = (1 + x) - u its rounding
// error, exact by Fast2Sum (the larger of 1 and x first); log(1 + d / u) is d / u to far below an
// ulp, and it joins the small part of log_float's sum before the exponent's ln2 and f are added,
// so the result rounds as log's does. Tiny x (u = 1): the sum is d = x itself, subnormals and -0
// included. u is never subnormal (above -1 the nearest float to -1 is 1 - 2^-24). x = -1 gives
// log(0) = -inf, x < -1 NaN, +inf +inf (where d / u would be NaN). No huge-x bound as SLEEF's
// (Note [log1p of huge x]): there u = x, d = 1 and d / u is far below the result's last place. Largest error over every float against double:
// see engine/ops/README.md "log1p of float32 on AVX-512".
inline __m512 log1p_float(__m512 x) {
  constexpr __mmask16 all = 0xffff;  // masked forms: see exp_float
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 u = _mm512_add_ps(x, one);
  const __mmask16 big = _mm512_cmp_ps_mask(x, one, _CMP_GT_OQ);
  const __m512 d_small = _mm512_sub_ps(x, _mm512_sub_ps(u, one));  // |x| <= 1: 1 + x
  const __m512 d_big = _mm512_sub_ps(one, _mm512_sub_ps(u, x));    // x > 1: x + 1
  const __m512 d = _mm512_mask_mov_ps(d_small, big, d_big);
  const __m512 c = _mm512_mask_div_ps(d, all, d, u);
  // log1p(-0) = -0, which the sum would give as +0.
  const __mmask16 zero = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ);
  // u normal, positive and finite in every lane: the common case.
  const __mmask16 lo = _mm512_cmp_ps_mask(u, _mm512_set1_ps(1.17549435e-38f), _CMP_GE_OQ);
  if (_mm512_mask_cmp_ps_mask(lo, u, _mm512_set1_ps(INFINITY), _CMP_LT_OQ) == 0xffff)
    return _mm512_mask_mov_ps(log_float_body<true, true>(u, c), zero, x);
  // u = 0 (x = -1), u < 0, inf or NaN: log's special values, with c out of them (0 / 0, inf / inf).
  const __mmask16 finite_pos = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GT_OQ) &
                               _mm512_cmp_ps_mask(u, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(log_float_body<false, true>(u, _mm512_maskz_mov_ps(finite_pos, c)), zero, x);
}
// Note [sin and cos of float on AVX-512]
// As for exp and log (Note [exp and log of float on AVX-512]): LibTorch takes MKL's VML for
// sin and cos, and Debian's SLEEF 3.5.1 is 1.4x (sin) and 1.8x (cos) slower than this, in the same
// accuracy class. For |x| <= 2^20 (the inputs of training: angles, rotary positions):
// - x = j pi/2 + r, |r| <= pi/4, pi/2 in three floats. x - j C1 is exact (fma; |x - j C1| < 2 and
//   both multiples of 2^-23 when x >= 1). Near a multiple of pi/2 the next step cancels, so
//   j C2 is split exactly (fma) and the subtraction's error kept by Knuth's TwoSum: r + rlo holds
//   the reduced argument to well past float precision (a rounded r alone was 150 ulp off at
//   x = 2023.18567, near 1288 pi/2).
// - sin r = r + (r^3 S(r^2) + rlo), cos r = 1 - r^2/2 + r^4 C(r^2) - r rlo with 1 - r^2/2 split
//   exactly into w + (1 - w - r^2/2) (fdlibm's kernel_cos), so each rounds once at the end.
//   S and C: degree 3 in r^2, least squares on Chebyshev nodes of [-pi/4, pi/4] (relative error
//   under 0.07 ulp).
// - The quadrant (j mod 4) picks sin or cos and the sign; sin(-x) = -sin(x) keeps -0.
// Lanes past 2^20 (and inf, NaN) take SLEEF's, which reduces with a long pi.
// Largest error against double over every float with |x| <= 2^20 (a standalone probe of these
// instructions): sin 0.89 ulp, cos 0.90 ulp. Past 2^20 this reduction is not enough (84 ulp by 2^24).
inline constexpr float kSinCosFastMax = 1048576.0f;  // 2^20
template <bool kCos>
inline __m512 sincos_float(__m512 x) {
  constexpr __mmask16 all = 0xffff;  // masked forms: see exp_float
  const __m512 a = _mm512_abs_ps(x);
  // j = round(|x| 2/pi) by adding 1.5 * 2^23, which leaves j in the low bits of jm (|x| 2/pi < 2^22).
  const __m512 magic = _mm512_set1_ps(12582912.0f);
  const __m512 jm = _mm512_fmadd_ps(a, _mm512_set1_ps(0.636619772367581343f), magic);
  const __m512 j = _mm512_sub_ps(jm, magic);
  const __m512 c2 = _mm512_set1_ps(-4.371138828673793e-08f);  // pi/2 = C1 + C2 + C3 + O(1e-23)
  const __m512 t1 = _mm512_fnmadd_ps(j, _mm512_set1_ps(1.57079637050628662109375f), a);
  const __m512 ph = _mm512_mul_ps(j, c2);
  const __m512 pl = _mm512_fmsub_ps(j, c2, ph);
  const __m512 r = _mm512_sub_ps(t1, ph);
  const __m512 bp = _mm512_sub_ps(r, t1);
  const __m512 ap = _mm512_sub_ps(r, bp);
  const __m512 err = _mm512_sub_ps(_mm512_sub_ps(t1, ap), _mm512_add_ps(ph, bp));  // TwoSum: t1 - ph = r + err
  const __m512 rlo = _mm512_fnmadd_ps(j, _mm512_set1_ps(-1.7151245100058819e-15f), _mm512_sub_ps(err, pl));
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 s = _mm512_set1_ps(2.7180063e-06f);
  s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-1.9839298e-04f));
  s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(8.333329e-03f));
  s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-1.6666667e-01f));
  const __m512 sin_r = _mm512_add_ps(r, _mm512_fmadd_ps(_mm512_mul_ps(r, z), s, rlo));
  __m512 c = _mm512_set1_ps(-2.7203703e-07f);
  c = _mm512_fmadd_ps(c, z, _mm512_set1_ps(2.4799432e-05f));
  c = _mm512_fmadd_ps(c, z, _mm512_set1_ps(-1.3888883e-03f));
  c = _mm512_fmadd_ps(c, z, _mm512_set1_ps(4.1666668e-02f));
  const __m512 one = _mm512_set1_ps(1.0f), minus_half = _mm512_set1_ps(-0.5f);
  const __m512 w = _mm512_fmadd_ps(z, minus_half, one);
  const __m512 w_err = _mm512_fmadd_ps(z, minus_half, _mm512_sub_ps(one, w));  // 1 - w is exact
  const __m512 cos_r = _mm512_add_ps(w, _mm512_fnmadd_ps(rlo, r, _mm512_fmadd_ps(_mm512_mul_ps(z, z), c, w_err)));
  __m512i q = _mm512_castps_si512(jm);
  if constexpr (kCos) q = _mm512_add_epi32(q, _mm512_set1_epi32(1));  // cos(x) = sin(x + pi/2)
  const __m512 res = _mm512_mask_mov_ps(sin_r, _mm512_test_epi32_mask(q, _mm512_set1_epi32(1)), cos_r);
  __m512i sign = _mm512_mask_slli_epi32(q, all, q, 30);                        // bit 1 of the quadrant: the sign
  if constexpr (!kCos) sign = _mm512_xor_si512(sign, _mm512_castps_si512(x));  // sin is odd
  const __m512 out = _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(res), sign, _mm512_set1_epi32(int(0x80000000u)), 0x78));
  // Lanes past 2^20, inf and NaN take SLEEF's; the others keep theirs, so a value's result does
  // not depend on its neighbours in the register.
  const __mmask16 far = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kSinCosFastMax), _CMP_NLE_UQ);
  if (far) return _mm512_mask_mov_ps(out, far, kCos ? Sleef_cosf16_u10avx512f(x) : Sleef_sinf16_u10avx512f(x));
  return out;
}
// Note [tanh of float on AVX-512]
// LibTorch's float tanh is MKL VML's (0.33 ns an element in cache, one thread); ours was
// ew::tanh_fast, an odd polynomial or 1 - 2 / (e^{2|x|} + 1) written for GCC to vectorise (0.55 ns,
// a few ulp), and exp's core with a reciprocal was 0.45. This one takes no exp and no division:
// - a = min(|x|, 9.875) (NaN stays NaN: vminps returns its second operand then); tanh(9.875) is
//   within 0.1 ulp of 1, so every larger |x| and inf come out 1 (the first float whose tanh
//   rounds to 1 is 9.0109).
// - a picks one of 29 intervals, a quarter binade each, from its bits (bits >> 21, of which
//   vpermi2ps reads the low 5): [0.078125, 0.09375), ..., [1, 1.25), ..., [4, 5), ..., [8, 9.875];
//   below 0.078125 one more interval, [0, 0.078125).
// - on each, tanh(a) = c0 + t P(t), t = a - xi exact (Sterbenz), P of degree 4, the 7 tables
//   (xi, c0 .. c5) in two registers each and read by vpermi2ps: no memory gathers. xi is a
//   float near the interval's middle whose tanh is within 0.01 ulp of a float (c0; 0.15 on
//   [8, 9.875], where tanh is too flat to find one), so the sum rounds once beside a nearly exact
//   leading term. On [0, 0.078125), xi = 0 and the leading term is t itself (tanh(a) = a + a P(a),
//   P(0) = -6e-11; c0 = 0 with P near 1 instead rounds P, up to 0.99 ulp): a tiny x comes back x,
//   and 0 keeps its sign.
// - the sign of x put back with one ternary-logic op.
// The coefficients: least squares in float64 on 3000 Chebyshev nodes of each interval, weighted by
// 1 / ulp(tanh), rounded to float one at a time from c1 up with the higher ones refitted (the
// highest of the narrowest intervals take odd values: they absorb that rounding). Approximation
// error under 0.31 ulp; largest error of these instructions against double over every float
// (a standalone probe; the sign is symmetric): 0.735 ulp, at 4.7168174. In cache, one thread:
// 0.27 ns an element. float64 takes SLEEF's tanhd8_u10 here. Off AVX-512 the op keeps
// ew::tanh_fast (Tanh has no kVec there): SLEEF's tanhf8_u10avx2 measured 2.6-3.2 ns an element
// against its 1.0-1.3.
alignas(64) inline constexpr float kTanhTable[7][32] = {
    {
        // xi
        2.259292f,   2.7458272f,  3.2527745f,  3.7507064f,  4.503203f,   5.4985805f,   6.498972f,   7.513047f,
        8.746765f,   0.0f,        0.0f,        0.0f,        0.0f,        0.086079165f, 0.10152266f, 0.11715975f,
        0.14092454f, 0.17188764f, 0.20373076f, 0.23423274f, 0.28135866f, 0.34391513f,  0.40602255f, 0.46827313f,
        0.56268835f, 0.68433297f, 0.8142662f,  0.9371561f,  1.1253259f,  1.3747424f,   1.6258531f,  1.8782309f,
    },
    {
        // c0
        0.97842634f, 0.9917918f,  0.9970142f,  0.998896f,   0.9997548f,  0.9999665f,  0.99999547f, 0.9999994f,
        0.99999994f, 0.0f,        0.0f,        0.0f,        0.0f,        0.08586719f, 0.1011753f,  0.11662661f,
        0.13999899f, 0.17021458f, 0.20095809f, 0.23004098f, 0.27416208f, 0.33096817f, 0.38509026f, 0.43680298f,
        0.50996935f, 0.59432906f, 0.671937f,   0.7339129f,  0.8094135f,  0.8797685f,  0.92546874f, 0.9543345f,
    },
    {
        // c1
        0.042681932f,  0.016349047f,  0.005962641f, 0.0022067768f, 4.903836e-4f, 6.699563e-5f,   9.060052e-6f,
        1.1921783e-6f, 1.0439373e-7f, 0.0f,         0.0f,          0.0f,         -6.088044e-11f, 0.99262685f,
        0.98976356f,   0.9863982f,    0.98040026f,  0.971027f,     0.9596158f,   0.94708115f,    0.92483515f,
        0.8904601f,    0.8517055f,    0.80920315f,  0.7399313f,    0.646773f,    0.54850066f,    0.46137187f,
        0.3448498f,    0.2260074f,    0.1435076f,   0.08924567f,
    },
    {
        // c2
        -0.041759886f,  -0.016213927f,  -0.00594442f, -0.0022041765f, -4.89639e-4f, -6.6908804e-5f, -9.048547e-6f,
        -1.1906099e-6f, -4.1599275e-8f, 0.0f,         0.0f,           0.0f,         3.760373e-8f,   -0.08523426f,
        -0.100139625f,  -0.11504031f,   -0.13725491f, -0.16528295f,   -0.19284236f, -0.21786746f,   -0.25355467f,
        -0.2947139f,    -0.32798347f,   -0.35346234f, -0.37734196f,   -0.38439587f, -0.3685579f,    -0.3386069f,
        -0.27912804f,   -0.19883536f,   -0.13281225f, -0.08517029f,
    },
    {
        // c3
        0.026630359f,  0.0106326835f, 0.0039390423f, 0.0014661918f, 3.26201e-4f,  4.4618664e-5f, 6.0341526e-6f,
        7.9260894e-7f, 3.516463e-8f,  0.0f,          0.0f,          0.0f,         -0.33333698f,  -0.324602f,
        -0.319758f,    -0.3146951f,   -0.30733708f,  -0.29579607f,  -0.2808549f,  -0.26560402f,  -0.23874421f,
        -0.19929354f,  -0.15760246f,  -0.115321584f, -0.054232668f, 0.012857882f, 0.06483533f,   0.094723776f,
        0.11097965f,   0.09959288f,   0.07507909f,   0.051532034f,
    },
    {
        // c4
        -0.012200991f,  -0.005187665f,  -0.001967289f, -7.382425e-4f, -1.7089833e-4f, -2.3387869e-5f, -3.163583e-6f,
        -4.1620535e-7f, -1.1523142e-7f, 0.0f,          0.0f,          0.0f,           1.17818796e-4f, 0.061078645f,
        0.0657309f,     0.07577374f,    0.087918445f,  0.1053892f,    0.11944495f,    0.1336302f,     0.14984442f,
        0.1640997f,     0.16993326f,    0.16814227f,   0.15320547f,   0.120408796f,   0.07932304f,    0.04345238f,
        0.0036187777f,  -0.021100463f,  -0.02512131f,  -0.020775005f,
    },
    {
        // c5
        0.003982524f,  0.0019129119f, 7.7103643e-4f, 2.9274737e-4f, 6.837696e-5f,  9.275423e-6f, 1.2561181e-6f,
        1.7077042e-7f, 6.915761e-8f,  0.0f,          0.0f,          0.0f,          0.13201915f,  12.357482f,
        -0.24689853f,  -7.9282365f,   -0.5991411f,   0.8451719f,    -0.6809114f,   0.16299976f,  0.045683708f,
        0.042471074f,  0.008804329f,  -0.031246336f, -0.039639596f, -0.059883423f, -0.06653466f, -0.054295f,
        -0.032042596f, -0.009507337f, 0.0013558869f, 0.004634165f,
    },
};
inline __m512 tanh_float(__m512 x) {
  constexpr __mmask16 all = 0xffff;  // masked forms: see exp_float
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 a = _mm512_mask_min_ps(ax, all, _mm512_set1_ps(9.875f), ax);
  const __mmask16 mid = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.078125f), _CMP_NLT_US);  // and NaN
  // Entry 12 ([0.0625, 0.078125) by the bits) is the interval [0, 0.078125); 9-11 ([10, 16)) unused.
  const __m512i idx = _mm512_mask_srli_epi32(_mm512_set1_epi32(12), mid, _mm512_castps_si512(a), 21);
  const auto coef = [&](int k) {
    return _mm512_permutex2var_ps(_mm512_load_ps(kTanhTable[k]), idx, _mm512_load_ps(kTanhTable[k] + 16));
  };
  const __m512 t = _mm512_sub_ps(a, coef(0));
  __m512 p = coef(6);
  for (int k = 5; k >= 2; --k) p = _mm512_fmadd_ps(p, t, coef(k));
  const __m512 y = _mm512_fmadd_ps(p, t, _mm512_mask_mov_ps(t, mid, coef(1)));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(y), _mm512_castps_si512(x),
                                                       _mm512_set1_epi32(int(0x80000000u)), 0xd8));  // sign of x
}

// Note [sigmoid of float on AVX-512]
// 1 / (1 + e^-x) divided with vdivps kept sigmoid/float32/sweep at 0.94-0.98x LibTorch on Zen 4
// (perf: the division and the stores waiting on it). Here e = e^-|x| (exp_float), in (0, 1], so
// d = 1 + e lies in (1, 2] whatever x is (no inf to divide by), and 1 / d is vrcp14ps refined by
// one Newton step, r(2 - dr): about 2^-28 relative before the last roundings. sigmoid(x) is r for
// x >= 0 and e r for x < 0 (e^x / (1 + e^x), which also keeps the small results of large negative
// x accurate). NaN stays NaN (through e); -inf gives 0 and +inf 1.
inline __m512 sigmoid_float(__m512 x) {
  const __m512 ax = _mm512_abs_ps(x);
  const __m512 e = exp_float(_mm512_sub_ps(_mm512_setzero_ps(), ax));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 d = _mm512_add_ps(one, e);
  const __m512 r0 = _mm512_maskz_rcp14_ps(0xffff, d);  // masked form: see exp_float
  const __m512 r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(d, r0, one), r0);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(r, neg, e, r);
}
// Note [pow of float on AVX-512]
// Debian's SLEEF 3.5.1 powf works in pairs of floats (double-float arithmetic): 2.8 ns an element
// in cache, which left pow/float32/sweep at 0.77x LibTorch's time (one thread; LibTorch calls the
// SLEEF it bundles). In double a float pow has room to spare: x^y = 2^(y log2 x), rounded to float
// once, needs the double result to about 2^-28 only. Per register, two halves of 8 doubles:
// - log2 x: x = 2^k z with z in [0.697, 1.395), by integer arithmetic on the double's bits less
//   kPowOff's (a subnormal float is a normal double: no scaling). The next 4 bits pick one of 16
//   subintervals, each with a centre c, exactly 1 for the one around 1 so that log2 x is accurate
//   relative to itself near x = 1 (it would cancel otherwise), and 1/c and log2 c (to the last
//   place of 1/c as a double) come from two registers each (vpermt2pd, no memory gathers).
//   r = z (1/c) - 1 by one fma, |r| < 0.0298; log2(1 + r) = r Q(r), Q of degree 5, least squares
//   on Chebyshev nodes (relative error 2^-38.2); log2 x = (k + log2 c) + r Q(r).
// - t = y log2 x, its magnitude clamped to 200 (every float result past it is 0 or inf).
// - 2^t: adding 1.5 * 2^48 rounds t to n/16 and leaves n in the low bits, so t = n/16 + s with
//   |s| <= 1/32 exactly; 2^(n mod 16 / 16) from a 16-entry table (vpermt2pd again), 2^s = 1 + s E(s)
//   with E of degree 2 (relative error 2^-28.7), and vscalefpd multiplies by 2^floor(n/16).
// - vcvtpd2ps rounds to float once: overflow to inf and subnormal results come out right.
// Error: the log's 2^-38 relative times |t| <= 150 and the exp's 2^-28.7 leave the double within
// 2^-28 of x^y, so the float is within 0.5 + 2^-4 ulp. Measured against double pow by a standalone
// probe of these instructions: largest 0.542 ulp over 10^9 random pairs (x over every positive
// float, y such that the result runs from 0 through the subnormals to inf), 10^9 with x within
// 2^-6 of 1, every positive float once, and 2 10^8 with |t| up to 2^135 (engine/ops/README.md).
// Lanes with x <= 0, x = inf or NaN, or y = +-inf or NaN take SLEEF's powf, which has C's special
// cases (pow(x, 0) = 1 even for NaN, pow(1, y) = 1, a negative x with an integer y, ...); the
// others keep their own, so a value's result does not depend on its neighbours in the register.
#if defined(__AVX512DQ__)  // vcvtqq2pd, vrangepd, vfpclassps, 256-bit halves of float registers
inline constexpr int64_t kPowOff = 0x3fe6500000000000;  // 0.697265625: 1.0 is 11/16 into subinterval 9
alignas(64) inline constexpr double kPowInvC[16] = {
    1.4027397260273973,  1.3438320209973753,  1.2896725440806045,  1.2397094430992737,  1.1934731934731935,
    1.1505617977528091,  1.1106290672451193,  1.0733752620545074,  1.0385395537525355,  1,
    0.95167286245353155, 0.89824561403508774, 0.85049833887043191, 0.80757097791798105, 0.76876876876876876,
    0.73352435530085958};
alignas(64) inline constexpr double kPowLog2C[16] = {  // -log2(kPowInvC[i]) to the last place
    -0.48824734623262045, -0.42635281250667795, -0.36700480285704218, -0.3100020285805547,   -0.25516616250045437,
    -0.20233847414624001, -0.15137705957066205, -0.10215454399448853, -0.054556163622088448, 0,
    0.071462362556624207, 0.154818109052104,    0.23361967675970202,  0.30833903013940728,   0.37937836707126216,
    0.4470832262096523};
alignas(64) inline constexpr double kPowExp2[16] = {  // 2^(j/16)
    1,
    1.0442737824274138,
    1.0905077326652577,
    1.1387886347566916,
    1.189207115002721,
    1.241857812073484,
    1.2968395546510096,
    1.3542555469368927,
    1.4142135623730951,
    1.4768261459394993,
    1.5422108254079407,
    1.6104903319492543,
    1.681792830507429,
    1.7562521603732995,
    1.8340080864093424,
    1.9152065613971474};
struct PowTables {  // the three tables in six registers, loaded once per loop
  __m512d inv_lo, inv_hi, log_lo, log_hi, exp_lo, exp_hi;
};
inline PowTables pow_tables() {
  return {_mm512_load_pd(kPowInvC),      _mm512_load_pd(kPowInvC + 8), _mm512_load_pd(kPowLog2C),
          _mm512_load_pd(kPowLog2C + 8), _mm512_load_pd(kPowExp2),     _mm512_load_pd(kPowExp2 + 8)};
}
// x^y of 8 doubles, each a finite positive float (x) and a finite float (y).
inline __m512d pow_float_half(__m512d x, __m512d y, const PowTables& tb) {
  constexpr __mmask8 all = 0xff;  // masked forms: see exp_float
  const __m512i ix = _mm512_castpd_si512(x);
  const __m512i tmp = _mm512_sub_epi64(ix, _mm512_set1_epi64(kPowOff));
  const __m512i idx = _mm512_mask_srli_epi64(tmp, all, tmp, 48);  // vpermt2pd reads the low 4 bits
  const __m512i k = _mm512_mask_srai_epi64(tmp, all, tmp, 52);
  const __m512d z = _mm512_castsi512_pd(
      _mm512_sub_epi64(ix, _mm512_and_si512(tmp, _mm512_set1_epi64(int64_t(0xfff0000000000000u)))));
  const __m512d invc = _mm512_permutex2var_pd(tb.inv_lo, idx, tb.inv_hi);
  const __m512d log2c = _mm512_permutex2var_pd(tb.log_lo, idx, tb.log_hi);
  const __m512d r = _mm512_fmsub_pd(z, invc, _mm512_set1_pd(1.0));
  const __m512d hi = _mm512_add_pd(_mm512_maskz_cvtepi64_pd(all, k), log2c);
  __m512d q = _mm512_set1_pd(-0.24068314407493516);
  q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(0.28881292068189834));
  q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(-0.3606736869468284));
  q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(0.4808982560041675));
  q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(-0.7213475204469992));
  q = _mm512_fmadd_pd(q, r, _mm512_set1_pd(1.4426950408934378));
  const __m512d lg = _mm512_fmadd_pd(r, q, hi);
  // t = y log2 x with its magnitude clamped to 200 (vrangepd, imm 0b0010: the smaller magnitude,
  // t's sign): past 2^47 the rounding below would leave |s| large, and past 200 every float result
  // is 0 or inf anyway. t = n/16 + s: 1.5 * 2^48 has an ulp of 1/16, so adding it rounds t to n/16
  // and leaves n in the low bits; vscalefpd takes floor(n/16).
  const __m512d tu = _mm512_mul_pd(y, lg);
  const __m512d t = _mm512_mask_range_pd(tu, all, tu, _mm512_set1_pd(200.0), 0b0010);
  const __m512d shift = _mm512_set1_pd(0x1.8p48);
  const __m512d kd = _mm512_add_pd(t, shift);
  const __m512d kt = _mm512_sub_pd(kd, shift);
  const __m512d s = _mm512_sub_pd(t, kt);
  const __m512d tj = _mm512_permutex2var_pd(tb.exp_lo, _mm512_castpd_si512(kd), tb.exp_hi);  // 2^((n mod 16) / 16)
  __m512d e = _mm512_set1_pd(0.05550378313623161);
  e = _mm512_fmadd_pd(e, s, _mm512_set1_pd(0.2402335514183937));
  e = _mm512_fmadd_pd(e, s, _mm512_set1_pd(0.6931471811957216));
  const __m512d p = _mm512_fmadd_pd(_mm512_mul_pd(tj, s), e, tj);
  return _mm512_mask_scalef_pd(p, all, p, kt);
}
// f(x half, y half, h) on the two halves (h = 0, 1) of float registers x and y, each widened to 8
// doubles, and its two double results narrowed back into one float register.
template <typename F>
inline __m512 on_double_halves(__m512 x, __m512 y, F&& f) {
  // The maskz forms with every lane set: GCC 12's unmasked conversions, extractions and casts
  // start from _mm256_undefined_*, which -Wmaybe-uninitialized reports once inlined.
  constexpr __mmask8 all8 = 0xff;
  constexpr __mmask16 all = 0xffff;
  const __m512d lo = f(_mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, x, 0)),
                       _mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, y, 0)), 0);
  const __m512d hi = f(_mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, x, 1)),
                       _mm512_maskz_cvtps_pd(all8, _mm512_maskz_extractf32x8_ps(all8, y, 1)), 1);
  return _mm512_maskz_insertf32x8(all, _mm512_castps256_ps512(_mm512_maskz_cvtpd_ps(all8, lo)),
                                  _mm512_maskz_cvtpd_ps(all8, hi), 1);
}
inline __m512 pow_float(__m512 x, __m512 y, const PowTables& tb) {
  const __m512 out = on_double_halves(x, y, [&tb](__m512d a, __m512d b, int) { return pow_float_half(a, b, tb); });
  // x: NaN, +-0, +-inf, negative (0xdf); y: NaN, +-inf (0x99). Positive subnormal x is ordinary.
  const __mmask16 special = _mm512_fpclass_ps_mask(x, 0xdf) | _mm512_fpclass_ps_mask(y, 0x99);
  if (special) return _mm512_mask_mov_ps(out, special, Sleef_powf16_u10avx512f(x, y));
  return out;
}
// Note [fmod of float on AVX-512]
// fmod(x, y) of float32 is exact (the result is a float); SLEEF's vector fmod took 5-6 cycles an
// element here. Widened to double: x = X 2^a, y = Y 2^b with X, Y < 2^24; a quotient x / y that is
// not an integer lies at least x / y / X > |x / y| 2^-24 (relative) from every integer, and the
// double division errs by at most |x / y| 2^-53, so its truncation q is trunc(x / y) whenever
// |x / y| < 2^29 (then q y fits in 53 bits). x - q y, one fma, is then the exact fmod, a float. Its
// sign is x's (a zero result too: fmod(-4, 2) is -0, where the fma gives +0). Lanes past 2^29,
// with x infinite or NaN, y zero, infinite (0 * inf) or NaN take SLEEF's fmod.
inline __m512d fmod_float_half(__m512d x, __m512d y, __mmask8& slow) {
  const __m512d q = _mm512_div_pd(x, y);
  const __m512d abs_q = _mm512_castsi512_pd(
      _mm512_and_epi64(_mm512_castpd_si512(q), _mm512_set1_epi64(~(int64_t(1) << 63))));
  slow = _mm512_cmp_pd_mask(abs_q, _mm512_set1_pd(0x1p29), _CMP_NLT_UQ);  // NaN quotients too
  return _mm512_fnmadd_pd(_mm512_maskz_roundscale_pd(0xff, q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), y, x);
}
inline __m512 fmod_float(__m512 x, __m512 y) {
  __mmask8 slow_half[2];
  const __m512 r = on_double_halves(x, y, [&slow_half](__m512d a, __m512d b, int h) {
    return fmod_float_half(a, b, slow_half[h]);
  });
  // |r| with x's sign bit (vpternlogd 0xb8: bits of x where the mask is set, else r's).
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
  const __m512 out = _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(r), sign, _mm512_castps_si512(x), 0xb8));
  const __mmask16 slow = __mmask16(slow_half[0] | (unsigned(slow_half[1]) << 8)) |
                         _mm512_fpclass_ps_mask(y, 0x18);  // y +-inf
  if (slow) return _mm512_mask_mov_ps(out, slow, Sleef_fmodf16_avx512f(x, y));
  return out;
}
#endif
template <VecFn2 F>
__m512 vec2(__m512 a, __m512 b) {
#if defined(__AVX512DQ__)
  if constexpr (F == VecFn2::Pow) return pow_float(a, b, pow_tables());  // Note [pow of float on AVX-512]
#else
  if constexpr (F == VecFn2::Pow) return Sleef_powf16_u10avx512f(a, b);
#endif
#if defined(__AVX512DQ__)
  else return fmod_float(a, b);  // Note [fmod of float on AVX-512]
#else
  else return Sleef_fmodf16_avx512f(a, b);
#endif
}
template <VecFn2 F>
__m512d vec2(__m512d a, __m512d b) {
  if constexpr (F == VecFn2::Pow) return Sleef_powd8_u10avx512f(a, b);
  else return Sleef_fmodd8_avx512f(a, b);
}
template <VecFn F>
__m512 vec(__m512 x) {
  if constexpr (F == VecFn::Exp) return exp_float(x);           // Note [exp and log of float on AVX-512]
  else if constexpr (F == VecFn::Expm1) return expm1_float(x);  // Note [expm1 of float on AVX-512]
  else if constexpr (F == VecFn::Log) return log_float(x);
  else if constexpr (F == VecFn::Log1p) return log1p_float(x);
  else if constexpr (F == VecFn::Sin) return sincos_float<false>(x);  // Note [sin and cos of float on AVX-512]
  else if constexpr (F == VecFn::Cos) return sincos_float<true>(x);
  else if constexpr (F == VecFn::Tanh) return tanh_float(x);        // Note [tanh of float on AVX-512]
  else if constexpr (F == VecFn::Sigmoid) return sigmoid_float(x);  // Note [sigmoid of float on AVX-512]
  else return _mm512_mul_ps(x, sigmoid_float(x));                   // silu: within 3.61 ulp over every float
}
template <VecFn F>
__m512d vec(__m512d x) {
  if constexpr (F == VecFn::Exp) return Sleef_expd8_u10avx512f(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1d8_u10avx512f(x);
  else if constexpr (F == VecFn::Log) return Sleef_logd8_u10avx512f(x);
  else if constexpr (F == VecFn::Log1p) {  // Note [log1p of huge x]
    const __m512d r = Sleef_log1pd8_u10avx512f(x);
    const __mmask8 huge = _mm512_cmp_pd_mask(x, _mm512_set1_pd(kLog1pMaxD), _CMP_GT_OQ);
    return huge ? _mm512_mask_mov_pd(r, huge, Sleef_logd8_u10avx512f(x)) : r;
  } else if constexpr (F == VecFn::Sin) return Sleef_sind8_u10avx512f(x);
  else if constexpr (F == VecFn::Cos) return Sleef_cosd8_u10avx512f(x);
  else if constexpr (F == VecFn::Tanh) return Sleef_tanhd8_u10avx512f(x);
  else {  // e = e^-|x|: 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0, as the scalar form
    // (1 / (1 + e^-x) gave 0 for x in [-745, -709.8], where e^-x overflows and the answer is a
    // subnormal; found by VecMath.Float64BitPatternsWithinOneUlp); silu: x times it.
    const __m512d one = _mm512_set1_pd(1.0);
    const __m512d e = Sleef_expd8_u10avx512f(_mm512_sub_pd(_mm512_setzero_pd(), _mm512_abs_pd(x)));
    const __mmask8 neg = _mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_LT_OQ);
    const __m512d s = _mm512_div_pd(_mm512_mask_mov_pd(one, neg, e), _mm512_add_pd(one, e));
    return F == VecFn::Sigmoid ? s : _mm512_mul_pd(x, s);
  }
}
inline __m512 load(const float* p) { return _mm512_load_ps(p); }
inline __m512d load(const double* p) { return _mm512_load_pd(p); }
inline void store(float* p, __m512 v) { _mm512_store_ps(p, v); }
inline void store(double* p, __m512d v) { _mm512_store_pd(p, v); }
#elif defined(__AVX2__)
constexpr int64_t kBytes = 32;
template <VecFn2 F>
__m256 vec2(__m256 a, __m256 b) {
  if constexpr (F == VecFn2::Pow) return Sleef_powf8_u10avx2(a, b);
  else return Sleef_fmodf8_avx2(a, b);
}
template <VecFn2 F>
__m256d vec2(__m256d a, __m256d b) {
  if constexpr (F == VecFn2::Pow) return Sleef_powd4_u10avx2(a, b);
  else return Sleef_fmodd4_avx2(a, b);
}
// No tanh or sigmoid here: off AVX-512 those ops take their scalar forms (Notes [tanh of float on
// AVX-512] and [sigmoid of float on AVX-512]).
template <VecFn F>
__m256 vec(__m256 x) {
  static_assert(F != VecFn::Tanh && F != VecFn::Sigmoid && F != VecFn::Silu);
  if constexpr (F == VecFn::Exp) return Sleef_expf8_u10avx2(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1f8_u10avx2(x);
  else if constexpr (F == VecFn::Log) return Sleef_logf8_u10avx2(x);
  else if constexpr (F == VecFn::Log1p) {  // Note [log1p of huge x]
    const __m256 r = Sleef_log1pf8_u10avx2(x), huge = _mm256_cmp_ps(x, _mm256_set1_ps(kLog1pMaxF), _CMP_GT_OQ);
    return _mm256_movemask_ps(huge) ? _mm256_blendv_ps(r, Sleef_logf8_u10avx2(x), huge) : r;
  } else if constexpr (F == VecFn::Sin) return Sleef_sinf8_u10avx2(x);
  else return Sleef_cosf8_u10avx2(x);
}
template <VecFn F>
__m256d vec(__m256d x) {
  static_assert(F != VecFn::Tanh && F != VecFn::Sigmoid && F != VecFn::Silu);
  if constexpr (F == VecFn::Exp) return Sleef_expd4_u10avx2(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1d4_u10avx2(x);
  else if constexpr (F == VecFn::Log) return Sleef_logd4_u10avx2(x);
  else if constexpr (F == VecFn::Log1p) {  // Note [log1p of huge x]
    const __m256d r = Sleef_log1pd4_u10avx2(x), huge = _mm256_cmp_pd(x, _mm256_set1_pd(kLog1pMaxD), _CMP_GT_OQ);
    return _mm256_movemask_pd(huge) ? _mm256_blendv_pd(r, Sleef_logd4_u10avx2(x), huge) : r;
  } else if constexpr (F == VecFn::Sin) return Sleef_sind4_u10avx2(x);
  else return Sleef_cosd4_u10avx2(x);
}
inline __m256 load(const float* p) { return _mm256_load_ps(p); }
inline __m256d load(const double* p) { return _mm256_load_pd(p); }
inline void store(float* p, __m256 v) { _mm256_store_ps(p, v); }
inline void store(double* p, __m256d v) { _mm256_store_pd(p, v); }
#endif

}  // namespace sleef_detail

// out[0, n) = F(in[0, n)), unaligned, whole registers; returns how many elements it did (the rest,
// less than a register, is left to vec_math_run).
template <VecFn F, typename M>
int64_t vec_math_map(M* out, const M* in, int64_t n) {
#if defined(__AVX512F__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  if constexpr (std::is_same_v<M, float>)
    for (; i + lanes <= n; i += lanes) _mm512_storeu_ps(out + i, vec<F>(_mm512_loadu_ps(in + i)));
  else
    for (; i + lanes <= n; i += lanes) _mm512_storeu_pd(out + i, vec<F>(_mm512_loadu_pd(in + i)));
  return i;
#elif defined(__AVX2__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  if constexpr (std::is_same_v<M, float>)
    for (; i + lanes <= n; i += lanes) _mm256_storeu_ps(out + i, vec<F>(_mm256_loadu_ps(in + i)));
  else
    for (; i + lanes <= n; i += lanes) _mm256_storeu_pd(out + i, vec<F>(_mm256_loadu_pd(in + i)));
  return i;
#else
  (void)out, (void)in, (void)n;
  return 0;
#endif
}

// out[0, n) = F(a[0, n), b[0, n)), unaligned, whole registers (out may be a or b); returns how
// many elements it did, as vec_math_map.
template <VecFn2 F, typename M>
int64_t vec_math_map2(M* out, const M* a, const M* b, int64_t n) {
#if defined(__AVX512F__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  if constexpr (std::is_same_v<M, float>)
    for (; i + lanes <= n; i += lanes)
      _mm512_storeu_ps(out + i, vec2<F>(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
  else
    for (; i + lanes <= n; i += lanes)
      _mm512_storeu_pd(out + i, vec2<F>(_mm512_loadu_pd(a + i), _mm512_loadu_pd(b + i)));
  return i;
#else
  (void)out, (void)a, (void)b, (void)n;
  return 0;
#endif
}

// out[0, n) = F(a[0, n), c) for a scalar c, as vec_math_map2.
template <VecFn2 F, typename M>
int64_t vec_math_map2_scalar(M* out, const M* a, M c, int64_t n) {
#if defined(__AVX512F__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  if constexpr (std::is_same_v<M, float>) {
    const __m512 cv = _mm512_set1_ps(c);
    for (; i + lanes <= n; i += lanes) _mm512_storeu_ps(out + i, vec2<F>(_mm512_loadu_ps(a + i), cv));
  } else {
    const __m512d cv = _mm512_set1_pd(c);
    for (; i + lanes <= n; i += lanes) _mm512_storeu_pd(out + i, vec2<F>(_mm512_loadu_pd(a + i), cv));
  }
  return i;
#else
  (void)out, (void)a, (void)c, (void)n;
  return 0;
#endif
}

// v[0, n) = F(v[0, n)) in place; v aligned to 64 bytes.
template <VecFn F, typename M>
void vec_math_run(M* v, int64_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) store(v + i, vec<F>(load(v + i)));
  if (i < n) {
    alignas(64) M tail[lanes] = {};
    std::memcpy(tail, v + i, size_t(n - i) * sizeof(M));
    store(tail, vec<F>(load(tail)));
    std::memcpy(v + i, tail, size_t(n - i) * sizeof(M));
  }
#else
  for (int64_t i = 0; i < n; ++i) v[i] = sleef_detail::scalar<F>(v[i]);
#endif
}

// a[0, n) = F(a[0, n), b[0, n)) in place; a and b aligned to 64 bytes. The tail's padding is 1.
template <VecFn2 F, typename M>
void vec_math_run2(M* a, const M* b, int64_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  using namespace sleef_detail;
  constexpr int64_t lanes = kBytes / int64_t(sizeof(M));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) store(a + i, vec2<F>(load(a + i), load(b + i)));
  if (i < n) {
    alignas(64) M ta[lanes], tb[lanes];
    std::fill(ta, ta + lanes, M(1)), std::fill(tb, tb + lanes, M(1));
    std::memcpy(ta, a + i, size_t(n - i) * sizeof(M));
    std::memcpy(tb, b + i, size_t(n - i) * sizeof(M));
    store(ta, vec2<F>(load(ta), load(tb)));
    std::memcpy(a + i, ta, size_t(n - i) * sizeof(M));
  }
#else
  for (int64_t i = 0; i < n; ++i) a[i] = sleef_detail::scalar2<F>(a[i], b[i]);
#endif
}

// out = f(x) over a StridedLoop of (out, x), both of the floating type T, computed in opmath_t<T>
// (float for bf16/f16): runs of up to kVecChunk elements are converted into an aligned buffer,
// mapped in place by run(buf, m) and converted back (bf16 by store_bf16's vector rounding); a
// contiguous float/double run goes straight through direct(out, in, n) first, which returns how
// many elements it did. An in-place op reads each run before writing it.
inline constexpr int64_t kVecChunk = 256;

template <typename T, typename Run, typename Direct>
void vec_buffer_kernel(const StridedLoop& loop, const Run& run, const Direct& direct) {
  using M = core::opmath_t<T>;
  loop.for_each([&](char** data, const int64_t* st, int64_t n) {
    alignas(64) M buf[kVecChunk];
    int64_t done = 0;
    if constexpr (std::is_same_v<T, M>)
      if (st[0] == int64_t(sizeof(T)) && st[1] == int64_t(sizeof(T)))
        done = direct(reinterpret_cast<M*>(data[0]), reinterpret_cast<const M*>(data[1]), n);
    for (int64_t c = done; c < n; c += kVecChunk) {
      const int64_t m = std::min(kVecChunk, n - c);
      const char* in = data[1] + c * st[1];
      char* out = data[0] + c * st[0];
      if (st[1] == int64_t(sizeof(T))) {
        const T* p = reinterpret_cast<const T*>(in);
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(p[i]);
      } else {
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(*reinterpret_cast<const T*>(in + i * st[1]));
      }
      run(buf, m);
      if (st[0] == int64_t(sizeof(T))) {
        if constexpr (std::is_same_v<T, core::BFloat16>) {
          store_bf16(reinterpret_cast<core::BFloat16*>(out), buf, m);
        } else {
          T* q = reinterpret_cast<T*>(out);
          for (int64_t i = 0; i < m; ++i) q[i] = static_cast<T>(buf[i]);
        }
      } else {
        for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(out + i * st[0]) = static_cast<T>(buf[i]);
      }
    }
  });
}

// out = f(x, c) for a scalar c: run2(xbuf, cbuf, m) over vec_buffer_kernel's runs, cbuf all c;
// contiguous float/double runs through direct(out, x, n) first where one is given.
template <typename T, typename Run2, typename Direct>
void vec_scalar_kernel(const StridedLoop& loop, core::opmath_t<T> c, const Run2& run2, const Direct& direct) {
  using M = core::opmath_t<T>;
  vec_buffer_kernel<T>(
      loop,
      [c, &run2](M* x, int64_t m) {
        alignas(64) M y[kVecChunk];
        std::fill(y, y + m, c);
        run2(x, y, m);
      },
      direct);
}
template <typename T, typename Run2>
void vec_scalar_kernel(const StridedLoop& loop, core::opmath_t<T> c, const Run2& run2) {
  using M = core::opmath_t<T>;
  vec_scalar_kernel<T>(loop, c, run2, [](M*, const M*, int64_t) { return int64_t(0); });
}

// out = f(a, b) over a StridedLoop of (out, a, b), all of type T, computed in opmath_t<T>: runs of
// up to kVecChunk elements buffered, run(abuf, bbuf, m) leaves the result in abuf; a contiguous
// float/double run goes straight through direct(out, a, b, n) first, which returns how many
// elements it did (the form without direct buffers every run).
template <typename T, typename Run, typename Direct>
void vec_buffer_kernel2(const StridedLoop& loop, const Run& run, const Direct& direct) {
  using M = core::opmath_t<T>;
  loop.for_each([&](char** data, const int64_t* st, int64_t n) {
    alignas(64) M a[kVecChunk], b[kVecChunk];
    int64_t done = 0;
    if constexpr (std::is_same_v<T, M>)
      if (st[0] == int64_t(sizeof(T)) && st[1] == int64_t(sizeof(T)) && st[2] == int64_t(sizeof(T)))
        done = direct(reinterpret_cast<M*>(data[0]), reinterpret_cast<const M*>(data[1]),
                      reinterpret_cast<const M*>(data[2]), n);
    for (int64_t c = done; c < n; c += kVecChunk) {
      const int64_t m = std::min(kVecChunk, n - c);
      for (int k = 1; k <= 2; ++k) {
        M* buf = k == 1 ? a : b;
        const char* in = data[k] + c * st[k];
        if (st[k] == int64_t(sizeof(T))) {
          const T* p = reinterpret_cast<const T*>(in);
          for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(p[i]);
        } else {
          for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<M>(*reinterpret_cast<const T*>(in + i * st[k]));
        }
      }
      run(a, b, m);
      char* out = data[0] + c * st[0];
      if (st[0] == int64_t(sizeof(T))) {
        // A contiguous output in whole vectors: the strided loop below stays scalar (its stride
        // is a variable), and was 58% of remainder/float32/sweep's own time on Zen 4 (perf).
        if constexpr (std::is_same_v<T, core::BFloat16>) {
          store_bf16(reinterpret_cast<core::BFloat16*>(out), a, m);
        } else {
          T* q = reinterpret_cast<T*>(out);
          for (int64_t i = 0; i < m; ++i) q[i] = static_cast<T>(a[i]);
        }
        continue;
      }
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(out + i * st[0]) = static_cast<T>(a[i]);
    }
  });
}
template <typename T, typename Run>
void vec_buffer_kernel2(const StridedLoop& loop, const Run& run) {
  using M = core::opmath_t<T>;
  vec_buffer_kernel2<T>(loop, run, [](M*, const M*, const M*, int64_t) { return int64_t(0); });
}

// out = F(x): contiguous float/double runs straight through, the rest through the buffer.
template <typename T, VecFn F>
void vec_math_kernel(const StridedLoop& loop) {
  using M = core::opmath_t<T>;
  vec_buffer_kernel<T>(
      loop, [](M* v, int64_t m) { vec_math_run<F>(v, m); },
      [](M* out, const M* in, int64_t n) { return vec_math_map<F>(out, in, n); });
}

}  // namespace tb::ops::cpu
