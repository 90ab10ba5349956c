// max_pool2d and avg_pool2d: PyTorch's argument checks and output-size rule (including ceil_mode,
// whose last window must start inside the input or left padding), then one loop per (n, c) plane,
// planes split across OpenMP threads. Windows are clipped to the input, so padding never reads
// memory; max pooling treats padding as -inf, average pooling counts it only when asked.
#include <cmath>
#include <limits>

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

Pool make_pool(const char* op, const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding,
               const Shape& dilation, bool ceil_mode) {
  TB_CHECK(x.dim() == 3 || x.dim() == 4, op, "expected a 3-D or 4-D input, got shape ", core::to_string(x.sizes()));
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
           "pad should be at most half of effective kernel size, but got pad=", p.ph, "x", p.pw, " and kernel_size=",
           p.kh, "x", p.kw);
  p.batched = x.dim() == 4;
  const int64_t o = p.batched ? 1 : 0;
  p.N = p.batched ? x.size(0) : 1;
  p.C = x.size(o);
  p.H = x.size(o + 1);
  p.W = x.size(o + 2);
  TB_CHECK(p.C > 0 && p.H > 0 && p.W > 0, op, "expected input with non-zero channel and spatial sizes, got shape ",
           core::to_string(x.sizes()));
  p.OH = out_size(p.H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.OW = out_size(p.W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  TB_CHECK(p.OH >= 1 && p.OW >= 1, op, "given input size ", core::to_string(x.sizes()),
           ", the calculated output size ", p.OH, "x", p.OW, " is too small");
  return p;
}

Tensor make_output(const Pool& p, DType dt) {
  return p.batched ? empty({p.N, p.C, p.OH, p.OW}, dt) : empty({p.C, p.OH, p.OW}, dt);
}

}  // namespace

Tensor max_pool2d(const Tensor& x_, const Shape& kernel, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  const Pool p = make_pool("max_pool2d", x_, kernel, stride, padding, dilation, ceil_mode);
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
  const Pool p = make_pool("avg_pool2d", x_, kernel, stride, padding, {1}, ceil_mode);
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
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, p.W + p.pw);
          const int64_t pool_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0);
          w1 = std::min(w1, p.W);
          Op sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += Op(ip[h * p.W + w]);
          const int64_t div = divisor_override ? *divisor_override
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

}  // namespace tb::ops
