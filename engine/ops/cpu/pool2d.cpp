// max_pool2d and avg_pool2d: PyTorch's argument checks and output-size rule (including ceil_mode,
// whose last window must start inside the input or left padding), then one loop per (n, c) plane,
// planes split across OpenMP threads. Windows are clipped to the input, so padding never reads
// memory; max pooling treats padding as -inf, average pooling counts it only when asked. The
// backward kernels (max_pool2d_with_indices_backward, avg_pool2d_backward) follow the forwards.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>

#include "engine/ops/nn.h"

namespace tb::ops {

namespace {

struct Pool {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t N, C, H, W, OH, OW;
  bool batched;
};

int64_t pick(const Shape& s, int i, const char* op, const char* what) {
  TB_CHECK(s.size() == 1 || s.size() == 2, op, what, " must be a single int or a tuple of two ints, got ",
           core::to_string(s));
  return s.size() == 1 ? s[0] : s[size_t(i)];
}

int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  const int64_t span = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t o = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (o - 1) * stride >= in + pad) --o;  // the last window must start inside
  return o;
}

// x: the input's sizes, (N, C, H, W) or (C, H, W).
Pool make_pool(const char* op, const Shape& x, const Shape& kernel, const Shape& stride, const Shape& padding,
               const Shape& dilation, bool ceil_mode) {
  const int64_t nd = int64_t(x.size());
  TB_CHECK(nd == 3 || nd == 4, op, "expected a 3-D or 4-D input, got shape ", core::to_string(x));
  Pool p{};
  p.kh = pick(kernel, 0, op, "kernel_size");
  p.kw = pick(kernel, 1, op, "kernel_size");
  p.sh = stride.empty() ? p.kh : pick(stride, 0, op, "stride");
  p.sw = stride.empty() ? p.kw : pick(stride, 1, op, "stride");
  p.ph = pick(padding, 0, op, "padding");
  p.pw = pick(padding, 1, op, "padding");
  p.dh = pick(dilation, 0, op, "dilation");
  p.dw = pick(dilation, 1, op, "dilation");
  TB_CHECK(p.kh > 0 && p.kw > 0, op, "kernel size should be greater than zero, got ", p.kh, "x", p.kw);
  TB_CHECK(p.sh > 0 && p.sw > 0, op, "stride should be greater than zero, got ", p.sh, "x", p.sw);
  TB_CHECK(p.dh > 0 && p.dw > 0, op, "dilation should be greater than zero, got ", p.dh, "x", p.dw);
  TB_CHECK(p.ph >= 0 && p.pw >= 0 && p.ph <= ((p.kh - 1) * p.dh + 1) / 2 && p.pw <= ((p.kw - 1) * p.dw + 1) / 2, op,
           "pad should be at most half of effective kernel size, but got pad=", p.ph, "x", p.pw,
           " and kernel_size=", p.kh, "x", p.kw);
  p.batched = nd == 4;
  const size_t o = p.batched ? 1 : 0;
  p.N = p.batched ? x[0] : 1;
  p.C = x[o];
  p.H = x[o + 1];
  p.W = x[o + 2];
  TB_CHECK(p.C > 0 && p.H > 0 && p.W > 0, op, "expected input with non-zero channel and spatial sizes, got shape ",
           core::to_string(x));
  p.OH = out_size(p.H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.OW = out_size(p.W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  TB_CHECK(p.OH >= 1 && p.OW >= 1, op, "given input size ", core::to_string(x), ", the calculated output size ", p.OH,
           "x", p.OW, " is too small");
  return p;
}

Tensor make_output(const Pool& p, DType dt) {
  return p.batched ? empty({p.N, p.C, p.OH, p.OW}, dt) : empty({p.C, p.OH, p.OW}, dt);
}

// Note [avg_pool2d by output rows]
// avg_pool2d summed each output's window in a scalar loop and divided, one output at a time (GCC
// vectorised the kw-long inner loop, so a 2x2 window paid a vector-path check per row of the
// window): 0.82-0.98x LibTorch's time on (32, 64, 56, 56) with 2x2 windows. Now, for float and
// double, the outputs of a row whose windows lie inside the input's columns (no left or right
// padding, ow in [lo, hi)) are summed a block at a time: acc[j] += one input
// element of output j's window, window element by window element in the scalar loop's order (rows
// of the window, then columns), so each sum rounds as before, then divided by the one divisor
// those outputs share. The loop over j reads with stride sw; sw = 1 and 2 are compiled for. The
// outputs over padding, and every output of a reduced float (its sum is float, its input
// bfloat16), keep the scalar loop.
template <int64_t SW, typename T>
void avg_row_add(T* __restrict__ acc, const T* __restrict__ src, int64_t n, int64_t sw) {
  const int64_t s = SW > 0 ? SW : sw;
  for (int64_t j = 0; j < n; ++j) acc[j] += src[j * s];
}

template <int64_t SW, typename T>
void avg_row_interior(const T* ip, T* orow, const Pool& p, int64_t h0, int64_t h1, int64_t lo, int64_t hi, T div) {
  constexpr int64_t kBlock = 256;
  alignas(64) T acc[kBlock];
  for (int64_t j0 = lo; j0 < hi; j0 += kBlock) {
    const int64_t n = std::min(kBlock, hi - j0);
    std::fill(acc, acc + n, T(0));
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t k = 0; k < p.kw; ++k) avg_row_add<SW>(acc, ip + h * p.W + j0 * p.sw - p.pw + k, n, p.sw);
    for (int64_t j = 0; j < n; ++j) orow[j0 + j] = acc[j] / div;
  }
}

}  // namespace

Tensor max_pool2d(const Tensor& x_, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  const BareKernel bare("max_pool2d", {&x_});
  const Pool p = make_pool("max_pool2d", x_.sizes(), kernel, stride, padding, dilation, ceil_mode);
  const Tensor x = x_.contiguous();
  Tensor out = make_output(p, x.dtype());
  core::dispatch_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    // x: (N * C, H, W) contiguous; out: (N * C, OH, OW).
#pragma omp parallel for schedule(static) if (p.N * p.C * p.OH * p.OW > 16384)
    for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
      const T* ip = in + plane * p.H * p.W;
      T* op = o + plane * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        const int64_t h0 = oh * p.sh - p.ph;
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const int64_t w0 = ow * p.sw - p.pw;
          Op best = -std::numeric_limits<Op>::infinity();
          for (int64_t i = 0; i < p.kh; ++i) {
            const int64_t h = h0 + i * p.dh;
            if (h < 0 || h >= p.H) continue;
            for (int64_t j = 0; j < p.kw; ++j) {
              const int64_t w = w0 + j * p.dw;
              if (w < 0 || w >= p.W) continue;
              const Op v = Op(ip[h * p.W + w]);
              if (v > best || std::isnan(v)) best = v;
              if (std::isnan(best)) break;
            }
          }
          op[oh * p.OW + ow] = T(best);
        }
      }
    }
  });
  return out;
}

Tensor avg_pool2d(const Tensor& x_, const Shape& kernel, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const BareKernel bare("avg_pool2d", {&x_});
  const Pool p = make_pool("avg_pool2d", x_.sizes(), kernel, stride, padding, {1}, ceil_mode);
  TB_CHECK(!divisor_override || *divisor_override != 0, "avg_pool2d", "divisor must be not zero");
  const Tensor x = x_.contiguous();
  Tensor out = make_output(p, x.dtype());
  TB_CHECK(x.dtype() != DType::Bool && x.dtype() != DType::Int32, "avg_pool2d", "not implemented for dtype ",
           core::name(x.dtype()));
  core::dispatch(x.dtype(), [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
#pragma omp parallel for schedule(static) if (p.N * p.C * p.OH * p.OW > 16384)
    for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
      const T* ip = in + plane * p.H * p.W;
      T* op = o + plane * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        int64_t h0 = oh * p.sh - p.ph, h1 = std::min(h0 + p.kh, p.H + p.ph);
        const int64_t pool_h = h1 - h0;
        h0 = std::max<int64_t>(h0, 0);
        h1 = std::min(h1, p.H);
        // Note [avg_pool2d by output rows]: [lo, hi) have w0 >= 0 and w0 + kw <= W.
        int64_t lo = 0, hi = 0;
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          if (h0 < h1 && p.W + p.pw - p.kw >= 0) {
            lo = std::min((p.pw + p.sw - 1) / p.sw, p.OW);
            hi = std::max(lo, std::min((p.W + p.pw - p.kw) / p.sw + 1, p.OW));
            const int64_t div = divisor_override    ? *divisor_override
                                : count_include_pad ? pool_h * p.kw
                                                    : (h1 - h0) * p.kw;
            if (p.sw == 1) avg_row_interior<1>(ip, op + oh * p.OW, p, h0, h1, lo, hi, T(div));
            else if (p.sw == 2) avg_row_interior<2>(ip, op + oh * p.OW, p, h0, h1, lo, hi, T(div));
            else avg_row_interior<0>(ip, op + oh * p.OW, p, h0, h1, lo, hi, T(div));
          }
        }
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          if (ow == lo && hi > lo) {
            ow = hi - 1;
            continue;
          }
          int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, p.W + p.pw);
          const int64_t pool_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0);
          w1 = std::min(w1, p.W);
          Op sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += Op(ip[h * p.W + w]);
          const int64_t div = divisor_override    ? *divisor_override
                              : count_include_pad ? pool_h * pool_w
                                                  : (h1 - h0) * (w1 - w0);
          if (h1 <= h0 || w1 <= w0) {  // a window entirely in padding (ceil_mode): PyTorch writes 0
            op[oh * p.OW + ow] = T(Op(0));
            continue;
          }
          op[oh * p.OW + ow] = T(sum / Op(div));
        }
      }
    }
  });
  return out;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x_, const Shape& kernel, const Shape& stride,
                                                   const Shape& padding, const Shape& dilation, bool ceil_mode) {
  const BareKernel bare("max_pool2d_with_indices", {&x_});
  const Pool p = make_pool("max_pool2d_with_indices", x_.sizes(), kernel, stride, padding, dilation, ceil_mode);
  const Tensor x = x_.contiguous();
  Tensor out = make_output(p, x.dtype()), indices = make_output(p, DType::Int64);
  core::dispatch_floating(x.dtype(), "max_pool2d_with_indices", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    int64_t* ix = indices.data_ptr<int64_t>();
    // x: (N * C, H, W) contiguous; out, indices: (N * C, OH, OW). PyTorch's loop: no early exit
    // on NaN, so the last NaN of a window names the index.
#pragma omp parallel for schedule(static) if (p.N * p.C * p.OH * p.OW > 16384)
    for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
      const T* ip = in + plane * p.H * p.W;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        int64_t h0 = oh * p.sh - p.ph;
        const int64_t h1 = std::min(h0 + (p.kh - 1) * p.dh + 1, p.H);
        while (h0 < 0) h0 += p.dh;
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          int64_t w0 = ow * p.sw - p.pw;
          const int64_t w1 = std::min(w0 + (p.kw - 1) * p.dw + 1, p.W);
          while (w0 < 0) w0 += p.dw;
          int64_t best_i = h0 * p.W + w0;
          Op best = -std::numeric_limits<Op>::infinity();
          for (int64_t h = h0; h < h1; h += p.dh)
            for (int64_t w = w0; w < w1; w += p.dw) {
              const Op v = Op(ip[h * p.W + w]);
              if (v > best || std::isnan(v)) {
                best = v;
                best_i = h * p.W + w;
              }
            }
          const int64_t k = (plane * p.OH + oh) * p.OW + ow;
          o[k] = T(best);
          ix[k] = best_i;
        }
      }
    }
  });
  return {out, indices};
}

namespace {

// Runs body<T, Op>(gin) with gin an (N * C * H * W) zero-filled accumulation buffer of type Op
// (float for the reduced floats, so a window's many contributions round once), then returns it
// as a tensor of `sizes` in dtype `dt`.
template <typename F>
Tensor accumulate_into(const Shape& sizes, DType dt, const char* op, F&& body) {
  return core::dispatch_floating(dt, op, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    Tensor acc = zeros(sizes, core::dtype_of<Op>);
    body.template operator()<T, Op>(acc.data_ptr<Op>());
    return dt == acc.dtype() ? acc : acc.to(dt);
  });
}

}  // namespace

Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Shape& input_sizes, const Tensor& indices) {
  KernelEvent event("max_pool2d_with_indices_backward", {&grad_output, &indices});  // Note [Backward kernels]
  constexpr const char* op = "max_pool2d_with_indices_backward";
  TB_CHECK(input_sizes.size() == 3 || input_sizes.size() == 4, op, "expected a 3-D or 4-D input, got shape ",
           core::to_string(input_sizes));
  TB_CHECK(grad_output.sizes() == indices.sizes() && grad_output.dim() == int64_t(input_sizes.size()) &&
               indices.dtype() == DType::Int64,
           op, "expected grad_output and int64 indices of one pooled shape, got ", core::to_string(grad_output.sizes()),
           " and ", core::to_string(indices.sizes()));
  const int64_t nd = int64_t(input_sizes.size());
  const int64_t HW = input_sizes[size_t(nd - 2)] * input_sizes[size_t(nd - 1)];
  const int64_t OHW = grad_output.size(-2) * grad_output.size(-1);
  const int64_t planes = HW == 0 ? 0 : core::checked_numel(input_sizes, op) / HW;
  const Tensor g = grad_output.contiguous(), ix = indices.contiguous();
  return accumulate_into(input_sizes, grad_output.dtype(), op, [&]<typename T, typename Op>(Op* gin) {
    const T* gp = g.data_ptr<T>();
    const int64_t* ip = ix.data_ptr<int64_t>();
    // Planes are independent; within one, windows overlap, so the scatter stays serial.
#pragma omp parallel for schedule(static) if (planes * OHW > 16384)
    for (int64_t plane = 0; plane < planes; ++plane) {
      Op* dst = gin + plane * HW;
      for (int64_t k = plane * OHW; k < (plane + 1) * OHW; ++k) {
        const int64_t i = ip[k];
        if (i >= 0 && i < HW) dst[i] += Op(gp[k]);  // an out-of-plane index cannot come from the forward
      }
    }
  });
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Shape& input_sizes, const Shape& kernel,
                           const Shape& stride, const Shape& padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  KernelEvent event("avg_pool2d_backward", {&grad_output});  // Note [Backward kernels]
  constexpr const char* op = "avg_pool2d_backward";
  const Pool p = make_pool(op, input_sizes, kernel, stride, padding, {1}, ceil_mode);
  TB_CHECK(!divisor_override || *divisor_override != 0, op, "divisor must be not zero");
  const Shape expected = p.batched ? Shape{p.N, p.C, p.OH, p.OW} : Shape{p.C, p.OH, p.OW};
  TB_CHECK(grad_output.sizes() == expected, op, "expected grad_output of shape ", core::to_string(expected), ", got ",
           core::to_string(grad_output.sizes()));
  const Tensor g = grad_output.contiguous();
  return accumulate_into(input_sizes, grad_output.dtype(), op, [&]<typename T, typename Op>(Op* gin) {
    const T* gp = g.data_ptr<T>();
#pragma omp parallel for schedule(static) if (p.N * p.C * p.OH * p.OW > 16384)
    for (int64_t plane = 0; plane < p.N * p.C; ++plane) {
      Op* dst = gin + plane * p.H * p.W;
      const T* go = gp + plane * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        int64_t h0 = oh * p.sh - p.ph, h1 = std::min(h0 + p.kh, p.H + p.ph);
        const int64_t pool_h = h1 - h0;
        h0 = std::max<int64_t>(h0, 0);
        h1 = std::min(h1, p.H);
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, p.W + p.pw);
          const int64_t pool_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0);
          w1 = std::min(w1, p.W);
          if (h1 <= h0 || w1 <= w0) continue;  // a window entirely in padding: its output was a constant 0
          const int64_t div = divisor_override    ? *divisor_override
                              : count_include_pad ? pool_h * pool_w
                                                  : (h1 - h0) * (w1 - w0);
          const Op delta = Op(go[oh * p.OW + ow]) / Op(div);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) dst[h * p.W + w] += delta;
        }
      }
    }
  });
}

}  // namespace tb::ops
