// Elementwise kernel helpers over StridedLoop. cpu_kernel<Out, In...>(loop, f) applies f to each
// element (operand 0 is the output); the contiguous case is a flat loop the compiler vectorises,
// everything else walks byte strides. Reduced floats (bf16, f16) are converted on load/store, so
// f works in opmath_t (float) for them; contiguous bf16 results are stored by store_bf16 (by
// store_bf16_stream when a run is too big to stay in cache), and contiguous float32 results with
// non-temporal stores where the operands overflow the last-level cache (Note [Streaming float
// stores]).
#pragma once
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "engine/ops/cpu/bf16_convert.h"
#include "engine/tensor/iterator.h"

namespace tb::ops::cpu {

// out[0, n) written with non-temporal stores (Note [Streaming float stores]): fill(dst, c, m)
// computes elements [c, c + m) into dst, first straight into out up to the vector's alignment,
// then a chunk at a time into a buffer in L1 that is streamed out (so an in-place op, which reads
// a chunk before it writes it, stays correct).
template <typename Fill>
void stream_float_run(float* out, int64_t n, const Fill& fill) {
  constexpr int64_t kChunk = 256;
  alignas(64) float buf[kChunk];
  const int64_t first = std::min(n, int64_t((kStreamAlign - reinterpret_cast<uintptr_t>(out) % kStreamAlign) %
                                            kStreamAlign / sizeof(float)));
  if (first > 0) fill(out, int64_t(0), first);
  for (int64_t c = first; c < n;) {
    const int64_t m = std::min(kChunk, n - c);
    fill(buf, c, m);
    stream_floats(out + c, buf, m);
    c += m;
  }
  stream_fence();
}

namespace detail {
template <typename Out, typename... In, typename F, size_t... I>
inline void run_kernel(char** data, const int64_t* st, int64_t n, int64_t numel, F& f, std::index_sequence<I...>) {
  const bool contiguous = st[0] == int64_t(sizeof(Out)) && ((st[I + 1] == int64_t(sizeof(In))) && ...);
  if (contiguous) {
    Out* __restrict__ out = reinterpret_cast<Out*>(data[0]);
    std::tuple<const In* __restrict__...> in{reinterpret_cast<const In*>(data[I + 1])...};
    using R = decltype(f(std::get<I>(in)[0]...));
    if constexpr (std::is_same_v<Out, core::BFloat16> && std::is_same_v<R, float>) {
      // float results to bfloat16 a chunk at a time through store_bf16's vector conversion. An
      // in-place op reads each chunk before it writes it, so aliasing out and in stays correct.
      constexpr int64_t kChunk = 256;
      float buf[kChunk];
      // A run too big to stay in cache is stored with non-temporal stores (Note [Streaming bf16
      // stores]), after a first chunk of up to 15 elements that brings out + c to 32 bytes.
      const bool stream = kHaveStreamingStore && n * int64_t(sizeof(Out)) >= kStreamBytes;
      const int64_t first = stream ? int64_t((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32 / sizeof(Out)) : 0;
      for (int64_t c = 0; c < n;) {
        const int64_t m = c < first ? first - c : std::min(kChunk, n - c);
        for (int64_t i = 0; i < m; ++i) buf[i] = f(std::get<I>(in)[c + i]...);
        if (stream && c >= first) store_bf16_stream(out + c, buf, m);
        else store_bf16(out + c, buf, m);
        c += m;
      }
      if (stream) stream_fence();
    } else if constexpr (std::is_same_v<Out, float>) {
      // Operands too big for the last-level cache: non-temporal stores (Note [Streaming float
      // stores]).
      if (kHaveStreamingStore &&
          stream_float_result(n * int64_t(sizeof(Out)), numel * int64_t(sizeof(Out) + (sizeof(In) + ... + 0)))) {
        stream_float_run(out, n, [&](float* dst, int64_t c, int64_t m) {
          for (int64_t i = 0; i < m; ++i) dst[i] = static_cast<Out>(f(std::get<I>(in)[c + i]...));
        });
      } else {
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(std::get<I>(in)[i]...));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(std::get<I>(in)[i]...));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<Out*>(data[0] + i * st[0]) = static_cast<Out>(
        f(*reinterpret_cast<const In*>(data[I + 1] + i * st[I + 1])...));
}
}  // namespace detail

template <typename Out, typename... In, typename F>
void cpu_kernel(const StridedLoop& loop, F f) {
  loop.for_each([&f, numel = loop.numel()](char** data, const int64_t* st, int64_t n) {
    detail::run_kernel<Out, In...>(data, st, n, numel, f, std::index_sequence_for<In...>{});
  });
}

}  // namespace tb::ops::cpu
