// The fused backward kernels of the nn_norm family (see nn_norm.h): softmax_backward_data,
// log_softmax_backward_data, layer_norm_backward, group_norm_backward, batch_norm_backward.
// Each makes its operands contiguous, computes in opmath (float for bf16/f16), and runs one
// parallel pass per row (rows independent, so no atomics); parameter gradients (a reduction
// across rows) use per-thread partial sums merged at the end.
#include <cmath>
#include <vector>

#include <omp.h>

#include "engine/ops/cpu/reduce_kernel.h"
#include "engine/ops/nn_norm.h"

namespace tb::ops {

namespace {

using cpu::load;

// sum_{i < n} f(i) over 16 independent accumulators, so the loop vectorises without
// reassociating (and rounds like the pairwise sums of the forward).
template <typename A, typename F>
A lane_sum(int64_t n, F&& f) {
  constexpr int64_t L = 16;
  A acc[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int64_t k = 0; k < L; ++k) acc[k] += f(i + k);
  for (int64_t k = 0; i < n; ++i, ++k) acc[k] += f(i);
  for (int64_t w = L / 2; w > 0; w /= 2)
    for (int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0];
}

// g, y, gi: contiguous (O, R, I); d input of softmax (kLog: log_softmax) along R.
template <bool kLog, typename T>
void softmax_backward_kernel(const T* g, const T* y, T* gi, int64_t O, int64_t R, int64_t I) {
  using A = core::opmath_t<T>;
  const bool par = num_threads() > 1 && O * R * I >= kParallelGrain;
  if (I == 1) {
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
    for (int64_t o = 0; o < O; ++o) {
      const T* gr = g + o * R;
      const T* yr = y + o * R;
      T* out = gi + o * R;
      if constexpr (kLog) {
        const A s = lane_sum<A>(R, [&](int64_t r) { return A(load(gr[r])); });
        for (int64_t r = 0; r < R; ++r) out[r] = static_cast<T>(A(load(gr[r])) - cpu::exp_fast(A(load(yr[r]))) * s);
      } else {
        const A s = lane_sum<A>(R, [&](int64_t r) { return A(load(gr[r])) * A(load(yr[r])); });
        for (int64_t r = 0; r < R; ++r) out[r] = static_cast<T>(A(load(yr[r])) * (A(load(gr[r])) - s));
      }
    }
    return;
  }
#pragma omp parallel num_threads(par ? num_threads() : 1)
  {
    std::vector<A> s(static_cast<size_t>(I));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < O; ++o) {
      const T* go = g + o * R * I;
      const T* yo = y + o * R * I;
      T* out = gi + o * R * I;
      std::fill(s.begin(), s.end(), A(0));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i)
          s[size_t(i)] += kLog ? A(load(go[r * I + i])) : A(load(go[r * I + i])) * A(load(yo[r * I + i]));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) {
          const A gv = load(go[r * I + i]), yv = load(yo[r * I + i]);
          out[r * I + i] = static_cast<T>(kLog ? gv - cpu::exp_fast(yv) * s[size_t(i)] : yv * (gv - s[size_t(i)]));
        }
    }
  }
}

template <bool kLog>
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& output, int64_t dim, const char* op) {
  TB_CHECK(grad.sizes() == output.sizes(), op, "grad of shape ", core::to_string(grad.sizes()),
           " does not match output of shape ", core::to_string(output.sizes()));
  const Tensor y = output.contiguous();
  const Tensor g = grad.to(output.dtype()).contiguous();
  const int64_t d = core::wrap_dim(dim, y.dim(), op);
  int64_t O = 1, R = 1, I = 1;
  for (int64_t k = 0; k < y.dim(); ++k) (k < d ? O : k == d ? R : I) *= y.size(k);
  Tensor gi = empty(y.sizes(), y.dtype());
  core::dispatch_floating(y.dtype(), op, [&]<typename T>() {
    softmax_backward_kernel<kLog>(g.data_ptr<T>(), y.data_ptr<T>(), gi.data_ptr<T>(), O, R, I);
  });
  return gi;
}

// A parameter's values in opmath (or null when undefined), contiguous.
template <typename A>
Tensor opmath_param(const Tensor& t) {
  return t.defined() ? t.to(core::dtype_of<A>).contiguous() : Tensor();
}

}  // namespace

Tensor softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim) {
  KernelEvent event("softmax_backward_data", {&grad, &output});  // Note [Backward kernels]
  return softmax_backward_impl<false>(grad, output, dim, "softmax_backward_data");
}
Tensor log_softmax_backward_data(const Tensor& grad, const Tensor& output, int64_t dim) {
  KernelEvent event("log_softmax_backward_data", {&grad, &output});  // Note [Backward kernels]
  return softmax_backward_impl<true>(grad, output, dim, "log_softmax_backward_data");
}

// ---- layer_norm: per row, d x = rstd * (w g - mean(w g) - xhat * mean(w g xhat)) ----
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& x,
                                                       const Shape& normalized_shape, const Tensor& mean,
                                                       const Tensor& rstd, const Tensor& weight,
                                                       std::array<bool, 3> mask) {
  KernelEvent event("layer_norm_backward", {&grad, &x, &mean, &rstd, &weight});  // Note [Backward kernels]
  const char* op = "layer_norm_backward";
  TB_CHECK(grad.sizes() == x.sizes(), op, "grad of shape ", core::to_string(grad.sizes()), " does not match input ",
           core::to_string(x.sizes()));
  const int64_t N = core::checked_numel(normalized_shape, op);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  const Tensor xc = x.contiguous(), gc = grad.to(x.dtype()).contiguous();
  const DType pdt = weight.defined() ? weight.dtype() : x.dtype();
  Tensor dx, dw, db;
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const DType adt = core::dtype_of<A>;
    const Tensor w = opmath_param<A>(weight);
    const Tensor mc = mean.to(adt).contiguous(), rc = rstd.to(adt).contiguous();
    const A* wp = w.defined() ? w.data_ptr<A>() : nullptr;
    const A* mp = mc.data_ptr<A>();
    const A* rp = rc.data_ptr<A>();
    const T* xp = xc.data_ptr<T>();
    const T* gp = gc.data_ptr<T>();
    if (mask[0]) dx = empty(x.sizes(), x.dtype());
    T* dxp = mask[0] ? dx.data_ptr<T>() : nullptr;
    const bool want_p = mask[1] || mask[2];
    const bool par = num_threads() > 1 && M * N >= kParallelGrain;
    const int nt = par ? num_threads() : 1;
    // Per-thread partial sums of d weight (g * xhat) and d bias (g), (nt, N) each.
    std::vector<A> pw(want_p ? size_t(nt) * size_t(N) : 0), pb(want_p ? size_t(nt) * size_t(N) : 0);
#pragma omp parallel num_threads(nt)
    {
      const size_t t = size_t(omp_get_thread_num());
      A* pwr = want_p ? pw.data() + t * size_t(N) : nullptr;
      A* pbr = want_p ? pb.data() + t * size_t(N) : nullptr;
#pragma omp for schedule(static)
      for (int64_t m = 0; m < M; ++m) {
        const T* xr = xp + m * N;
        const T* gr = gp + m * N;
        const A mu = mp[m], rs = rp[m];
        if (dxp) {
          T* out = dxp + m * N;
          const A inv_n = A(1) / A(N);
          if (wp) {
            const A a = lane_sum<A>(N, [&](int64_t i) { return wp[i] * A(load(gr[i])); }) * inv_n;
            const A b = lane_sum<A>(N, [&](int64_t i) { return wp[i] * A(load(gr[i])) * (A(load(xr[i])) - mu); }) * rs *
                        inv_n;
            for (int64_t i = 0; i < N; ++i)
              out[i] = static_cast<T>(rs * (wp[i] * A(load(gr[i])) - a - (A(load(xr[i])) - mu) * rs * b));
          } else {
            const A a = lane_sum<A>(N, [&](int64_t i) { return A(load(gr[i])); }) * inv_n;
            const A b = lane_sum<A>(N, [&](int64_t i) { return A(load(gr[i])) * (A(load(xr[i])) - mu); }) * rs * inv_n;
            for (int64_t i = 0; i < N; ++i)
              out[i] = static_cast<T>(rs * (A(load(gr[i])) - a - (A(load(xr[i])) - mu) * rs * b));
          }
        }
        if (want_p)
          for (int64_t i = 0; i < N; ++i) {
            const A gv = load(gr[i]);
            pwr[i] += gv * (A(load(xr[i])) - mu) * rs;
            pbr[i] += gv;
          }
      }
    }
    if (want_p) {
      Tensor sw = zeros({N}, adt), sb = zeros({N}, adt);
      A* swp = sw.data_ptr<A>();
      A* sbp = sb.data_ptr<A>();
      for (int t = 0; t < nt; ++t)
        for (int64_t i = 0; i < N; ++i) {
          swp[i] += pw[size_t(t) * size_t(N) + size_t(i)];
          sbp[i] += pb[size_t(t) * size_t(N) + size_t(i)];
        }
      if (mask[1]) dw = sw.view(normalized_shape).to(pdt);
      if (mask[2]) db = sb.view(normalized_shape).to(pdt);
    }
  });
  return {dx, dw, db};
}

// ---- group_norm: per (n, g) row of L = D * S elements, layer_norm's formula with per-channel w ----
std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& mean,
                                                       const Tensor& rstd, const Tensor& weight, int64_t num_groups,
                                                       std::array<bool, 3> mask) {
  KernelEvent event("group_norm_backward", {&grad, &x, &mean, &rstd, &weight});  // Note [Backward kernels]
  const char* op = "group_norm_backward";
  TB_CHECK(grad.sizes() == x.sizes() && x.dim() >= 2, op, "grad of shape ", core::to_string(grad.sizes()),
           " does not match input ", core::to_string(x.sizes()));
  const int64_t N = x.size(0), C = x.size(1), G = num_groups;
  const int64_t S = N * C == 0 ? 0 : x.numel() / (N * C), D = C / G;
  const Tensor xc = x.contiguous(), gc = grad.to(x.dtype()).contiguous();
  const DType pdt = weight.defined() ? weight.dtype() : x.dtype();
  Tensor dx, dw, db;
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const DType adt = core::dtype_of<A>;
    const Tensor w = opmath_param<A>(weight);
    const Tensor mc = mean.to(adt).contiguous(), rc = rstd.to(adt).contiguous();
    const A* wp = w.defined() ? w.data_ptr<A>() : nullptr;
    const A* mp = mc.data_ptr<A>();
    const A* rp = rc.data_ptr<A>();
    const T* xp = xc.data_ptr<T>();
    const T* gp = gc.data_ptr<T>();
    // Per (n, c): sum of g and of g * x over the spatial positions.
    std::vector<A> sg(size_t(N * C)), sgx(size_t(N * C));
    const bool par = num_threads() > 1 && x.numel() >= kParallelGrain;
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
    for (int64_t nc = 0; nc < N * C; ++nc) {
      const T* xr = xp + nc * S;
      const T* gr = gp + nc * S;
      sg[size_t(nc)] = lane_sum<A>(S, [&](int64_t s) { return A(load(gr[s])); });
      sgx[size_t(nc)] = lane_sum<A>(S, [&](int64_t s) { return A(load(gr[s])) * A(load(xr[s])); });
    }
    if (mask[0]) {
      dx = empty(x.sizes(), x.dtype());
      T* dxp = dx.data_ptr<T>();
      const A inv_l = A(1) / A(D * S);
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
      for (int64_t ng = 0; ng < N * G; ++ng) {
        const int64_t n = ng / G, c0 = (ng % G) * D;
        const A mu = mp[ng], rs = rp[ng];
        A a = 0, b = 0;  // sum of w g, and of w g (x - mu), over the group
        for (int64_t d = 0; d < D; ++d) {
          const A wc = wp ? wp[c0 + d] : A(1);
          const size_t k = size_t(n * C + c0 + d);
          a += wc * sg[k];
          b += wc * (sgx[k] - mu * sg[k]);
        }
        a *= inv_l;
        b *= rs * rs * inv_l;
        for (int64_t d = 0; d < D; ++d) {
          const A wc = wp ? wp[c0 + d] : A(1);
          const int64_t off = (n * C + c0 + d) * S;
          for (int64_t s = 0; s < S; ++s)
            dxp[off + s] = static_cast<T>(rs * (wc * A(load(gp[off + s])) - a - (A(load(xp[off + s])) - mu) * b));
        }
      }
    }
    if (mask[1] || mask[2]) {
      Tensor sw = zeros({C}, adt), sb = zeros({C}, adt);
      A* swp = sw.data_ptr<A>();
      A* sbp = sb.data_ptr<A>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
          const int64_t ng = n * G + c / D;
          const size_t k = size_t(n * C + c);
          swp[c] += (sgx[k] - mp[ng] * sg[k]) * rp[ng];
          sbp[c] += sg[k];
        }
      if (mask[1]) dw = sw.to(pdt);
      if (mask[2]) db = sb.to(pdt);
    }
  });
  return {dx, dw, db};
}

// ---- batch_norm: per channel over (N, spatial); sums in double as the forward's statistics ----
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                                       const Tensor& mean, const Tensor& invstd, bool training,
                                                       std::array<bool, 3> mask) {
  KernelEvent event("batch_norm_backward", {&grad, &x, &weight, &mean, &invstd});  // Note [Backward kernels]
  const char* op = "batch_norm_backward";
  TB_CHECK(grad.sizes() == x.sizes() && x.dim() >= 2, op, "grad of shape ", core::to_string(grad.sizes()),
           " does not match input ", core::to_string(x.sizes()));
  const int64_t N = x.size(0), C = x.size(1), S = N * C == 0 ? 0 : x.numel() / (N * C), cnt = N * S;
  const Tensor xc = x.contiguous(), gc = grad.to(x.dtype()).contiguous();
  const Tensor mc = mean.to(DType::Float64).contiguous(), ic = invstd.to(DType::Float64).contiguous();
  const Tensor wc = weight.defined() ? weight.to(DType::Float64).contiguous() : Tensor();
  const double* mp = mc.data_ptr<double>();
  const double* ip = ic.data_ptr<double>();
  const double* wp = wc.defined() ? wc.data_ptr<double>() : nullptr;
  const DType pdt = weight.defined() ? weight.dtype() : x.dtype();
  Tensor dx, dw, db;
  std::vector<double> sg(static_cast<size_t>(C)), sgx(static_cast<size_t>(C));  // sum g, sum g (x - mean) per channel
  core::dispatch_floating(x.dtype(), op, [&]<typename T>() {
    using A = core::opmath_t<T>;
    const T* xp = xc.data_ptr<T>();
    const T* gp = gc.data_ptr<T>();
    const bool par = num_threads() > 1 && x.numel() >= kParallelGrain;
    if (training || mask[1] || mask[2]) {
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
      for (int64_t c = 0; c < C; ++c) {
        double a = 0, b = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* xr = xp + (n * C + c) * S;
          const T* gr = gp + (n * C + c) * S;
          a += lane_sum<double>(S, [&](int64_t s) { return double(load(gr[s])); });
          b += lane_sum<double>(S, [&](int64_t s) { return double(load(gr[s])) * (double(load(xr[s])) - mp[c]); });
        }
        sg[size_t(c)] = a;
        sgx[size_t(c)] = b;
      }
    }
    if (mask[0]) {
      dx = empty(x.sizes(), x.dtype());
      T* dxp = dx.data_ptr<T>();
#pragma omp parallel for num_threads(par ? num_threads() : 1) schedule(static)
      for (int64_t nc = 0; nc < N * C; ++nc) {
        const int64_t c = nc % C;
        const double is = ip[c], scale = is * (wp ? wp[c] : 1.0);
        const T* xr = xp + nc * S;
        const T* gr = gp + nc * S;
        T* out = dxp + nc * S;
        if (training) {
          // d x = w * invstd * (g - mean(g) - (x - mean) * invstd^2 * mean(g (x - mean)))
          const A k = A(sgx[size_t(c)] * is * is / double(cnt) * scale);
          const A g0 = A(sg[size_t(c)] / double(cnt) * scale), mu = A(mp[c]), sc = A(scale);
          for (int64_t s = 0; s < S; ++s) out[s] = static_cast<T>(A(load(gr[s])) * sc - g0 - (A(load(xr[s])) - mu) * k);
        } else {
          const A sc = A(scale);
          for (int64_t s = 0; s < S; ++s) out[s] = static_cast<T>(A(load(gr[s])) * sc);
        }
      }
    }
  });
  if (mask[1]) {
    for (int64_t c = 0; c < C; ++c) sgx[size_t(c)] *= ip[c];  // sum g * xhat
    dw = from_vector(sgx, {C}, DType::Float64).to(pdt);
  }
  if (mask[2]) db = from_vector(sg, {C}, DType::Float64).to(pdt);
  return {dx, dw, db};
}

}  // namespace tb::ops
