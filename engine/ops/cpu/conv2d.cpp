// conv2d: PyTorch's argument checks, then oneDNN's convolution primitive for float32 (float16 and
// bfloat16 compute in float32 and round once), and im2col + gemm_batched for float64. Primitives
// (the convolution and its reorders) are cached by shape, so steady state creates none. Integer
// types take the im2col path too. The oneDNN path runs the forward on channel-blocked copies of
// the activations where the channels fill whole blocks (Note [Blocked activations for oneDNN 2.6's
// convolutions]), else on the layouts the primitive chooses (format any), and reorders the plain
// NCHW tensors in and out through buffers of the caching allocator. LibTorch (ideep) does the same
// reorders around the same implementation (ONEDNN_VERBOSE: jit:avx2 with nChw8c on an AVX2
// machine, jit:avx512_core with nChw16c on Zen 4, in its own oneDNN 3.10 against our 2.6).
// convolution_backward follows the same split: oneDNN's backward-data and backward-weights
// primitives for float32 (float16/bfloat16 through float32), cached with their reorders in the
// same way (Note [Convolution primitive cache]), im2col + gemm and col2im for float64.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/nn.h"

namespace tb::ops {

namespace {

constexpr const char* kOp = "conv2d";

struct Conv {
  int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, G, OH, OW;
};

int64_t pick(const Shape& s, int i, const char* what) {
  TB_CHECK(s.size() == 1 || s.size() == 2, kOp, what, " must be a single int or a tuple of two ints, got ",
           core::to_string(s));
  return s.size() == 1 ? s[0] : s[size_t(i)];
}

// Note [Convolution primitive cache]
// conv2d and convolution_backward build their oneDNN objects once per shape: the convolution
// primitives and the reorders between the plain NCHW tensors and the blocked layouts the
// primitives chose (reorder(src, dst) would make a primitive descriptor on every call). Each keeps
// them in a ConvCache keyed by every number the primitives depend on, for the process's life, as
// the product kernel does (linalg_gemm.cpp): a training loop has few shapes, so the caches are not
// bounded, and std::map nodes are stable, so an entry outlives its lock. The blocked copies live in
// buffers of the caching allocator (scratch()), not memory(desc, eng)'s fresh mallocs. Every
// primitive made is counted (conv2d_primitives_created()), so a test can check that steady state
// creates none.
std::atomic<int64_t> g_primitives_created{0};

struct DnnlCpu {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
};
DnnlCpu& dnnl_cpu() {
  static DnnlCpu d;
  return d;
}

template <typename Entry>
class ConvCache {
 public:
  // The entry for `key`, built by `build` on first use (under the lock).
  template <typename Build>
  Entry& get(std::vector<int64_t> key, Build&& build) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) it = map_.emplace(std::move(key), build()).first;
    return it->second;
  }

 private:
  std::mutex mu_;
  std::map<std::vector<int64_t>, Entry> map_;
};

// A primitive made from its descriptor, counted.
template <typename Prim, typename Desc>
Prim make_primitive(const Desc& pd) {
  g_primitives_created.fetch_add(1, std::memory_order_relaxed);
  return Prim(pd);
}

// The reorder from layout `from` to `to`, or an empty one when they are the same.
dnnl::reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  if (from == to) return {};
  const dnnl::engine& eng = dnnl_cpu().eng;
  return make_primitive<dnnl::reorder>(dnnl::reorder::primitive_desc(eng, from, eng, to));
}

// A oneDNN memory of layout `d` over a buffer of the caching allocator, which `buf` keeps alive.
dnnl::memory scratch(const dnnl::memory::desc& d, Tensor& buf) {
  buf = empty({int64_t((d.get_size() + 3) / 4)}, DType::Float32);
  return dnnl::memory(d, dnnl_cpu().eng, buf.data());
}

// `user` in the layout `want`: itself, or its copy made by `to_want` (the cached reorder from
// user's layout to want) in a scratch buffer kept alive by `buf`.
// (A memory is a handle: copies share the buffer.)
dnnl::memory in_layout(dnnl::memory user, const dnnl::memory::desc& want, const dnnl::reorder& to_want, Tensor& buf) {
  if (user.get_desc() == want) return user;
  dnnl::memory m = scratch(want, buf);
  to_want.execute(dnnl_cpu().strm, user, m);
  return m;
}

// Note [Blocked activations for oneDNN 2.6's convolutions]
// Left to choose (format any), oneDNN 2.6 takes its brgemm convolution in NHWC on AVX-512, and its
// reorders between NCHW and NHWC are slow: for the (8, 64, 56, 56) 3x3 layer at 2 threads on Zen 4,
// 0.9 ms in and 0.5 ms out around an 8.1 ms convolution, against 0.3-0.4 ms in and 0.2-0.3 ms out
// for the channel-blocked layout (nChw16c), whose direct convolution took 7.9 ms. Blocked won at
// every shape measured (3x3 and 1x1, stride 1 and 2, 7x7 to 56x56, float32 and bfloat16: 1.0-1.8x
// the whole call, 1x1 most), and it is the layout LibTorch's oneDNN 3.x picks here itself. So
// activations ask for the blocked layout (16 channels on AVX-512, 8 below) when the channels of a
// group fill whole blocks, and keep `any` where oneDNN offers only its reference kernel for it, or
// on AMX, whose bfloat16 brgemm convolution is the one to keep. (Measured with a bare oneDNN 2.6
// program, 30 calls a layout. The backward primitives pick the blocked layout by themselves.)
dnnl::memory::format_tag blocked_activations(const Conv& c, dnnl::memory::data_type type) {
  using tag = dnnl::memory::format_tag;
  static const auto isa = unsigned(dnnl::get_effective_cpu_isa());
  const auto has = [](dnnl::cpu_isa want) { return (isa & unsigned(want)) == unsigned(want); };
  if (type == dnnl::memory::data_type::bf16 && has(dnnl::cpu_isa::avx512_core_amx)) return tag::any;
  const int64_t block = has(dnnl::cpu_isa::avx512_core) ? 16 : has(dnnl::cpu_isa::avx2) ? 8 : 0;
  if (block == 0 || (c.C / c.G) % block != 0 || (c.O / c.G) % block != 0) return tag::any;
  return block == 16 ? tag::nChw16c : tag::nChw8c;
}

// A primitive descriptor made by `make(activations)` with the blocked layout above where it has a
// kernel of its own, else with `any`.
template <typename Make>
auto with_blocked_activations(const Conv& c, dnnl::memory::data_type type, Make&& make) {
  using tag = dnnl::memory::format_tag;
  const tag blocked = blocked_activations(c, type);
  if (blocked != tag::any) {
    try {
      auto pd = make(blocked);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) return pd;
    } catch (const dnnl::error&) {  // no kernel takes it: `any` below
    }
  }
  return make(tag::any);
}

// x: (N, C, H, W) contiguous, w: (O, C / G, kh, kw) contiguous, b: (O) or undefined; all float32,
// or all bfloat16 (oneDNN accumulates bf16 products in float32 and rounds the output once).
void conv_dnnl(const Conv& c, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b) {
  using dnnl::convolution_forward, dnnl::reorder, dnnl::prop_kind, dnnl::algorithm;
  using memory = dnnl::memory;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  struct Entry {
    convolution_forward prim;
    memory::desc x_user, w_user, y_user, x_prim, w_prim, y_prim, b_md;
    reorder x_in, w_in, y_out;  // empty where the primitive takes the plain layout
  };
  static ConvCache<Entry> cache;  // Note [Convolution primitive cache]
  const dnnl::engine& eng = dnnl_cpu().eng;
  dnnl::stream& strm = dnnl_cpu().strm;
  const dt type = x.dtype() == DType::BFloat16 ? dt::bf16 : dt::f32;
  std::vector<int64_t> key = {c.N,          c.C,  c.H,  c.W,  c.O,
                              c.kh,         c.kw, c.sh, c.sw, c.ph,
                              c.pw,         c.dh, c.dw, c.G,  b.defined() ? 1 : 0,
                              int64_t(type)};
  const Entry& e = cache.get(std::move(key), [&] {
    Entry f;
    f.x_user = memory::desc({c.N, c.C, c.H, c.W}, type, tag::nchw);
    f.y_user = memory::desc({c.N, c.O, c.OH, c.OW}, type, tag::nchw);
    f.w_user = c.G == 1 ? memory::desc({c.O, c.C, c.kh, c.kw}, type, tag::oihw)
                        : memory::desc({c.G, c.O / c.G, c.C / c.G, c.kh, c.kw}, type, tag::goihw);
    f.b_md = memory::desc({c.O}, type, tag::x);
    const memory::desc w_any(f.w_user.dims(), type, tag::any);
    const memory::dims strides = {c.sh, c.sw}, dil = {c.dh - 1, c.dw - 1}, pad = {c.ph, c.pw};
    try {
      const auto pd = with_blocked_activations(c, type, [&](tag act) {
        const memory::desc x_md({c.N, c.C, c.H, c.W}, type, act), y_md({c.N, c.O, c.OH, c.OW}, type, act);
        auto d = b.defined() ? convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                                         x_md, w_any, f.b_md, y_md, strides, dil, pad, pad)
                             : convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                                         x_md, w_any, y_md, strides, dil, pad, pad);
        return convolution_forward::primitive_desc(d, eng);
      });
      f.x_prim = pd.src_desc();
      f.w_prim = pd.weights_desc();
      f.y_prim = pd.dst_desc();
      f.prim = make_primitive<convolution_forward>(pd);
      f.x_in = make_reorder(f.x_user, f.x_prim);
      f.w_in = make_reorder(f.w_user, f.w_prim);
      f.y_out = make_reorder(f.y_prim, f.y_user);
    } catch (const dnnl::error& err) {
      throw Error(kOp, std::string("oneDNN could not create a convolution: ") + err.what());
    }
    return f;
  });
  memory xu(e.x_user, eng, x.data()), wu(e.w_user, eng, w.data()), yu(e.y_user, eng, out.data());
  // The blocked copies come from the caching allocator: memory(desc, eng) mallocs fresh 6 MiB
  // buffers on every call, and glibc hands some back page-faulting.
  Tensor xbuf, wbuf, ybuf;
  memory xp = in_layout(xu, e.x_prim, e.x_in, xbuf), wp = in_layout(wu, e.w_prim, e.w_in, wbuf);
  memory yp = e.y_prim == e.y_user ? yu : scratch(e.y_prim, ybuf);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, xp}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_DST, yp}};
  if (b.defined()) args[DNNL_ARG_BIAS] = memory(e.b_md, eng, b.data());
  e.prim.execute(strm, args);
  if (e.y_prim != e.y_user) e.y_out.execute(strm, yp, yu);
  strm.wait();
}

// cols[(ci, i, j), (oh, ow)] = x[ci, oh * sh - ph + i * dh, ow * sw - pw + j * dw] (0 outside), for
// one image. xn: (C, H, W) contiguous; cols: (C * kh * kw, OH * OW) contiguous.
template <typename T>
void im2col(const Conv& c, const T* xn, T* cols) {
  const int64_t L = c.OH * c.OW;
#pragma omp parallel for schedule(static) if (c.C * c.kh * c.kw * L > 32768)
  for (int64_t row = 0; row < c.C * c.kh * c.kw; ++row) {
    const int64_t ch = row / (c.kh * c.kw), i = (row / c.kw) % c.kh, j = row % c.kw;
    const T* plane = xn + ch * c.H * c.W;
    T* dst = cols + row * L;
    for (int64_t oh = 0; oh < c.OH; ++oh) {
      const int64_t h = oh * c.sh - c.ph + i * c.dh;
      for (int64_t ow = 0; ow < c.OW; ++ow) {
        const int64_t ww = ow * c.sw - c.pw + j * c.dw;
        dst[oh * c.OW + ow] = (h >= 0 && h < c.H && ww >= 0 && ww < c.W) ? plane[h * c.W + ww] : T(0);
      }
    }
  }
}

// The adjoint of im2col: adds each column entry back into the input element it was read from.
// Threads own channels, so no two write one element. cols as above; xn: (C, H, W), accumulated.
template <typename T>
void col2im(const Conv& c, const T* cols, T* xn) {
  const int64_t L = c.OH * c.OW, KK = c.kh * c.kw;
#pragma omp parallel for schedule(static) if (c.C * KK * L > 32768)
  for (int64_t ch = 0; ch < c.C; ++ch) {
    T* plane = xn + ch * c.H * c.W;
    for (int64_t r = 0; r < KK; ++r) {
      const int64_t i = r / c.kw, j = r % c.kw;
      const T* src = cols + (ch * KK + r) * L;
      for (int64_t oh = 0; oh < c.OH; ++oh) {
        const int64_t h = oh * c.sh - c.ph + i * c.dh;
        if (h < 0 || h >= c.H) continue;
        for (int64_t ow = 0; ow < c.OW; ++ow) {
          const int64_t ww = ow * c.sw - c.pw + j * c.dw;
          if (ww >= 0 && ww < c.W) plane[h * c.W + ww] += src[oh * c.OW + ow];
        }
      }
    }
  }
}

// The specification: unfold each image into columns, one gemm per group, then add the bias.
// x: (N, C, H, W) contiguous, w: (O, C / G, kh, kw), out: (N, O, OH, OW) contiguous.
template <typename T>
void conv_im2col(const Conv& c, const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t Cg = c.C / c.G, Og = c.O / c.G, CKK = Cg * c.kh * c.kw, L = c.OH * c.OW;
  Tensor cols = empty({c.G, CKK, L}, x.dtype());
  const Tensor wg = w.contiguous().view({c.G, Og, CKK});
  for (int64_t n = 0; n < c.N; ++n) {
    im2col<T>(c, x.data_ptr<T>() + n * c.C * c.H * c.W, cols.data_ptr<T>());
    const Tensor out_n = out.select(0, n).view({c.G, Og, L});
    ops::cpu::gemm_batched(out_n, wg, cols);
  }
  if (b.defined()) {
    const Tensor bc = b.contiguous();
    const T* bp = bc.data_ptr<T>();
    T* op = out.data_ptr<T>();
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.O; ++o)
        for (int64_t l = 0; l < L; ++l) op[(n * c.O + o) * L + l] += bp[o];
  }
}

// Per image: grad_weight[g] += grad_out[g] @ cols[g]^T and cols_grad[g] = weight[g]^T @ grad_out[g],
// folded back by col2im. gy: (N, O, OH, OW) contiguous; gx (N, C, H, W) and gw (O, C / G, kh, kw)
// zero-filled contiguous, or undefined when not wanted.
template <typename T>
void conv_backward_im2col(const Conv& c, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w,
                          const Tensor& gy) {
  const int64_t Cg = c.C / c.G, Og = c.O / c.G, CKK = Cg * c.kh * c.kw, L = c.OH * c.OW;
  Tensor cols = empty({c.G, CKK, L}, x.dtype());
  const Tensor wt = w.contiguous().view({c.G, Og, CKK}).transpose(1, 2);
  const Tensor gw3 = gw.defined() ? gw.view({c.G, Og, CKK}) : Tensor();
  for (int64_t n = 0; n < c.N; ++n) {
    const Tensor gy_n = gy.select(0, n).view({c.G, Og, L});
    if (gw.defined()) {
      im2col<T>(c, x.data_ptr<T>() + n * c.C * c.H * c.W, cols.data_ptr<T>());
      ops::cpu::gemm_batched(gw3, gy_n, cols.transpose(1, 2), 1, 1);
    }
    if (gx.defined()) {
      ops::cpu::gemm_batched(cols, wt, gy_n);
      col2im<T>(c, cols.data_ptr<T>(), gx.data_ptr<T>() + n * c.C * c.H * c.W);
    }
  }
}

// oneDNN's two backward primitives for one float32 convolution shape. gy: (N, O, OH, OW), x, w
// contiguous float32; gx, gw: contiguous float32 outputs, or undefined when not wanted; every
// element of those wanted is written.
void conv_dnnl_backward(const Conv& c, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w,
                        const Tensor& gy) {
  using dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights;
  using dnnl::reorder, dnnl::prop_kind, dnnl::algorithm;
  using memory = dnnl::memory;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  struct Entry {
    convolution_backward_data data;
    convolution_backward_weights weights;
    memory::desc x_user, w_user, y_user;
    memory::desc d_dx, d_w, d_dy;  // the backward-data primitive's layouts
    memory::desc w_x, w_dw, w_dy;  // the backward-weights primitive's layouts
    // Between the plain tensors and those layouts; empty where they are the same.
    reorder d_dy_in, d_w_in, d_dx_out;
    reorder w_x_in, w_dy_in, w_dw_out;
  };
  static ConvCache<Entry> cache;  // Note [Convolution primitive cache]
  const dnnl::engine& eng = dnnl_cpu().eng;
  dnnl::stream& strm = dnnl_cpu().strm;
  std::vector<int64_t> key = {c.N, c.C, c.H, c.W, c.O, c.kh, c.kw, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.G};
  const Entry& e = cache.get(std::move(key), [&] {
    Entry f;
    const dt type = dt::f32;
    f.x_user = memory::desc({c.N, c.C, c.H, c.W}, type, tag::nchw);
    f.y_user = memory::desc({c.N, c.O, c.OH, c.OW}, type, tag::nchw);
    f.w_user = c.G == 1 ? memory::desc({c.O, c.C, c.kh, c.kw}, type, tag::oihw)
                        : memory::desc({c.G, c.O / c.G, c.C / c.G, c.kh, c.kw}, type, tag::goihw);
    const memory::desc x_any({c.N, c.C, c.H, c.W}, type, tag::any);
    const memory::desc y_any({c.N, c.O, c.OH, c.OW}, type, tag::any);
    const memory::desc w_any(f.w_user.dims(), type, tag::any);
    const memory::dims strides = {c.sh, c.sw}, dil = {c.dh - 1, c.dw - 1}, pad = {c.ph, c.pw};
    try {
      // The forward descriptor is only the hint the backward primitives are chosen against.
      convolution_forward::primitive_desc hint(convolution_forward::desc(prop_kind::forward_training,
                                                                         algorithm::convolution_direct, x_any, w_any,
                                                                         y_any, strides, dil, pad, pad),
                                               eng);
      convolution_backward_data::primitive_desc dpd(convolution_backward_data::desc(algorithm::convolution_direct,
                                                                                    x_any, w_any, y_any, strides, dil,
                                                                                    pad, pad),
                                                    eng, hint);
      convolution_backward_weights::primitive_desc wpd(convolution_backward_weights::desc(algorithm::convolution_direct,
                                                                                          x_any, w_any, y_any, strides,
                                                                                          dil, pad, pad),
                                                       eng, hint);
      f.d_dx = dpd.diff_src_desc();
      f.d_w = dpd.weights_desc();
      f.d_dy = dpd.diff_dst_desc();
      f.w_x = wpd.src_desc();
      f.w_dw = wpd.diff_weights_desc();
      f.w_dy = wpd.diff_dst_desc();
      f.data = make_primitive<convolution_backward_data>(dpd);
      f.weights = make_primitive<convolution_backward_weights>(wpd);
      f.d_dy_in = make_reorder(f.y_user, f.d_dy);
      f.d_w_in = make_reorder(f.w_user, f.d_w);
      f.d_dx_out = make_reorder(f.d_dx, f.x_user);
      f.w_x_in = make_reorder(f.x_user, f.w_x);
      // Both primitives usually want grad_output in one layout: then one reorder serves both.
      if (f.w_dy != f.d_dy) f.w_dy_in = make_reorder(f.y_user, f.w_dy);
      f.w_dw_out = make_reorder(f.w_dw, f.w_user);
    } catch (const dnnl::error& err) {
      throw Error("convolution_backward", std::string("oneDNN could not create a convolution backward: ") + err.what());
    }
    return f;
  });
  // Blocked copies in buffers of the caching allocator, alive until the stream has run.
  Tensor dy_buf, dy_buf2, w_buf, dx_buf, x_buf, dw_buf;
  memory yu(e.y_user, eng, gy.data());
  memory dy_d;  // grad_output in the backward-data primitive's layout, when that one runs
  if (gx.defined()) {
    memory dxu(e.x_user, eng, gx.data());
    dy_d = in_layout(yu, e.d_dy, e.d_dy_in, dy_buf);
    memory wp = in_layout(memory(e.w_user, eng, w.data()), e.d_w, e.d_w_in, w_buf);
    memory dx = e.d_dx == e.x_user ? dxu : scratch(e.d_dx, dx_buf);
    e.data.execute(strm, {{DNNL_ARG_DIFF_DST, dy_d}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_DIFF_SRC, dx}});
    if (e.d_dx != e.x_user) e.d_dx_out.execute(strm, dx, dxu);
  }
  if (gw.defined()) {
    memory dwu(e.w_user, eng, gw.data());
    memory dy = e.w_dy == e.d_dy ? (gx.defined() ? dy_d : in_layout(yu, e.d_dy, e.d_dy_in, dy_buf))
                                 : in_layout(yu, e.w_dy, e.w_dy_in, dy_buf2);
    memory xp = in_layout(memory(e.x_user, eng, x.data()), e.w_x, e.w_x_in, x_buf);
    memory dw = e.w_dw == e.w_user ? dwu : scratch(e.w_dw, dw_buf);
    e.weights.execute(strm, {{DNNL_ARG_SRC, xp}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw}});
    if (e.w_dw != e.w_user) e.w_dw_out.execute(strm, dw, dwu);
  }
  strm.wait();
}

// PyTorch's argument checks; x: (N, C, H, W), weight: (O, C / G, kh, kw), bias: (O) or undefined.
Conv make_conv(const Tensor& x4, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
               const Shape& dilation, int64_t groups, const Shape& x_sizes) {
  Conv c{};
  c.N = x4.size(0), c.C = x4.size(1), c.H = x4.size(2), c.W = x4.size(3);
  c.O = weight.size(0), c.kh = weight.size(2), c.kw = weight.size(3);
  c.sh = pick(stride, 0, "stride"), c.sw = pick(stride, 1, "stride");
  c.ph = pick(padding, 0, "padding"), c.pw = pick(padding, 1, "padding");
  c.dh = pick(dilation, 0, "dilation"), c.dw = pick(dilation, 1, "dilation");
  c.G = groups;
  TB_CHECK(c.G > 0, kOp, "non-positive groups is not supported, got ", c.G);
  TB_CHECK(c.sh > 0 && c.sw > 0, kOp, "non-positive stride is not supported");
  TB_CHECK(c.ph >= 0 && c.pw >= 0, kOp, "negative padding is not supported");
  TB_CHECK(c.dh > 0 && c.dw > 0, kOp, "dilation should be greater than zero");
  TB_CHECK(c.O % c.G == 0 && c.O >= c.G, kOp, "expected weight's out_channels (", c.O, ") to be divisible by groups (",
           c.G, ")");
  TB_CHECK(weight.size(1) * c.G == c.C, kOp, "given groups=", c.G, ", weight of size ", core::to_string(weight.sizes()),
           ", expected input ", core::to_string(x_sizes), " to have ", weight.size(1) * c.G, " channels, but got ", c.C,
           " channels instead");
  TB_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == c.O), kOp, "expected bias of shape [", c.O, "], got ",
           core::to_string(bias.sizes()));
  const int64_t eh = c.H + 2 * c.ph - c.dh * (c.kh - 1) - 1, ew = c.W + 2 * c.pw - c.dw * (c.kw - 1) - 1;
  TB_CHECK(eh >= 0 && ew >= 0, kOp, "calculated padded input size per channel (", c.H + 2 * c.ph, " x ", c.W + 2 * c.pw,
           ") is smaller than the kernel size (", c.dh * (c.kh - 1) + 1, " x ", c.dw * (c.kw - 1) + 1, ")");
  c.OH = eh / c.sh + 1;
  c.OW = ew / c.sw + 1;
  return c;
}

void check_conv_inputs(const Tensor& x_, const Tensor& weight, const Tensor& bias) {
  TB_CHECK(x_.dim() == 3 || x_.dim() == 4, kOp, "expected 3-D (unbatched) or 4-D (batched) input, got shape ",
           core::to_string(x_.sizes()));
  TB_CHECK(weight.dim() == 4, kOp, "weight must be 4-D (out_channels, in_channels / groups, kH, kW), got shape ",
           core::to_string(weight.sizes()));
  TB_CHECK(x_.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x_.dtype()), kOp,
           "input, weight and bias must have the same dtype, got ", core::name(x_.dtype()), ", ",
           core::name(weight.dtype()), bias.defined() ? std::string(", ") + core::name(bias.dtype()) : "");
  TB_CHECK(x_.dtype() != DType::Bool, kOp, "not implemented for dtype bool");
}

}  // namespace

Tensor conv2d(const Tensor& x_, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
  const BareKernel bare("conv2d", {&x_, &weight, &bias});
  check_conv_inputs(x_, weight, bias);
  const bool batched = x_.dim() == 4;
  const Tensor x4 = batched ? x_ : x_.unsqueeze(0);
  const Conv c = make_conv(x4, weight, bias, stride, padding, dilation, groups, x_.sizes());
  const DType dt = x_.dtype();
  Tensor out = empty({c.N, c.O, c.OH, c.OW}, dt);
  if (out.numel() > 0) {
    if (c.C == 0) {  // an empty reduction: the bias alone
      Tensor o = out;
      if (bias.defined()) o.copy_(bias.view({1, c.O, 1, 1}));
      else std::fill_n(static_cast<char*>(o.data()), o.numel() * int64_t(o.itemsize()), char(0));
    } else if (dt == DType::Float64) {
      conv_im2col<double>(c, out, x4.contiguous(), weight, bias);
    } else if (dt == DType::Int64) {
      conv_im2col<int64_t>(c, out, x4.contiguous(), weight, bias);
    } else if (dt == DType::Int32) {
      conv_im2col<int32_t>(c, out, x4.contiguous(), weight, bias);
    } else if (dt == DType::BFloat16 && cpu::bf16_products() == cpu::Bf16Products::OneDnn &&
               (!bias.defined() || bias.dtype() == dt) && weight.dtype() == dt) {
      // Else through float32 as below: Note [bfloat16 products through float32] in linalg_gemm.cpp.
      conv_dnnl(c, out, x4.contiguous(), weight.contiguous(), bias.defined() ? bias.contiguous() : Tensor());
    } else {
      const DType f = DType::Float32;
      const Tensor b32 = bias.defined() ? bias.to(f).contiguous() : Tensor();
      Tensor out32 = dt == f ? out : empty(out.sizes(), f);
      conv_dnnl(c, out32, x4.to(f).contiguous(), weight.to(f).contiguous(), b32);
      if (dt != f) out.copy_(out32);
    }
  }
  return batched ? out : out.squeeze(0);
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& x_,
                                                        const Tensor& weight, const Shape& stride, const Shape& padding,
                                                        const Shape& dilation, int64_t groups,
                                                        std::array<bool, 3> output_mask) {
  KernelEvent event("convolution_backward", {&grad_output, &x_, &weight});  // Note [Backward kernels]
  check_conv_inputs(x_, weight, Tensor());
  const bool batched = x_.dim() == 4;
  const Tensor x4 = batched ? x_ : x_.unsqueeze(0);
  const Conv c = make_conv(x4, weight, Tensor(), stride, padding, dilation, groups, x_.sizes());
  const Tensor gy4 = batched ? grad_output : grad_output.unsqueeze(0);
  const Shape ys = {c.N, c.O, c.OH, c.OW};
  TB_CHECK(gy4.sizes() == ys && grad_output.dtype() == x_.dtype(), "convolution_backward",
           "expected grad_output of shape ", core::to_string(ys), " and dtype ", core::name(x_.dtype()), ", got ",
           core::name(grad_output.dtype()), core::to_string(grad_output.sizes()));
  const DType dt = x_.dtype();
  TB_CHECK(core::is_floating(dt), "convolution_backward", "expected a floating dtype, got ", core::name(dt));
  const Tensor gy = gy4.contiguous();
  const bool any = gy.numel() > 0 && x4.numel() > 0 && weight.numel() > 0;
  // oneDNN writes every element of the gradients; the im2col path accumulates into them (and with
  // nothing to sum over they are zero).
  const bool dnnl = any && dt != DType::Float64;
  const auto grad = [&](const Shape& s) { return dnnl ? empty(s, dt) : zeros(s, dt); };
  Tensor gx = output_mask[0] ? grad(x4.sizes()) : Tensor();
  Tensor gw = output_mask[1] ? grad(weight.sizes()) : Tensor();
  Tensor gb;
  if (output_mask[2]) {  // sum over (N, OH, OW), accumulated in double
    gb = empty({c.O}, dt);
    core::dispatch_floating(dt, "convolution_backward", [&]<typename T>() {
      const T* gp = gy.data_ptr<T>();
      T* bp = gb.data_ptr<T>();
      const int64_t L = c.OH * c.OW;
#pragma omp parallel for schedule(static) if (c.N * c.O * L > 32768)
      for (int64_t o = 0; o < c.O; ++o) {
        double s = 0;
        for (int64_t n = 0; n < c.N; ++n)
          for (int64_t l = 0; l < L; ++l) s += double(gp[(n * c.O + o) * L + l]);
        bp[o] = T(s);
      }
    });
  }
  if (any && (gx.defined() || gw.defined())) {
    if (!dnnl) {
      conv_backward_im2col<double>(c, gx, gw, x4.contiguous(), weight, gy);
    } else {
      const DType f = DType::Float32;
      const Tensor gx32 = gx.defined() && dt != f ? empty(gx.sizes(), f) : gx;
      const Tensor gw32 = gw.defined() && dt != f ? empty(gw.sizes(), f) : gw;
      conv_dnnl_backward(c, gx32, gw32, x4.to(f).contiguous(), weight.to(f).contiguous(), gy.to(f).contiguous());
      if (dt != f && gx.defined()) gx.copy_(gx32);
      if (dt != f && gw.defined()) gw.copy_(gw32);
    }
  }
  if (gx.defined() && !batched) gx = gx.squeeze(0);
  return {gx, gw, gb};
}

int64_t conv2d_primitives_created() { return g_primitives_created.load(std::memory_order_relaxed); }

}  // namespace tb::ops
