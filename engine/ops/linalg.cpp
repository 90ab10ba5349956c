// mm, bmm, matmul, dot, addmm, linear, outer: PyTorch's argument rules (shapes, dtypes,
// broadcasting) resolved here, arithmetic in cpu::gemm_batched. einsum lives in
// cpu/linalg_einsum.cpp.
#include "engine/ops/linalg.h"

#include <algorithm>
#include <cmath>
#include <vector>
#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/cpu/loops.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"

namespace tb::ops {

namespace {

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  TB_CHECK(a.dtype() == b.dtype(), op, "expected both operands to have the same dtype, but got ", core::name(a.dtype()),
           " != ", core::name(b.dtype()));
  TB_CHECK(a.dtype() != DType::Bool, op, "not implemented for dtype bool");
}

void check_dim(const char* op, const Tensor& t, int64_t d, const char* what) {
  TB_CHECK(t.dim() == d, op, what, " must be a ", d, "-D tensor, got shape ", core::to_string(t.sizes()));
}

// a3: (B, M, K), b3: (B, K, N) -> fresh contiguous (B, M, N).
Tensor bmm_fresh(const Tensor& a3, const Tensor& b3) {
  Tensor out = empty({a3.size(0), a3.size(1), b3.size(2)}, a3.dtype());
  cpu::gemm_batched(out, a3, b3);
  return out;
}

// A 3-D view (B, rows, cols) of t: (*batch, rows, cols) broadcast to `batch`; copies only when the
// batch dims cannot be merged into one stride.
Tensor as_batched(const Tensor& t, const Shape& batch) {
  Shape full = batch;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Tensor e = t.expand(full);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  const Shape flat = {nb, t.size(-2), t.size(-1)};
  if (auto st = compute_view_strides(e.sizes(), e.strides(), flat)) return make_view(e, flat, *st, e.storage_offset());
  return e.contiguous().view(flat);
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  const BareKernel bare("mm", {&a, &b});
  check_dim("mm", a, 2, "self");
  check_dim("mm", b, 2, "mat2");
  check_same_dtype("mm", a, b);
  TB_CHECK(a.size(1) == b.size(0), "mm", "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
           " and ", b.size(0), "x", b.size(1), ")");
  return bmm_fresh(a.unsqueeze(0), b.unsqueeze(0)).view({a.size(0), b.size(1)});
}

Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  const BareKernel bare("mm_out", {&out, &a, &b});
  if (out.defined() && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0) && a.dtype() == b.dtype() &&
      out.dtype() == a.dtype() && out.dim() == 2 && out.size(0) == a.size(0) && out.size(1) == b.size(1) &&
      out.is_contiguous() && !out.shares_storage(a) && !out.shares_storage(b)) {
    // Straight into out. (Autograd metadata on out does not matter: like the copy below, this is
    // a write below autograd, and a view made with grad mode on -- DDP's bucket slots -- has some.)
    cpu::gemm_batched(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0));
    out.bump_version();
    return out;
  }
  Tensor r = mm(a, b);
  TB_CHECK(!out.defined() || out.dtype() == r.dtype(), "mm", "expected out tensor to have dtype ",
           core::name(r.dtype()), ", but got ", core::name(out.dtype()), " instead");
  out = prepare_out(&out, r.sizes(), r.dtype(), "mm");
  out.copy_(r);
  return out;
}

Tensor mm_float32(const Tensor& a, const Tensor& b, const Tensor& into) {
  const BareKernel bare("mm_float32", {&a, &b});
  check_dim("mm_float32", a, 2, "self");
  check_dim("mm_float32", b, 2, "mat2");
  TB_CHECK(a.dtype() == DType::BFloat16 && b.dtype() == DType::BFloat16, "mm_float32",
           "expected bfloat16 operands, got ", core::name(a.dtype()), " and ", core::name(b.dtype()));
  TB_CHECK(a.size(1) == b.size(0), "mm_float32", "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
           a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  const bool usable = into.defined() && into.dtype() == DType::Float32 && into.dim() == 2 &&
                      into.size(0) == a.size(0) && into.size(1) == b.size(1) && into.is_contiguous() &&
                      !into.shares_storage(a) && !into.shares_storage(b);
  Tensor out = usable ? into : empty({a.size(0), b.size(1)}, DType::Float32);
  cpu::gemm_batched(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0));
  if (usable) out.bump_version();
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  const BareKernel bare("bmm", {&a, &b});
  check_dim("bmm", a, 3, "batch1");
  check_dim("bmm", b, 3, "batch2");
  check_same_dtype("bmm", a, b);
  TB_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm",
           "batch1 and batch2 shapes do not match: ", core::to_string(a.sizes()), " and ", core::to_string(b.sizes()));
  return bmm_fresh(a, b);
}

namespace {
// dot of float32 vectors: 64 float products accumulated per step (four 16-lane accumulators), each
// block of kDotBlock elements summed into double, blocks in parallel. Through bmm it was a (1, 1, n)
// by (1, n, 1) product, 5x slower than LibTorch at n = 4M (a GEMM does not vectorise a single
// column); the blocks also make it no less accurate than BLAS's sdot, which LibTorch calls.
constexpr int64_t kDotBlock = 4096;
double dot_block(const float* x, const float* y, int64_t n) {
  using vf = float __attribute__((vector_size(64)));
  vf a0{}, a1{}, a2{}, a3{};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    vf x0, x1, x2, x3, y0, y1, y2, y3;
    __builtin_memcpy(&x0, x + i, 64), __builtin_memcpy(&x1, x + i + 16, 64);
    __builtin_memcpy(&x2, x + i + 32, 64), __builtin_memcpy(&x3, x + i + 48, 64);
    __builtin_memcpy(&y0, y + i, 64), __builtin_memcpy(&y1, y + i + 16, 64);
    __builtin_memcpy(&y2, y + i + 32, 64), __builtin_memcpy(&y3, y + i + 48, 64);
    a0 += x0 * y0, a1 += x1 * y1, a2 += x2 * y2, a3 += x3 * y3;
  }
  const vf v = (a0 + a1) + (a2 + a3);
  double r = 0;
  for (int l = 0; l < 16; ++l) r += double(v[l]);
  for (; i < n; ++i) r += double(x[i]) * double(y[i]);
  return r;
}
Tensor dot_float(const Tensor& a, const Tensor& b) {
  const float* x = a.data_ptr<float>();
  const float* y = b.data_ptr<float>();
  const int64_t n = a.numel(), blocks = (n + kDotBlock - 1) / kDotBlock;
  std::vector<double> part(static_cast<size_t>(blocks));
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (n > kParallelGrain)
  for (int64_t k = 0; k < blocks; ++k)
    part[size_t(k)] = dot_block(x + k * kDotBlock, y + k * kDotBlock, std::min(kDotBlock, n - k * kDotBlock));
  double r = 0;
  for (double v : part) r += v;
  return full({}, r, DType::Float32);
}
}  // namespace

Tensor dot(const Tensor& a, const Tensor& b) {
  const BareKernel bare("dot", {&a, &b});
  check_dim("dot", a, 1, "self");
  check_dim("dot", b, 1, "tensor");
  check_same_dtype("dot", a, b);
  TB_CHECK(a.size(0) == b.size(0), "dot", "inconsistent tensor size, expected tensor [", a.size(0), "] and src [",
           b.size(0), "] to have the same number of elements");
  if (a.dtype() == DType::Float32 && a.is_contiguous() && b.is_contiguous()) return dot_float(a, b);
  return bmm_fresh(a.unsqueeze(0).unsqueeze(0), b.unsqueeze(1).unsqueeze(0)).view({});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const BareKernel bare("matmul", {&a, &b});
  TB_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "both arguments to matmul need to be at least 1D, but they are ",
           a.dim(), "D and ", b.dim(), "D");
  check_same_dtype("matmul", a, b);
  if (a.dim() == 1 && b.dim() == 1) return dot(a, b);
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1);
  TB_CHECK(b2.size(-2) == K, "matmul", "mat1 and mat2 shapes cannot be multiplied (", M, "x", K, " and ", b2.size(-2),
           "x", N, "), operands ", core::to_string(a.sizes()), " and ", core::to_string(b.sizes()));
  const Shape ba(a2.sizes().begin(), a2.sizes().end() - 2), bb(b2.sizes().begin(), b2.sizes().end() - 2);
  const Shape batch = core::broadcast_shapes(ba, bb, "matmul");
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(M);
  if (b.dim() > 1) out_shape.push_back(N);
  // (*, M, K) @ (K, N): fold the batch into the rows when a's layout allows (one bigger gemm).
  if (b2.dim() == 2 && a2.dim() > 2) {
    int64_t nrows = M;
    for (int64_t s : ba) nrows *= s;
    const Shape rows = {nrows, K};
    if (auto st = compute_view_strides(a2.sizes(), a2.strides(), rows)) {
      Tensor a3 = make_view(a2, rows, *st, a2.storage_offset()).unsqueeze(0);
      return bmm_fresh(a3, b2.unsqueeze(0)).view(out_shape);
    }
  }
  // Two batch dims that do not merge into one stride (attention's heads): read in place by a
  // 4-D product rather than copied by as_batched (Note [Two batch dims] in cpu/linalg_gemm.cpp).
  if (batch.size() == 2 && (a.dtype() == DType::Float32 || a.dtype() == DType::BFloat16)) {
    const Tensor a4 = a2.expand({batch[0], batch[1], M, K}), b4 = b2.expand({batch[0], batch[1], K, N});
    const Shape flat_a = {batch[0] * batch[1], M, K}, flat_b = {batch[0] * batch[1], K, N};
    const bool a_merges = compute_view_strides(a4.sizes(), a4.strides(), flat_a).has_value();
    const bool b_merges = compute_view_strides(b4.sizes(), b4.strides(), flat_b).has_value();
    auto no_zero_batch_stride = [](const Tensor& t) {
      return (t.size(0) == 1 || t.stride(0) != 0) && (t.size(1) == 1 || t.stride(1) != 0);
    };
    if ((!a_merges || !b_merges) && no_zero_batch_stride(a4) && no_zero_batch_stride(b4)) {
      Tensor out = empty({batch[0], batch[1], M, N}, a.dtype());
      cpu::gemm_batched(out, a4, b4);
      return out.view(out_shape);
    }
  }
  return bmm_fresh(as_batched(a2, batch), as_batched(b2, batch)).view(out_shape);
}

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha) {
  const BareKernel bare("addmm", {&self, &a, &b});
  check_dim("addmm", a, 2, "mat1");
  check_dim("addmm", b, 2, "mat2");
  check_same_dtype("addmm", a, b);
  check_same_dtype("addmm", self, a);
  TB_CHECK(a.size(1) == b.size(0), "addmm", "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
           " and ", b.size(0), "x", b.size(1), ")");
  const Shape shape = {a.size(0), b.size(1)};
  TB_CHECK(self.dim() <= 2 && core::broadcast_shapes(self.sizes(), shape, "addmm") == shape, "addmm", "self of shape ",
           core::to_string(self.sizes()), " cannot broadcast to the product's shape ", core::to_string(shape));
  Tensor out = empty(shape, a.dtype());
  if (beta != 0) out.copy_(self);
  cpu::gemm_batched(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), alpha, beta);
  return out;
}

namespace {

// linear and linear_relu. Like PyTorch, a 2-D input is one fused addmm: the bias joins the float32
// accumulator and the sum is rounded once. Other ranks round the product to the dtype first and
// then add the bias, visible in float16/bfloat16 only: float32 (oneDNN accumulates in float32 and
// stores float32) and float64 / integer products round nothing in between, so they take the
// fused epilogue at every rank. The relu commutes with that one rounding (monotone, 0 exact).
Tensor linear_impl(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, bool relu) {
  const BareKernel bare(op, {&x, &weight, &bias});
  TB_CHECK(x.dim() >= 1, op, "input must be at least 1-D, got a 0-D tensor");
  check_dim(op, weight, 2, "weight");
  check_same_dtype(op, x, weight);
  const int64_t in = weight.size(1), outf = weight.size(0);
  TB_CHECK(x.size(-1) == in, op, "mat1 and mat2 shapes cannot be multiplied: input ", core::to_string(x.sizes()),
           ", weight ", core::to_string(weight.sizes()));
  if (bias.defined()) {
    check_same_dtype(op, x, bias);
    TB_CHECK(bias.dim() <= 1 && (bias.numel() == outf || bias.numel() == 1), op, "bias of shape ",
             core::to_string(bias.sizes()), " does not match ", outf, " output features");
  }
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  const Tensor x2 = x.reshape({rows, in});
  Tensor out = empty({rows, outf}, x.dtype());
  const bool low_precision = x.dtype() == DType::BFloat16 || x.dtype() == DType::Float16;
  const bool fused = bias.defined() && (x.dim() == 2 || !low_precision);
  cpu::GemmEpilogue ep;
  ep.relu = relu && (fused || !bias.defined());
  if (fused) ep.bias = bias.reshape({bias.numel()}).expand({outf}).contiguous();
  cpu::gemm_batched(out.unsqueeze(0), x2.unsqueeze(0), weight.t().unsqueeze(0), 1, 0, ep);
  if (bias.defined() && !fused) {
    StridedLoop loop({out, out, bias.expand({rows, outf})});
    core::dispatch(out.dtype(), [&]<typename T>() {
      using Op = core::opmath_t<T>;
      if (relu) {
        cpu::cpu_kernel<T, T, T>(loop, [](Op y, Op b) -> Op {
          const Op v = y + b;
          return v < Op(0) ? Op(0) : v;
        });
      } else {
        cpu::cpu_kernel<T, T, T>(loop, [](Op y, Op b) -> Op { return y + b; });
      }
    });
  }
  Shape shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(outf);
  return out.view(shape);
}

#if defined(__AVX512BW__)
// Note [linear_grad_prep on AVX-512]
// The columns of one row 32 at a time: a mask word is a 32-bit lane mask, applied to the gradient
// as it is loaded (bfloat16: one vmovdqu16 with zeroing on the raw bits; float32: two zeroing
// loads), stored, and added to the partial sums in float lanes, each column in the order of the
// scalar loop (so the same sums). As scalar code, with a bit test, a widening and a select per
// element, a 256 x 1024 gradient took 91 us (float32) and 95 us (bfloat16) at two threads on Zen
// 4; now 29 and 17 us. Returns the columns done.
template <typename T, typename P>
int64_t grad_prep_row32(const T* gr, const uint32_t* mr, T* gir, P* part, int64_t nj) {
  if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, core::BFloat16>)&&std::is_same_v<P, float>) {
    int64_t j = 0;
    for (; j + 32 <= nj; j += 32) {
      const uint32_t bits = mr ? mr[j >> 5] : ~0u;
      __m512 lo, hi;
      if constexpr (std::is_same_v<T, core::BFloat16>) {
        const __m512i kept = _mm512_maskz_loadu_epi16(__mmask32(bits), gr + j);
        if (mr) _mm512_storeu_si512(gir + j, kept);
        // bfloat16 bits are a float's top half: widen by zero-extending and shifting.
        const __m256i k0 = _mm512_maskz_extracti64x4_epi64(0xFF, kept, 0);
        const __m256i k1 = _mm512_maskz_extracti64x4_epi64(0xFF, kept, 1);
        lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, k0), 16));
        hi = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, k1), 16));
      } else {
        lo = _mm512_maskz_loadu_ps(__mmask16(bits), gr + j);
        hi = _mm512_maskz_loadu_ps(__mmask16(bits >> 16), gr + j + 16);
        if (mr) _mm512_storeu_ps(gir + j, lo), _mm512_storeu_ps(gir + j + 16, hi);
      }
      _mm512_storeu_ps(part + j, _mm512_add_ps(_mm512_loadu_ps(part + j), lo));
      _mm512_storeu_ps(part + j + 16, _mm512_add_ps(_mm512_loadu_ps(part + j + 16), hi));
    }
    return j;
  }
  return 0;
}
#endif

// One thread's columns [c0, c1) of linear_grad_prep, over all rows; c0 a multiple of 32 (the
// mask's word size). mask: `words` int32 words a row.
template <typename T, bool kMask, typename B>
void grad_prep_columns(const T* g, const uint32_t* mask, int64_t words, T* gi, B* bias_grad, int64_t rows, int64_t n,
                       int64_t c0, int64_t c1) {
  using Op = core::opmath_t<T>;
  constexpr int64_t kBlock = 64;  // rows per partial sum
  constexpr int64_t kCols = 256;  // columns per chunk: partial + total stay in L1
  Op part[kCols], total[kCols];
  for (int64_t j0 = c0; j0 < c1; j0 += kCols) {
    const int64_t nj = std::min(kCols, c1 - j0);
    for (int64_t j = 0; j < nj; ++j) total[j] = Op(0);
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
      for (int64_t j = 0; j < nj; ++j) part[j] = Op(0);
      const int64_t r1 = std::min(rows, r0 + kBlock);
      for (int64_t r = r0; r < r1; ++r) {
        const T* gr = g + r * n + j0;
        T* gir = gi + r * n + j0;
        const uint32_t* mr = kMask ? mask + r * words + j0 / 32 : nullptr;
        int64_t j = 0;
#if defined(__AVX512BW__)
        j = grad_prep_row32(gr, mr, gir, part, nj);
#endif
        for (; j < nj; ++j) {
          Op v = Op(gr[j]);
          if constexpr (kMask) {
            v = (mr[j >> 5] >> (j & 31)) & 1u ? v : Op(0);  // threshold_backward(grad, output, 0)
            gir[j] = T(v);
          }
          part[j] += v;
        }
      }
      for (int64_t j = 0; j < nj; ++j) total[j] += part[j];
    }
    if (bias_grad)
      for (int64_t j = 0; j < nj; ++j) bias_grad[j0 + j] = B(total[j]);
  }
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl("linear", x, weight, bias, false);
}

Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return linear_impl("linear_relu", x, weight, bias, true);
}

Tensor relu_mask(const Tensor& output) {
  const char* op = "relu_mask";
  check_dim(op, output, 2, "output");
  TB_CHECK(core::is_floating(output.dtype()), op, "expected a floating output, got ", core::name(output.dtype()));
  const int64_t rows = output.size(0), n = output.size(1), words = (n + 31) / 32;
  Tensor mask = empty({rows, words}, DType::Int32);
  if (rows * words == 0) return mask;
  const Tensor y = output.contiguous();
  core::dispatch_floating(y.dtype(), op, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* yp = y.data_ptr<T>();
    uint32_t* mp = reinterpret_cast<uint32_t*>(mask.data_ptr<int32_t>());
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* yr = yp + r * n;
      for (int64_t w = 0; w < words; ++w) {
        const int64_t j0 = w * 32, nj = std::min<int64_t>(32, n - j0);
        uint32_t bits = 0;
        for (int64_t j = 0; j < nj; ++j) bits |= uint32_t(!(Op(yr[j0 + j]) <= Op(0))) << j;
        mp[r * words + w] = bits;
      }
    }
  });
  return mask;
}

LinearGradPrep linear_grad_prep(const Tensor& grad, const Tensor& mask, bool want_bias_grad, bool in_place,
                                bool bias_float32) {
  const char* op = "linear_grad_prep";
  check_dim(op, grad, 2, "grad");
  TB_CHECK(core::is_floating(grad.dtype()), op, "expected a floating grad, got ", core::name(grad.dtype()));
  TB_CHECK(!bias_float32 || grad.dtype() != DType::Float64, op, "a float32 bias gradient from a float64 grad");
  const bool masked = mask.defined();
  const int64_t rows = grad.size(0), n = grad.size(1), words = (n + 31) / 32;
  if (masked) {
    TB_CHECK(mask.dtype() == DType::Int32 && mask.dim() == 2 && mask.size(0) == rows && mask.size(1) == words, op,
             "mask ", core::to_string(mask.sizes()), " ", core::name(mask.dtype()), " is not the relu_mask of a ",
             core::to_string(grad.sizes()), " output");
  }
  LinearGradPrep r;
  if (!masked && !want_bias_grad) {
    r.grad_in = grad;
    return r;
  }
  const Tensor g = grad.contiguous(), m = masked ? mask.contiguous() : Tensor();
  r.grad_in = !masked ? grad : in_place && grad.is_contiguous() ? grad : empty({rows, n}, g.dtype());
  const DType bias_dtype = bias_float32 ? DType::Float32 : g.dtype();
  if (want_bias_grad) r.bias_grad = rows == 0 ? zeros({n}, bias_dtype) : empty({n}, bias_dtype);
  if (rows * n == 0) return r;
  core::dispatch_floating(g.dtype(), op, [&]<typename T>() {
    const T* gp = g.data_ptr<T>();
    const uint32_t* mp = masked ? reinterpret_cast<const uint32_t*>(m.data_ptr<int32_t>()) : nullptr;
    T* gip = masked ? r.grad_in.data_ptr<T>() : nullptr;
    T* bp = want_bias_grad && !bias_float32 ? r.bias_grad.data_ptr<T>() : nullptr;
    float* bp32 = want_bias_grad && bias_float32 ? r.bias_grad.data_ptr<float>() : nullptr;
    // Split the columns between the threads in multiples of 32 (whole mask words, and whole
    // cache lines of float32), so each thread writes disjoint columns of grad_in and bias_grad.
    const int64_t threads = rows * n > kParallelGrain ? std::max(1, num_threads()) : 1;
    const int64_t per = (((n + threads - 1) / threads) + 31) / 32 * 32;
#pragma omp parallel for schedule(static) num_threads(int(threads)) if (threads > 1)
    for (int64_t t = 0; t < threads; ++t) {
      const int64_t c0 = std::min(n, t * per), c1 = std::min(n, c0 + per);
      if (c0 >= c1) continue;
      if (bp32) {  // float32 sums from a float32 or float16/bfloat16 (float opmath) gradient
        if constexpr (std::is_same_v<core::opmath_t<T>, float>) {
          if (masked) grad_prep_columns<T, true>(gp, mp, words, gip, bp32, rows, n, c0, c1);
          else grad_prep_columns<T, false>(gp, mp, words, gip, bp32, rows, n, c0, c1);
        }
      } else if (masked) {
        grad_prep_columns<T, true>(gp, mp, words, gip, bp, rows, n, c0, c1);
      } else {
        grad_prep_columns<T, false>(gp, mp, words, gip, bp, rows, n, c0, c1);
      }
    }
  });
  return r;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  const BareKernel bare("outer", {&a, &b});
  check_dim("outer", a, 1, "self");
  check_dim("outer", b, 1, "vec2");
  const DType dt = result_type(a, b);
  const int64_t n = a.size(0), m = b.size(0);
  Tensor out = empty({n, m}, dt);
  // Row i is a[i] times b: a vector loop per row. A StridedLoop over a's stride-0 expansion took
  // the element-by-element path (outer of 4096 by 1024 float32: 0.26x LibTorch).
  const Tensor ac = a.to(dt).contiguous(), bc = b.to(dt).contiguous();
  core::dispatch(dt, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const T* x = ac.data_ptr<T>();
    const T* y = bc.data_ptr<T>();
    T* o = out.data_ptr<T>();
#pragma omp parallel for num_threads(num_threads()) schedule(static) if (n * m > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const Op xi = static_cast<Op>(x[i]);
      T* __restrict__ row = o + i * m;
      for (int64_t j = 0; j < m; ++j) {
        if constexpr (std::is_same_v<T, bool>) row[j] = xi && y[j];
        else row[j] = static_cast<T>(xi * static_cast<Op>(y[j]));
      }
    }
  });
  return out;
}

}  // namespace tb::ops
