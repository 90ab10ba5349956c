// Elementwise kernel helpers over StridedLoop. cpu_kernel<Out, In...>(loop, f) applies f to each
// element (operand 0 is the output); the contiguous case is a flat loop the compiler vectorises,
// everything else walks byte strides. Reduced floats (bf16, f16) are converted on load/store, so
// f works in opmath_t (float) for them.
#pragma once
#include <tuple>
#include <utility>

#include "engine/tensor/iterator.h"

namespace tb::ops::cpu {

namespace detail {
template <typename Out, typename... In, typename F, size_t... I>
inline void run_kernel(char** data, const int64_t* st, int64_t n, F& f, std::index_sequence<I...>) {
  const bool contiguous = st[0] == int64_t(sizeof(Out)) && ((st[I + 1] == int64_t(sizeof(In))) && ...);
  if (contiguous) {
    Out* __restrict__ out = reinterpret_cast<Out*>(data[0]);
    std::tuple<const In* __restrict__...> in{reinterpret_cast<const In*>(data[I + 1])...};
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(std::get<I>(in)[i]...));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<Out*>(data[0] + i * st[0]) = static_cast<Out>(
        f(*reinterpret_cast<const In*>(data[I + 1] + i * st[I + 1])...));
}
}  // namespace detail

template <typename Out, typename... In, typename F>
void cpu_kernel(const StridedLoop& loop, F f) {
  loop.for_each([&f](char** data, const int64_t* st, int64_t n) {
    detail::run_kernel<Out, In...>(data, st, n, f, std::index_sequence_for<In...>{});
  });
}

}  // namespace tb::ops::cpu
