// softmax, log_softmax, layer_norm, group_norm, batch_norm (see nn_norm.h); their backward
// kernels are in nn_norm_backward.cpp. Each brings its input to a
// contiguous layout, computes in opmath (float for bf16/f16) and rounds once on store. Row
// statistics use the pairwise kernel of cpu/reduce_kernel.h; exp is exp_shifted (exp_fast for
// arguments <= 0); bf16 rows are rounded by cpu::store_bf16 from a float row.
#include "engine/ops/nn_norm.h"

#include <cmath>
#include <vector>

#include "engine/ops/cpu/bf16_convert.h"
#include "engine/ops/cpu/reduce_kernel.h"
#include "engine/ops/cpu/vec_math.h"

namespace tb::ops {

namespace {

using cpu::load;

template <typename A>
struct SumA {
  A init() const { return A(0); }
  template <typename T>
  A step(A a, T v, A) const {
    return a + A(load(v));
  }
  A merge(A a, A b) const { return a + b; }
};
// Sum of deviations from a shift c: the mean is c + sum(x - c) / n with c one of the elements, so
// a constant row has its mean exactly (and variance exactly 0), as PyTorch's Welford mean does;
// sum(x) / n would leave a rounding error that rstd (up to 1/sqrt(eps)) magnifies.
template <typename A>
struct DevA : SumA<A> {
  template <typename T>
  A step(A a, T v, A c) const {
    return a + (A(load(v)) - c);
  }
  cpu::vhalf hstep_c(cpu::vhalf a, cpu::vhalf v, cpu::vhalf c) const { return a + (v - c); }  // cpu::CenteredHalfOp
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return a + b; }
};
template <typename A>
A shifted_mean(const auto* x, int64_t n) {
  const A c = A(load(x[0]));
  return c + cpu::reduce_run<true, A>(x, n, c, DevA<A>{}) / A(n);
}
template <typename A>
struct SqDevA : SumA<A> {
  template <typename T>
  A step(A a, T v, A c) const {
    const A d = A(load(v)) - c;
    return a + d * d;
  }
  cpu::vhalf hstep_c(cpu::vhalf a, cpu::vhalf v, cpu::vhalf c) const { return a + (v - c) * (v - c); }
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return a + b; }
};
template <typename A>
struct MaxA {
  static constexpr bool kSelectMax = true, kSelectAbs = false;  // cpu::SelectOp (float leaves)
  A init() const { return -INFINITY; }
  template <typename T>
  A step(A a, T v, A) const {
    return A(load(v)) > a ? A(load(v)) : a;
  }
  A merge(A a, A b) const { return b > a ? b : a; }
  // Float rows take reduce_run's vector leaf (cpu::HalfVectorOp).
  cpu::vhalf hstep(cpu::vhalf a, cpu::vhalf v) const { return v > a ? v : a; }
  cpu::vhalf hmerge(cpu::vhalf a, cpu::vhalf b) const { return hstep(a, b); }
};
// e^z for softmax's z = x - max <= 0 (or NaN): exp_fast's rounding of n, two-step reduction and
// polynomial without its clamps and the selects for overflow and NaN that z <= 0 never needs.
// 2^n comes straight from the rounding constant's low bits (kShift holds n + 127 there; n >= -126
// for z >= -87, and the select drops the lanes below, -inf included). NaN stays NaN: r, hence the
// polynomial, is NaN. Checked on every float in [-88, 0]: bitwise equal to exp_fast down to
// z = -86.64; below (results under 2.4e-38) this rounds once where exp_fast's 2^(n-1) * 2 rounds
// through a subnormal or gives 0 (n = -126); 8.3e-8 largest relative error against double.
[[gnu::always_inline]] inline float exp_shifted(float z) {
  constexpr float kShift = 12582912.0f + 127.0f;  // 1.5 * 2^23 + the exponent bias
  const float shifted = z * 1.44269504088896341f + kShift;
  const float n = shifted - kShift;
  const float y = cpu::exp_reduced(z, n);
  const float res = y * std::bit_cast<float>(std::bit_cast<uint32_t>(shifted) << 23);
  return z < -87.0f ? 0.0f : res;
}
inline double exp_shifted(double z) { return std::exp(z); }

// e[j] = exp(x[j] - c) for j < n (c the row's max); returns their sum. e may be the output row
// (float) or a float buffer (bf16/f16, rounded later), in L1 either way.
template <typename A, typename T>
A exp_sum(const T* x, int64_t n, A c, A* e) {
  constexpr int64_t L = 16;
  A acc[L] = {};
  int64_t i = 0;
  // The exponentials first, then their sum in two 8-lane vectors: lane k of lo (hi) adds e[k],
  // e[k + 16], ... (e[k + 8], e[k + 24], ...) as acc[k] (acc[k + 8]) below does, so the same
  // sums. Fused in one loop, GCC kept the 16 partial sums in memory, a store-to-load chain per 16
  // elements; one 16-lane vector is no better where vectors are 8 floats (AVX2): GCC spilled it
  // to the stack on every step, 37% of softmax/bfloat16/rows's engine time (perf, 1 thread).
  for (int64_t j = 0; j < n; ++j) e[j] = exp_shifted(A(load(x[j])) - c);
  if constexpr (std::is_same_v<A, float>) {
    cpu::vhalf lo{}, hi{};
    for (; i + L <= n; i += L) lo += cpu::load8(e + i), hi += cpu::load8(e + i + 8);
    for (int64_t k = 0; k < L / 2; ++k) acc[k] = lo[k], acc[k + L / 2] = hi[k];
  } else {
    for (; i + L <= n; i += L)
      for (int64_t k = 0; k < L; ++k) acc[k] += e[i + k];
  }
  for (int64_t k = 0; i < n; ++i, ++k) acc[k] += e[i];
  for (int64_t w = L / 2; w > 0; w /= 2)
    for (int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0];
}

// x, y: contiguous (O, R, I); softmax or log_softmax along R.
template <bool kLog, typename T>
void softmax_kernel(const T* x, T* y, int64_t O, int64_t R, int64_t I) {
  using A = core::opmath_t<T>;
  const bool par = num_threads() > 1 && O * R * I >= kParallelGrain;
  if (I == 1) {
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      std::vector<A> buf(static_cast<size_t>(R));
      // nowait: the region's end is the one barrier, as in layer_norm_with_stats.
#pragma omp for schedule(static) nowait
      for (int64_t o = 0; o < O; ++o) {
        const T* xr = x + o * R;
        T* yr = y + o * R;
        const A m = cpu::reduce_run<false, A>(xr, R, A(0), MaxA<A>{});
        if constexpr (kLog) {
          const A sub = m + std::log(exp_sum<A>(xr, R, m, buf.data()));
          if constexpr (std::is_same_v<T, core::BFloat16>) {
            for (int64_t r = 0; r < R; ++r) buf[size_t(r)] = A(load(xr[r])) - sub;
            cpu::store_bf16(yr, buf.data(), R);
          } else {
            for (int64_t r = 0; r < R; ++r) yr[r] = static_cast<T>(A(load(xr[r])) - sub);
          }
        } else if constexpr (std::is_same_v<T, A>) {
          // The exponentials straight into the output row, then scaled in place (as ATen's
          // vectorised softmax): one row buffer less to walk through L1.
          const A inv = A(1) / exp_sum<A>(xr, R, m, yr);
          for (int64_t r = 0; r < R; ++r) yr[r] *= inv;
        } else {
          const A inv = A(1) / exp_sum<A>(xr, R, m, buf.data());
          if constexpr (std::is_same_v<T, core::BFloat16>) {
            for (int64_t r = 0; r < R; ++r) buf[size_t(r)] *= inv;
            cpu::store_bf16(yr, buf.data(), R);
          } else {
            for (int64_t r = 0; r < R; ++r) yr[r] = static_cast<T>(buf[size_t(r)] * inv);
          }
        }
      }
    }
    return;
  }
#pragma omp parallel num_threads(par ? num_threads() : 1)
  {
    std::vector<A> m(static_cast<size_t>(I)), s(static_cast<size_t>(I));
#pragma omp for schedule(static) nowait
    for (int64_t o = 0; o < O; ++o) {
      const T* xo = x + o * R * I;
      T* yo = y + o * R * I;
      std::fill(m.begin(), m.end(), A(-INFINITY));
      std::fill(s.begin(), s.end(), A(0));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) {
          const A v = load(xo[r * I + i]);
          m[size_t(i)] = v > m[size_t(i)] ? v : m[size_t(i)];
        }
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) s[size_t(i)] += exp_shifted(A(load(xo[r * I + i])) - m[size_t(i)]);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) {
          const A v = A(load(xo[r * I + i])) - m[size_t(i)];
          yo[r * I + i] = static_cast<T>(kLog ? v - std::log(s[size_t(i)]) : exp_shifted(v) / s[size_t(i)]);
        }
    }
  }
}

// x, y: contiguous (O, L, S); row (o, i) keeps its first min(i + 1, S) entries, zero after them.
template <typename T>
void softmax_causal_kernel(const T* x, T* y, int64_t O, int64_t L, int64_t S) {
  using A = core::opmath_t<T>;
  const bool par = num_threads() > 1 && O * L * S >= kParallelGrain;
#pragma omp parallel num_threads(par ? num_threads() : 1)
  {
    std::vector<A> buf(static_cast<size_t>(S));
#pragma omp for schedule(static) nowait
    for (int64_t row = 0; row < O * L; ++row) {
      const T* xr = x + row * S;
      T* yr = y + row * S;
      const int64_t n = std::min(row % L + 1, S);
      const A m = cpu::reduce_run<false, A>(xr, n, A(0), MaxA<A>{});
      const A inv = A(1) / exp_sum<A>(xr, n, m, buf.data());
      if constexpr (std::is_same_v<T, core::BFloat16>) {
        for (int64_t j = 0; j < n; ++j) buf[size_t(j)] *= inv;
        cpu::store_bf16(yr, buf.data(), n);
      } else {
        for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<T>(buf[size_t(j)] * inv);
      }
      std::fill(yr + n, yr + S, T(0));
    }
  }
}

template <bool kLog>
Tensor softmax_impl(const Tensor& x, int64_t dim, std::optional<DType> dtype, const char* op) {
  const Tensor xin = (dtype ? x.to(*dtype) : x).contiguous();
  TB_CHECK(core::is_floating(xin.dtype()), op, "\"", op, "_lastdim_kernel_impl\" not implemented for '",
           core::name(xin.dtype()), "'");
  const int64_t d = core::wrap_dim(dim, xin.dim(), op);
  int64_t O = 1, R = 1, I = 1;
  for (int64_t k = 0; k < xin.dim(); ++k) (k < d ? O : k == d ? R : I) *= xin.size(k);
  Tensor y = empty(xin.sizes(), xin.dtype());
  core::dispatch_floating(xin.dtype(), op,
                          [&]<typename T>() { softmax_kernel<kLog>(xin.data_ptr<T>(), y.data_ptr<T>(), O, R, I); });
  return y;
}

Tensor softmax_causal_impl(const Tensor& x) {
  const char* op = "softmax_causal";
  TB_CHECK(x.dim() >= 2, op, "expected a (..., L, S) input of at least 2 dims, got ", core::to_string(x.sizes()));
  TB_CHECK(core::is_floating(x.dtype()), op, "not implemented for '", core::name(x.dtype()), "'");
  const Tensor xin = x.contiguous();
  const int64_t L = xin.size(-2), S = xin.size(-1);
  Tensor y = empty(xin.sizes(), xin.dtype());
  if (xin.numel() == 0) return y;
  core::dispatch_floating(xin.dtype(), op, [&]<typename T>() {
    softmax_causal_kernel(xin.data_ptr<T>(), y.data_ptr<T>(), xin.numel() / (L * S), L, S);
  });
  return y;
}

// A (C) parameter as double values (or `fill` when undefined), checked to have C elements.
std::vector<double> param(const Tensor& t, int64_t C, double fill, const char* op, const char* what) {
  std::vector<double> v(size_t(C), fill);
  if (!t.defined()) return v;
  TB_CHECK(t.numel() == C, op, what, " should contain ", C, " elements not ", t.numel());
  Tensor d = t.to(DType::Float64).contiguous();
  std::copy(d.data_ptr<double>(), d.data_ptr<double>() + C, v.begin());
  return v;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const BareKernel bare("softmax", {&x});
  return softmax_impl<false>(x, dim, dtype, "softmax");
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const BareKernel bare("log_softmax", {&x});
  return softmax_impl<true>(x, dim, dtype, "log_softmax");
}
Tensor softmax_causal(const Tensor& x) { return softmax_causal_impl(x); }

// ---- layer_norm: per row of N = prod(normalized_shape) elements, mean and biased variance ----
std::tuple<Tensor, Tensor, Tensor> layer_norm_with_stats(const Tensor& x, const Shape& normalized_shape,
                                                         const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  const int64_t k = int64_t(normalized_shape.size());
  TB_CHECK(k >= 1, op, "Expected normalized_shape to be at least 1-dimensional");
  bool match = x.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) match = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  TB_CHECK(match, op, "Given normalized_shape=", core::to_string(normalized_shape), ", expected input with shape [*, ",
           core::to_string(normalized_shape).substr(1), ", but got input of size", core::to_string(x.sizes()));
  TB_CHECK(!weight.defined() || weight.sizes() == normalized_shape, op,
           "Expected weight to be of same shape as normalized_shape, but got weight of shape ",
           core::to_string(weight.defined() ? weight.sizes() : Shape{}),
           " and normalized_shape = ", core::to_string(normalized_shape));
  TB_CHECK(!bias.defined() || bias.sizes() == normalized_shape, op,
           "Expected bias to be of same shape as normalized_shape, but got bias of shape ",
           core::to_string(bias.defined() ? bias.sizes() : Shape{}),
           " and normalized_shape = ", core::to_string(normalized_shape));
  const Tensor xc = x.contiguous();
  Tensor y = empty(x.sizes(), x.dtype());
  const int64_t N = core::checked_numel(normalized_shape, op);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  Tensor mean_t, rstd_t;
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const DType adt = core::dtype_of<A>;
    mean_t = empty({M}, adt);
    rstd_t = empty({M}, adt);
    A* mp = mean_t.data_ptr<A>();
    A* rp = rstd_t.data_ptr<A>();
    const Tensor w = weight.defined() ? weight.to(adt).contiguous() : Tensor();
    const Tensor b = bias.defined() ? bias.to(adt).contiguous() : Tensor();
    const A* wp = w.defined() ? w.data_ptr<A>() : nullptr;
    const A* bp = b.defined() ? b.data_ptr<A>() : nullptr;
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    const bool par = num_threads() > 1 && M * N >= kParallelGrain;
    constexpr bool kBf16 = std::is_same_v<T, core::BFloat16>;
#pragma omp parallel num_threads(par ? num_threads() : 1)
    {
      // bfloat16 rows are computed in float into buf and rounded by cpu::store_bf16. nowait: the
      // region's end is the one barrier (a second one costs a whole time slice when the other
      // core's thread is descheduled on a loaded machine).
      std::vector<A> buf(kBf16 ? size_t(N) : 0);
#pragma omp for schedule(static) nowait
      for (int64_t m = 0; m < M; ++m) {
        const T* xr = xp + m * N;
        T* yr = yp + m * N;
        const A mean = shifted_mean<A>(xr, N);
        const A var = cpu::reduce_run<true, A>(xr, N, mean, SqDevA<A>{}) / A(N);
        const A rstd = A(1) / std::sqrt(var + A(eps));
        mp[m] = mean;
        rp[m] = rstd;
        auto row = [&](auto* out) {  // out: T (yr) or A (buf)
          using O = std::remove_pointer_t<decltype(out)>;
          if (wp && bp) {
            for (int64_t i = 0; i < N; ++i) out[i] = static_cast<O>((A(load(xr[i])) - mean) * rstd * wp[i] + bp[i]);
          } else {
            for (int64_t i = 0; i < N; ++i) {
              A v = (A(load(xr[i])) - mean) * rstd;
              if (wp) v *= wp[i];
              if (bp) v += bp[i];
              out[i] = static_cast<O>(v);
            }
          }
        };
        if constexpr (kBf16) {
          row(buf.data());
          cpu::store_bf16(yr, buf.data(), N);
        } else {
          row(yr);
        }
      }
    }
  });
  return {y, mean_t, rstd_t};
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const BareKernel bare("layer_norm", {&x, &weight, &bias});
  return std::get<0>(layer_norm_with_stats(x, normalized_shape, weight, bias, eps));
}

// ---- group_norm: per (sample, group) over the group's C / G channels and all spatial positions ----
std::tuple<Tensor, Tensor, Tensor> group_norm_with_stats(const Tensor& x, int64_t num_groups, const Tensor& weight,
                                                         const Tensor& bias, double eps) {
  const char* op = "group_norm";
  TB_CHECK(x.dim() >= 2, op, "Expected at least 2 dimensions for input tensor but received ", x.dim());
  const int64_t N = x.size(0), C = x.size(1), G = num_groups;
  TB_CHECK(G > 0 && C % G == 0, op,
           "Expected number of channels in input to be divisible by num_groups, but got input of shape ",
           core::to_string(x.sizes()), " and num_groups=", G);
  for (const Tensor* p : {&weight, &bias})
    TB_CHECK(!p->defined() || (p->dim() == 1 && p->numel() == C), op, "Expected ", p == &weight ? "weight" : "bias",
             " to be a vector of size equal to the number of channels in input, but got ",
             p == &weight ? "weight" : "bias", " of shape ", core::to_string(p->sizes()), " and input of shape ",
             core::to_string(x.sizes()));
  const int64_t S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const int64_t D = C / G, L = D * S;  // channels per group; elements per (sample, group)
  const Tensor xc = x.contiguous();
  Tensor y = empty(x.sizes(), x.dtype());
  Tensor mean_t, rstd_t;
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const DType adt = core::dtype_of<A>;
    mean_t = empty({N, G}, adt);
    rstd_t = empty({N, G}, adt);
    A* mp = mean_t.data_ptr<A>();
    A* rp = rstd_t.data_ptr<A>();
    const Tensor w = weight.defined() ? weight.to(adt).contiguous() : Tensor();
    const Tensor b = bias.defined() ? bias.to(adt).contiguous() : Tensor();
    const A* wp = w.defined() ? w.data_ptr<A>() : nullptr;
    const A* bp = b.defined() ? b.data_ptr<A>() : nullptr;
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    const bool par = num_threads() > 1 && x.numel() >= kParallelGrain;
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
    for (int64_t ng = 0; ng < N * G; ++ng) {
      const T* xr = xp + ng * L;  // a group's channels are adjacent in (N, C, S)
      T* yr = yp + ng * L;
      const A mean = L ? shifted_mean<A>(xr, L) : A(NAN);
      const A var = L ? cpu::reduce_run<true, A>(xr, L, mean, SqDevA<A>{}) / A(L) : A(NAN);
      const A rstd = A(1) / std::sqrt(var + A(eps));
      mp[ng] = mean;
      rp[ng] = rstd;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t c = (ng % G) * D + d;
        // (x - mean) * alpha + b, not x * alpha + (b - mean * alpha): the folded form cancels two
        // large products, an error of ulp(x * rstd) where the centred form gives exactly b.
        const A alpha = rstd * (wp ? wp[c] : A(1));
        const A beta = bp ? bp[c] : A(0);
        for (int64_t s = 0; s < S; ++s) yr[d * S + s] = static_cast<T>((A(load(xr[d * S + s])) - mean) * alpha + beta);
      }
    }
  });
  // PyTorch's CPU group_norm returns a channels-last input's result channels-last (Note
  // [Channels-last by strides]); the kernel above works in (N, C, S) order, so that costs a copy.
  return {in_memory_format_of(x, y), mean_t, rstd_t};
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const BareKernel bare("group_norm", {&x, &weight, &bias});
  return std::get<0>(group_norm_with_stats(x, num_groups, weight, bias, eps));
}

// ---- batch_norm: statistics per channel over (N, spatial) in double ----
std::tuple<Tensor, Tensor, Tensor> batch_norm_with_stats(const Tensor& x, const Tensor& running_mean,
                                                         const Tensor& running_var, const Tensor& weight,
                                                         const Tensor& bias, bool training, double momentum,
                                                         double eps) {
  const char* op = "batch_norm";
  TB_CHECK(x.dim() >= 2, op, "expected an input of 2 or more dims (N, C, ...), got shape ", core::to_string(x.sizes()));
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(1, N * C);
  TB_CHECK(!training || N * S != 1, op, "Expected more than 1 value per channel when training, got input size ",
           core::to_string(x.sizes()));
  TB_CHECK(training || (running_mean.defined() && running_var.defined()), op,
           "running_mean and running_var must be defined in evaluation mode");
  const std::vector<double> w = param(weight, C, 1.0, op, "weight");
  const std::vector<double> b = param(bias, C, 0.0, op, "bias");
  std::vector<double> rm = param(running_mean, C, 0.0, op, "running_mean");
  std::vector<double> rv = param(running_var, C, 1.0, op, "running_var");
  const Tensor xc = x.contiguous();
  Tensor y = empty(x.sizes(), x.dtype());
  const int64_t cnt = N * S;
  Tensor save_mean = empty({C}, DType::Float64), save_invstd = empty({C}, DType::Float64);
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const T* xp = xc.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    std::vector<double> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C));  // var: biased
    const bool par = num_threads() > 1 && x.numel() >= kParallelGrain;
    if (training) {
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
      for (int64_t c = 0; c < C; ++c) {
        double s = 0, q = 0;
        for (int64_t n = 0; n < N; ++n)
          s += cpu::reduce_run<false, double>(xp + (n * C + c) * S, S, 0.0, SumA<double>{});
        const double mu = s / double(cnt);
        for (int64_t n = 0; n < N; ++n)
          q += cpu::reduce_run<true, double>(xp + (n * C + c) * S, S, mu, SqDevA<double>{});
        mean[size_t(c)] = mu;
        var[size_t(c)] = q / double(cnt);
      }
    } else {
      mean = rm;
      var = rv;
    }
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
    for (int64_t nc = 0; nc < N * C; ++nc) {
      const int64_t c = nc % C;
      const double invstd = 1.0 / std::sqrt(var[size_t(c)] + eps);
      const A alpha = A(invstd * w[size_t(c)]), mu = A(mean[size_t(c)]), beta = A(b[size_t(c)]);
      const T* xr = xp + nc * S;
      T* yr = yp + nc * S;
      for (int64_t i = 0; i < S; ++i)
        yr[i] = static_cast<T>((A(load(xr[i])) - mu) * alpha + beta);  // centred, as group_norm
    }
    for (int64_t c = 0; c < C; ++c) {
      save_mean.data_ptr<double>()[c] = mean[size_t(c)];
      save_invstd.data_ptr<double>()[c] = 1.0 / std::sqrt(var[size_t(c)] + eps);
    }
    if (training) {
      for (int64_t c = 0; c < C; ++c) {
        const double unbiased = cnt > 1 ? var[size_t(c)] * double(cnt) / double(cnt - 1) : NAN;
        rm[size_t(c)] = (1 - momentum) * rm[size_t(c)] + momentum * mean[size_t(c)];
        rv[size_t(c)] = (1 - momentum) * rv[size_t(c)] + momentum * unbiased;
      }
    }
  });
  if (training) {
    Tensor rmh = running_mean, rvh = running_var;  // handles share the caller's storage
    if (rmh.defined()) rmh.copy_(from_vector(rm, {C}, DType::Float64).view(rmh.sizes()));
    if (rvh.defined()) rvh.copy_(from_vector(rv, {C}, DType::Float64).view(rvh.sizes()));
  }
  return {y, save_mean, save_invstd};
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const BareKernel bare("batch_norm", {&x, &weight, &bias});
  return std::get<0>(batch_norm_with_stats(x, running_mean, running_var, weight, bias, training, momentum, eps));
}

}  // namespace tb::ops
