// Note [Vector math from SLEEF]
// exp, expm1, log, log1p, sin and cos went through libm one element at a time: an out-of-line
// call the compiler cannot vectorise, 7-14x slower than LibTorch (exp of 4M floats: 12.5 ms
// against 1.7 ms at one thread). LibTorch's vector kernels call SLEEF, a vectorised math library
// with a 1.0-ulp bound (its `_u10` functions); Debian packages it (libsleef-dev), so the engine
// calls the same functions, on whole registers: AVX-512 where the build targets it, else AVX2
// (Zen 3), else libm. Every element goes through the vector form, the last partial register
// padded, so an element's result never depends on where it sits in a tensor.
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

enum class VecFn { Exp, Expm1, Log, Log1p, Sin, Cos };
enum class VecFn2 { Pow, Fmod };  // pow at 1.0 ulp; fmod exact

namespace sleef_detail {

template <VecFn F, typename M>
M scalar(M x) {
  if constexpr (F == VecFn::Exp) return std::exp(x);
  else if constexpr (F == VecFn::Expm1) return std::expm1(x);
  else if constexpr (F == VecFn::Log) return std::log(x);
  else if constexpr (F == VecFn::Log1p) return std::log1p(x);
  else if constexpr (F == VecFn::Sin) return std::sin(x);
  else return std::cos(x);
}

template <VecFn2 F, typename M>
M scalar2(M a, M b) {
  if constexpr (F == VecFn2::Pow) return std::pow(a, b);
  else return std::fmod(a, b);
}

#if defined(__AVX512F__)
constexpr int64_t kBytes = 64;
template <VecFn2 F>
__m512 vec2(__m512 a, __m512 b) {
  if constexpr (F == VecFn2::Pow) return Sleef_powf16_u10avx512f(a, b);
  else return Sleef_fmodf16_avx512f(a, b);
}
template <VecFn2 F>
__m512d vec2(__m512d a, __m512d b) {
  if constexpr (F == VecFn2::Pow) return Sleef_powd8_u10avx512f(a, b);
  else return Sleef_fmodd8_avx512f(a, b);
}
template <VecFn F>
__m512 vec(__m512 x) {
  if constexpr (F == VecFn::Exp) return Sleef_expf16_u10avx512f(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1f16_u10avx512f(x);
  else if constexpr (F == VecFn::Log) return Sleef_logf16_u10avx512f(x);
  else if constexpr (F == VecFn::Log1p) return Sleef_log1pf16_u10avx512f(x);
  else if constexpr (F == VecFn::Sin) return Sleef_sinf16_u10avx512f(x);
  else return Sleef_cosf16_u10avx512f(x);
}
template <VecFn F>
__m512d vec(__m512d x) {
  if constexpr (F == VecFn::Exp) return Sleef_expd8_u10avx512f(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1d8_u10avx512f(x);
  else if constexpr (F == VecFn::Log) return Sleef_logd8_u10avx512f(x);
  else if constexpr (F == VecFn::Log1p) return Sleef_log1pd8_u10avx512f(x);
  else if constexpr (F == VecFn::Sin) return Sleef_sind8_u10avx512f(x);
  else return Sleef_cosd8_u10avx512f(x);
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
template <VecFn F>
__m256 vec(__m256 x) {
  if constexpr (F == VecFn::Exp) return Sleef_expf8_u10avx2(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1f8_u10avx2(x);
  else if constexpr (F == VecFn::Log) return Sleef_logf8_u10avx2(x);
  else if constexpr (F == VecFn::Log1p) return Sleef_log1pf8_u10avx2(x);
  else if constexpr (F == VecFn::Sin) return Sleef_sinf8_u10avx2(x);
  else return Sleef_cosf8_u10avx2(x);
}
template <VecFn F>
__m256d vec(__m256d x) {
  if constexpr (F == VecFn::Exp) return Sleef_expd4_u10avx2(x);
  else if constexpr (F == VecFn::Expm1) return Sleef_expm1d4_u10avx2(x);
  else if constexpr (F == VecFn::Log) return Sleef_logd4_u10avx2(x);
  else if constexpr (F == VecFn::Log1p) return Sleef_log1pd4_u10avx2(x);
  else if constexpr (F == VecFn::Sin) return Sleef_sind4_u10avx2(x);
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

// out = f(x, c) for a scalar c: run2(xbuf, cbuf, m) over vec_buffer_kernel's runs, cbuf all c.
template <typename T, typename Run2>
void vec_scalar_kernel(const StridedLoop& loop, core::opmath_t<T> c, const Run2& run2) {
  using M = core::opmath_t<T>;
  vec_buffer_kernel<T>(
      loop,
      [c, &run2](M* x, int64_t m) {
        alignas(64) M y[kVecChunk];
        std::fill(y, y + m, c);
        run2(x, y, m);
      },
      [](M*, const M*, int64_t) { return int64_t(0); });
}

// out = f(a, b) over a StridedLoop of (out, a, b), all of type T, computed in opmath_t<T>: runs of
// up to kVecChunk elements buffered, run(abuf, bbuf, m) leaves the result in abuf.
template <typename T, typename Run>
void vec_buffer_kernel2(const StridedLoop& loop, const Run& run) {
  using M = core::opmath_t<T>;
  loop.for_each([&](char** data, const int64_t* st, int64_t n) {
    alignas(64) M a[kVecChunk], b[kVecChunk];
    for (int64_t c = 0; c < n; c += kVecChunk) {
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
      if constexpr (std::is_same_v<T, core::BFloat16>) {
        if (st[0] == int64_t(sizeof(T))) {
          store_bf16(reinterpret_cast<core::BFloat16*>(out), a, m);
          continue;
        }
      }
      for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(out + i * st[0]) = static_cast<T>(a[i]);
    }
  });
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
