// gemm_batched: oneDNN matmul for float32/bfloat16 (float16 via float32), a blocked OpenMP loop for
// float64 and integers. See linalg_gemm.h for the contract.
#include "engine/ops/cpu/linalg_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/core/env.h"
#include "engine/ops/cpu/bf16_convert.h"

namespace tb::ops::cpu {

namespace {

// A matrix operand as oneDNN sees it: (batch, rows, cols) with element strides. Strides of size-1
// dims are normalised (PyTorch leaves them arbitrary; oneDNN wants a consistent plain layout).
struct Mat {
  int64_t batch, rows, cols;
  int64_t sb, sr, sc;
};

Mat describe(const Tensor& t) {
  Mat m{t.size(0), t.size(1), t.size(2), t.stride(0), t.stride(1), t.stride(2)};
  if (m.cols == 1) m.sc = 1;
  if (m.rows == 1) m.sr = m.sc == 1 ? std::max<int64_t>(m.cols, 1) : 1;
  if (m.batch == 1 || m.sb == 0) {  // one matrix shared by every batch: oneDNN broadcasts a batch dim of 1
    m.batch = 1;
    m.sb = std::max<int64_t>(m.rows * m.cols, 1);
  }
  return m;
}

// One matrix's (rows, cols) strides normalised as describe() does, batch ignored.
Mat describe_inner(Mat m) {
  if (m.cols == 1) m.sc = 1;
  if (m.rows == 1) m.sr = m.sc == 1 ? std::max<int64_t>(m.cols, 1) : 1;
  return m;
}

// oneDNN's plain layouts: one of the two matrix dims dense, the other a leading dimension, and
// batches that do not overlap. Anything else (sliced columns, overlapping views) gets copied.
bool dnnl_compatible(const Mat& m) {
  const bool row_major = m.sc == 1 && m.sr >= std::max<int64_t>(m.cols, 1);
  const bool col_major = m.sr == 1 && m.sc >= std::max<int64_t>(m.rows, 1);
  if (!row_major && !col_major) return false;
  const int64_t extent = row_major ? m.sr * m.rows : m.sc * m.cols;
  return m.batch == 1 || m.sb >= extent;
}

struct DnnlState {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mu;
  struct Entry {
    dnnl::matmul prim;
    dnnl::memory::desc a, b, c, bias;
  };
  std::map<std::vector<int64_t>, Entry> cache;  // key: dtype, dims, strides, alpha, beta, epilogue
};

DnnlState& dnnl_state() {
  static DnnlState s;
  return s;
}

dnnl::memory::desc md(const Mat& m, dnnl::memory::data_type dt) {
  return dnnl::memory::desc({m.batch, m.rows, m.cols}, dt, {m.sb, m.sr, m.sc});
}

// alpha as an output scale, beta as a sum post-op.
dnnl::primitive_attr gemm_attr(double alpha, double beta) {
  dnnl::primitive_attr attr;
  if (alpha != 1) attr.set_output_scales(0, {float(alpha)});
  dnnl::post_ops po;
  if (beta != 0) po.append_sum(float(beta));
  if (po.len() > 0) attr.set_post_ops(po);
  return attr;
}

// The cached entry for `key`, built by `build` on first use (under the lock; entries are never
// erased and std::map nodes are stable, so the pointer outlives the lock).
template <typename Build>
DnnlState::Entry& cached_entry(std::vector<int64_t> key, Build&& build) {
  DnnlState& st = dnnl_state();
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.cache.find(key);
  if (it == st.cache.end()) it = st.cache.emplace(std::move(key), build()).first;
  return it->second;
}

void execute(const DnnlState::Entry& e, const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  DnnlState& st = dnnl_state();
  dnnl::memory mem_a(e.a, st.eng, a.data()), mem_b(e.b, st.eng, b.data()), mem_c(e.c, st.eng, out.data());
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, mem_a},
                                                {DNNL_ARG_WEIGHTS, mem_b},
                                                {DNNL_ARG_DST, mem_c}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, st.eng, bias.data()));
  e.prim.execute(st.strm, args);
  st.strm.wait();
}

// relu over out, contiguous, keeping NaN (as ops::relu). Not oneDNN's eltwise_relu post-op: with
// alpha 0 it is max(x, 0), which turns NaN into 0.
void relu_keep_nan(const Tensor& out) {
  core::dispatch_floating(out.dtype(), "linear_relu", [&]<typename T>() {
    using Op = core::opmath_t<T>;
    T* p = out.data_ptr<T>();
    const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      if (Op(p[i]) < Op(0)) p[i] = T(0);
  });
}

// out (B, M, N) contiguous; a, b dnnl-compatible after describe(). The epilogue's bias is oneDNN's
// bias argument (a (1, 1, N) broadcast row) applied to the float32 accumulator before the single
// rounding to out's dtype; its relu follows as a pass that keeps NaN (it commutes with the rounding).
void dnnl_matmul(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                 const GemmEpilogue& ep) {
  using dt = dnnl::memory::data_type;
  const dt type = a.dtype() == DType::BFloat16 ? dt::bf16 : dt::f32;
  const dt out_type = out.dtype() == DType::BFloat16 ? dt::bf16 : dt::f32;  // float32 from bfloat16: widening
  const Mat ma = describe(a), mb = describe(b);
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2);
  const Mat mc{B, M, N, M * N, N, 1};
  std::vector<int64_t> key = {int64_t(type),
                              int64_t(out_type),
                              ma.batch,
                              ma.rows,
                              ma.cols,
                              ma.sb,
                              ma.sr,
                              ma.sc,
                              mb.batch,
                              mb.rows,
                              mb.cols,
                              mb.sb,
                              mb.sr,
                              mb.sc,
                              B,
                              M,
                              N,
                              std::bit_cast<int64_t>(alpha),
                              std::bit_cast<int64_t>(beta),
                              int64_t(ep.bias.defined()),
                              int64_t(ep.relu)};
  const DnnlState::Entry& e = cached_entry(std::move(key), [&] {
    DnnlState::Entry fresh;
    try {
      fresh.a = md(ma, type);
      fresh.b = md(mb, type);
      fresh.c = md(mc, out_type);
      if (ep.bias.defined()) fresh.bias = dnnl::memory::desc({1, 1, N}, out_type, {N, N, 1});
      dnnl::matmul::desc d = ep.bias.defined() ? dnnl::matmul::desc(fresh.a, fresh.b, fresh.bias, fresh.c)
                                               : dnnl::matmul::desc(fresh.a, fresh.b, fresh.c);
      fresh.prim = dnnl::matmul(dnnl::matmul::primitive_desc(d, gemm_attr(alpha, beta), dnnl_state().eng));
    } catch (const dnnl::error& err) {
      throw Error("matmul", std::string("oneDNN could not create a matmul for a ") + core::to_string(a.sizes()) +
                                " @ " + core::to_string(b.sizes()) + " product: " + err.what());
    }
    return fresh;
  });
  execute(e, out, a, b, ep.bias);
  if (ep.relu) relu_keep_nan(out);
}

// Note [Large float32 products through dnnl_sgemm]
// On AVX-512, oneDNN 2.6's matmul primitive picks its brgemm kernel (brg:avx512_core) for every
// float32 product, while its BLAS-style dnnl_sgemm runs the older jit gemm (avx512_common), which
// is the faster one for large products of plain matrices: on an Emerald Rapids VM at 2 threads
// (standalone probe, best of 9) 512^3 284 -> 316 GFLOP/s, 1024^3 293 -> 301, 2048^3 289 -> 321,
// 1024^3 with both operands transposed 305 -> 310, (256 x 1024) @ (1024 x 784) 293 -> 321. It lost
// where a dimension was 256 or less (256 x 1024 x 1024 with b transposed 306 -> 250; 2048 x 1024
// x 256 310 -> 272), so only products with M, N and K all >= 512, one matrix each (batch 1), no
// epilogue and each operand contiguous in one of its two dims take it. A fixed rule, not a timing
// per shape, so that a product's bits do not depend on a race between kernels. Below AVX-512 the
// two are the same jit gemm.
bool try_sgemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  static const bool avx512 = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  if (!avx512 || out.dtype() != DType::Float32 || out.size(0) != 1) return false;
  const Mat ma = describe(a), mb = describe(b);
  const int64_t M = out.size(1), N = out.size(2), K = ma.cols;
  if (std::min({M, N, K}) < 512 || ma.batch != 1 || mb.batch != 1) return false;
  auto layout = [](const Mat& m, char& trans, int64_t& ld) {  // a row-major or a transposed matrix
    if (m.sc == 1 && m.sr >= m.cols) trans = 'N', ld = m.sr;
    else if (m.sr == 1 && m.sc >= m.rows) trans = 'T', ld = m.sc;
    else return false;
    return true;
  };
  char ta, tb;
  int64_t lda, ldb;
  if (!layout(ma, ta, lda) || !layout(mb, tb, ldb)) return false;
  const dnnl_status_t st = dnnl_sgemm(ta, tb, M, N, K, float(alpha), a.data_ptr<float>(), lda, b.data_ptr<float>(), ldb,
                                      float(beta), out.data_ptr<float>(), N);
  return st == dnnl_success;
}

// Note [Two batch dims]
// A (B1, B2, M, K) operand whose two batch dims cannot merge into one stride -- the heads of
// attention, q.view(N, L, H, hd).transpose(1, 2), with strides (L*E, hd, E, 1) -- goes to oneDNN
// as a 4-D memory descriptor with its own strides instead of being copied contiguous first.
// oneDNN reads any such strided layout (its gemm-based matmul; for attention's T x d_head
// products that measured faster than the copy plus the batched kernel). Size-1 dims get the
// stride a dense layout would give them; dst is always contiguous.
dnnl::memory::desc md4(const Tensor& t, dnnl::memory::data_type dt) {
  dnnl::memory::dims dims(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  int64_t inner = 1;
  for (int d = 3; d >= 0; --d) {
    if (dims[size_t(d)] == 1) strides[size_t(d)] = inner;
    inner = std::max<int64_t>(inner, strides[size_t(d)] * dims[size_t(d)]);
  }
  return dnnl::memory::desc(dims, dt, strides);
}

// out (B1, B2, M, N) contiguous; a (B1, B2, M, K), b (B1, B2, K, N) with equal batch dims and
// plain inner matrices. Returns false where oneDNN declines the layout (the caller copies).
bool dnnl_matmul4(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  using dt = dnnl::memory::data_type;
  const dt type = a.dtype() == DType::BFloat16 ? dt::bf16 : dt::f32;
  std::vector<int64_t> key = {-4, int64_t(type), std::bit_cast<int64_t>(alpha), std::bit_cast<int64_t>(beta)};
  for (const Tensor* t : {&out, &a, &b}) {
    key.insert(key.end(), t->sizes().begin(), t->sizes().end());
    key.insert(key.end(), t->strides().begin(), t->strides().end());
  }
  const DnnlState::Entry& e = cached_entry(std::move(key), [&] {
    DnnlState::Entry fresh;
    try {  // oneDNN refuses some strides already in the memory descriptor (e.g. stride-0 batch dims)
      fresh.a = md4(a, type);
      fresh.b = md4(b, type);
      fresh.c = md4(out, type);
      fresh.prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(fresh.a, fresh.b, fresh.c),
                                                             gemm_attr(alpha, beta), dnnl_state().eng));
    } catch (const dnnl::error&) {
      fresh.prim = dnnl::matmul();  // declined: remembered, so the next call copies at once
    }
    return fresh;
  });
  if (!e.prim) return false;
  execute(e, out, a, b, Tensor());
  return true;
}

// The specification-grade fallback: c[bt] = alpha * a[bt] @ b[bt] + beta * c[bt], accumulating in T
// (PyTorch accumulates integer products in the integer type too, wrapping on overflow).
//   c: (B, M, N) contiguous; a: (B, M, K) any strides; b: (B, K, N) with unit column stride.
template <typename T>
void gemm_loop(T* c, const T* a, const Mat& A, const T* b, const Mat& Bm, int64_t B, int64_t M, int64_t N, int64_t K,
               T alpha, T beta) {
  constexpr int64_t kRows = 4, kCols = 256, kDepth = 128;
  const int64_t row_blocks = (M + kRows - 1) / kRows;
  const int64_t tasks = B * row_blocks;
#pragma omp parallel for schedule(static) if (B * M * N * K > 32768)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t bt = task / row_blocks, i0 = (task % row_blocks) * kRows, i1 = std::min(M, i0 + kRows);
    const T* ab = a + (A.batch == 1 ? 0 : bt * A.sb);
    const T* bb = b + (Bm.batch == 1 ? 0 : bt * Bm.sb);
    T* cb = c + bt * M * N;
    T acc[kRows][kCols];
    for (int64_t j0 = 0; j0 < N; j0 += kCols) {
      const int64_t nj = std::min(kCols, N - j0);
      for (int64_t r = 0; r < i1 - i0; ++r)
        for (int64_t j = 0; j < nj; ++j) acc[r][j] = T(0);
      for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
        const int64_t k1 = std::min(K, k0 + kDepth);
        for (int64_t k = k0; k < k1; ++k) {
          const T* brow = bb + k * Bm.sr + j0;
          for (int64_t r = 0; r < i1 - i0; ++r) {
            const T aik = ab[(i0 + r) * A.sr + k * A.sc];
            T* accr = acc[r];
            for (int64_t j = 0; j < nj; ++j) accr[j] += aik * brow[j];
          }
        }
      }
      for (int64_t r = 0; r < i1 - i0; ++r) {
        T* crow = cb + (i0 + r) * N + j0;
        if (beta == T(0)) {
          for (int64_t j = 0; j < nj; ++j) crow[j] = alpha * acc[r][j];
        } else {
          for (int64_t j = 0; j < nj; ++j) crow[j] = alpha * acc[r][j] + beta * crow[j];
        }
      }
    }
  }
}

// out *= beta (out = 0 when beta == 0): the K == 0 product.
void scale_out(const Tensor& out, double beta) {
  if (beta == 0) {
    std::fill_n(static_cast<char*>(out.data()), out.numel() * int64_t(out.itemsize()), char(0));
    return;
  }
  core::dispatch(out.dtype(), [&]<typename T>() {
    T* p = out.data_ptr<T>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = T(core::opmath_t<T>(beta) * core::opmath_t<T>(p[i]));
  });
}

// The epilogue as a pass over out (B, M, N), contiguous: for the dtypes oneDNN does not multiply,
// and for K == 0. Computes in the dtype's opmath type; relu keeps NaN (as ops::relu).
void apply_epilogue(const Tensor& out, const GemmEpilogue& ep) {
  if (ep.empty()) return;
  const int64_t N = out.size(2), rows = out.numel() / std::max<int64_t>(N, 1);
  core::dispatch(out.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using Op = core::opmath_t<T>;
      T* p = out.data_ptr<T>();
      const T* bias = ep.bias.defined() ? ep.bias.data_ptr<T>() : nullptr;
      const bool relu = ep.relu;
#pragma omp parallel for schedule(static) if (rows * N > 65536)
      for (int64_t r = 0; r < rows; ++r) {
        T* row = p + r * N;
        for (int64_t j = 0; j < N; ++j) {
          Op v = Op(row[j]);
          if (bias) v = v + Op(bias[j]);
          if (relu && v < Op(0)) v = Op(0);
          row[j] = T(v);
        }
      }
    }
  });
}

// Note [Padded leading dimensions]
// Below AVX-512 (this project's Zen 3 hosts) oneDNN 2.6's float32 gemm loses half its speed when
// an operand's leading dimension is a multiple of 256 elements (1 KB), as in a linear layer's
// weight gradient gz^T @ X with 1024 features: measured at one thread, M 1024 K 2048 N 256 with A
// column-major ran at 36-38 GFLOP/s with lda 1024 and at 80-85 with lda 1040; M 256 K 2048 N 1024
// at 42 with ldb 1024 and at 82-85 with ldb 1040 (2 threads: 72 -> 153-172). Both operands' ld
// trip it (cache-set conflicts when its kernels pack them). So there a large operand with such a
// leading dimension is copied into a buffer whose rows are 16 elements longer, which costs one
// pass over it against a product that reads it 2 x (other dimension) times. AVX-512 hosts
// measured near peak without it, so they keep reading in place.
// A row-major b is copied only when it is at least twice as wide as M, or 512 wide: the square
// products gained nothing from the padding and paid for the copy (2 threads, quiet machine,
// oneDNN alone, GFLOP/s in place / padded without the copy / with it: 256^3 182 / 182 / 171,
// 1024^3 175 / 171 / 169, 2048^3 177 / 174 / 174), nor did the ld-256 and ld-1024 products of a
// GPT's backward (M 2048 K 256..1024 N 256, M 256..1024 K 2048 N 256, M 2048 K 256 N 1024: the
// copy gained at most 1% and cost up to 5%), while M 256 K 2048 N 1024 gained even with the copy
// (157 / 176 / 165). Square 512 ran at 0.71-0.78x LibTorch in the ops bench in place, so ld 512
// keeps the copy; so does a column-major a (1024_transposed, lda 1024, at 0.92x in a one-thread
// run without it). See "float32 matmul against MKL: measured" in engine/ops/README.md.
bool pads_leading_dims() {
  static const bool pad = dnnl::get_effective_cpu_isa() < dnnl::cpu_isa::avx512_core;
  return pad;
}

// t: (1, R, C) float32, plain (describe). A copy with the leading dimension padded by 16 when
// it is a multiple of 256, t is laid out as `want_row_major` says (a column-major a, as in
// gz^T @ X, and a row-major b, as in gz @ W, were measured; a transposed weight read by the
// forward was not helped) and the copy is worth it (other: the product's dimension that t is not
// part of, N for a and M for b; at least 64, and for a row-major b other than 512 wide at most
// ld / 2); else t itself.
Tensor padded(const Tensor& t, int64_t other, bool want_row_major) {
  const Mat m = describe(t);
  if (m.batch != 1 || other < 64 || m.rows * m.cols < (int64_t(1) << 16)) return t;
  const bool row_major = m.sc == 1 && m.rows > 1;
  const int64_t ld = row_major ? m.sr : m.sc;
  if (row_major != want_row_major || ld % 256 != 0) return t;
  if (row_major && ld != 512 && 2 * other > ld) return t;
  const Tensor mat = row_major ? t.select(0, 0) : t.select(0, 0).t();  // rows contiguous
  Tensor buf = empty({mat.size(0), mat.size(1) + 16}, t.dtype());
  Tensor body = buf.narrow(1, 0, mat.size(1));
  body.copy_(mat);
  return (row_major ? body : body.t()).unsqueeze(0);
}

// Note [oneDNN AMX bfloat16 with 49 <= N <= 63]
// oneDNN 2.6's AMX bfloat16 matmul (brg:avx512_core_amx_bf16; Debian's libdnnl 2.6.3 on CPUs with
// AMX) returns wrong products -- off by ~100%, depending on whatever memory it reads -- when the
// product has 49 <= N <= 63 output columns and runs on more than one thread with less parallel work
// than threads. Its blocking heuristic (compute_blocking_heuristic_amx) starts from an N block of
// min(64, N) and, to make more parallel work, tries blocks 16 smaller: for those N alone that is a
// block of 33..47 columns, not a multiple of its 16-column tiles. Measured over every N from 1 to
// 300, M 1..200, K 5..4096, 2 to 8 threads and every operand layout: only N 49..63 failed (M <= 32
// at 2 threads, M <= 128 at 8); oneDNN's next bfloat16 kernels (brg:avx512_core_bf16) and one
// thread never did. A GPT with a vocabulary of 50 or 3 * d_model = 60 (attention's in_proj) met it
// in every step. So those products compute in float32 and round once, as below AVX-512 -- float32
// accumulation and one rounding, what the AMX kernels and LibTorch compute -- while every other N
// keeps the AMX kernels (2.5-6x faster here than the next ones). Rows: Note [bfloat16 products
// with little parallel work] in suites/ops/cases_linalg.cpp.
bool amx_bf16_unsafe_n(int64_t N) {
  static const bool amx = [] {
    const auto amx_bits = unsigned(dnnl::cpu_isa::avx512_core_amx);
    return (unsigned(dnnl::get_effective_cpu_isa()) & amx_bits) == amx_bits;
  }();
  return amx && N >= 49 && N <= 63;
}

// Note [bfloat16 products through float32]
// A bfloat16 product accumulates in float32 and rounds once on store (LibTorch's result, whatever
// kernel computes it). oneDNN's bfloat16 kernels multiply with AMX tiles or AVX512-BF16's
// vdpbf16ps, and whether that beats widening both operands to float32 for the float32 kernel
// depends on the core: on Zen 4 vdpbf16ps does twice the FLOPs per cycle of vfmadd231ps; on an
// Intel Xeon without AMX (an Emerald Rapids VM that hides it) half (the peak suite: bf16_dot 86,
// fp32_fma 173 GFLOP/s per core), so oneDNN's bfloat16 matmul/1024 ran at 169 GFLOP/s where
// float32 ran at 300; with AVX-512 but no AVX512-BF16, oneDNN emulates the instruction (34.9 ms
// for that product against 7.6 ms through float32). So the route is measured once per process:
// AMX -> oneDNN; AVX512-BF16 -> oneDNN only when vdpbf16ps's FLOP rate on this core is at least
// 1.25x vfmadd231ps's (widening reads and writes each operand once more; two loops of ~40 us);
// else float32. Products are exact in float32 either way, so only the order of the float32 sums
// differs between routes. TRAINBENCH_BF16_MATMUL=onednn|float32 forces one (A/B runs, tests).

// Seconds of `rounds` x 12 independent chains of vdpbf16ps (dot: 64 FLOPs each) or of
// vfmadd231ps (32 FLOPs each). Called only where the CPU has AVX512-BF16.
__attribute__((target("avx512f,avx512bf16"))) double time_chains(bool dot, int rounds) {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-3f);
  const __m512bh xh = (__m512bh)_mm512_set1_epi16(0x3F80), yh = (__m512bh)_mm512_set1_epi16(0x3A83);  // 1.0, ~1e-3
  const auto t0 = std::chrono::steady_clock::now();
  if (dot) {
    for (int i = 0; i < rounds; ++i)
      for (auto& a : acc) a = _mm512_dpbf16_ps(a, xh, yh);
  } else {
    for (int i = 0; i < rounds; ++i)
      for (auto& a : acc) a = _mm512_fmadd_ps(x, y, a);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  volatile float sink = lanes[0];  // keeps the loops
  (void)sink;
  return seconds;
}

Bf16Products measure_bf16_products(double* ratio) {
  *ratio = 0;
  if (!dnnl_has_bf16()) return Bf16Products::Float32;
  const auto amx_bits = unsigned(dnnl::cpu_isa::avx512_core_amx);
  if ((unsigned(dnnl::get_effective_cpu_isa()) & amx_bits) == amx_bits) return Bf16Products::OneDnn;
  if (!__builtin_cpu_supports("avx512bf16")) return Bf16Products::Float32;  // oneDNN would emulate it
  constexpr int kRounds = 4000;
  time_chains(true, kRounds);  // warm-up: the core's AVX-512 clock settles first
  time_chains(false, kRounds);
  double dot = 1e30, fma = 1e30;
  for (int i = 0; i < 5; ++i) {  // alternated, so that a preemption hurts one sample, not one side
    dot = std::min(dot, time_chains(true, kRounds));
    fma = std::min(fma, time_chains(false, kRounds));
  }
  *ratio = (64.0 / dot) / (32.0 / fma);  // FLOP rates, vdpbf16ps over vfmadd231ps
  return *ratio >= 1.25 ? Bf16Products::OneDnn : Bf16Products::Float32;
}

std::atomic<int> g_forced_bf16_products{-1};

// Whether oneDNN multiplies `dt` operands into an (.., N) product itself; float16, and bfloat16
// where it cannot (below AVX-512), must not (Note [oneDNN AMX bfloat16 with 49 <= N <= 63]) or
// is slower (Note [bfloat16 products through float32]), compute in float32 and round once.
bool dnnl_multiplies(DType dt, int64_t N) {
  return dt == DType::Float32 ||
         (dt == DType::BFloat16 && bf16_products() == Bf16Products::OneDnn && !amx_bf16_unsafe_n(N));
}

// d[i] = float(s[i]): bfloat16 is float32's top half (restrict lets GCC vectorise it).
void widen_run(float* __restrict d, const uint16_t* __restrict s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = std::bit_cast<float>(uint32_t(s[i]) << 16);
}

// A float32 copy of a bfloat16 operand. A dense one (in any dim order) keeps its strides and is
// widened as one run of memory, in parallel; any other layout goes through copy_.
Tensor widen_bf16(const Tensor& t) {
  if (!is_non_overlapping_and_dense(t)) return t.to(DType::Float32);
  Tensor out = empty_like_preserve(t, DType::Float32);
  for (int64_t d = 0; d < t.dim(); ++d)  // same memory order (a size-1 dim's stride is free)
    TB_CHECK(t.size(d) == 1 || out.stride(d) == t.stride(d), "gemm_batched",
             "internal: widened operand changed its layout");
  const auto* s = static_cast<const uint16_t*>(t.data());
  auto* d = out.data_ptr<float>();
  const int64_t n = t.numel(), chunk = 16384;
#pragma omp parallel for schedule(static) if (n >= 4 * chunk)
  for (int64_t c = 0; c < n; c += chunk) widen_run(d + c, s + c, std::min(chunk, n - c));
  return out;
}

// out = BFloat16(acc) element by element, both contiguous.
void round_to_bf16(const Tensor& out, const Tensor& acc) {
  auto* d = static_cast<core::BFloat16*>(out.data());
  const float* s = acc.data_ptr<float>();
  const int64_t n = out.numel(), chunk = 16384;
#pragma omp parallel for schedule(static) if (n >= 4 * chunk)
  for (int64_t c = 0; c < n; c += chunk) store_bf16(d + c, s + c, std::min(chunk, n - c));
}

}  // namespace

bool dnnl_has_bf16() {
  static const bool ok = [] {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc m({1, 2, 2}, dt::bf16, {4, 2, 1});
    try {
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(m, m, m), dnnl_state().eng);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

namespace {
// The auto route and the ratio it was decided on, measured once.
struct Bf16Measurement {
  Bf16Products route;
  double dot_over_fma;
};
const Bf16Measurement& bf16_measurement() {
  static const Bf16Measurement m = [] {
    Bf16Measurement r{};
    r.route = measure_bf16_products(&r.dot_over_fma);
    return r;
  }();
  return m;
}
}  // namespace

Bf16Products bf16_products() {
  if (const int f = g_forced_bf16_products.load(std::memory_order_relaxed); f >= 0) return Bf16Products(f);
  static const Bf16Products route = [] {
    const std::string env = core::env_choice("TRAINBENCH_BF16_MATMUL", "auto", {"auto", "onednn", "float32"});
    if (env == "float32" || !dnnl_has_bf16()) return Bf16Products::Float32;
    if (env == "onednn") return Bf16Products::OneDnn;
    return bf16_measurement().route;
  }();
  return route;
}

double bf16_dot_over_fma() { return bf16_measurement().dot_over_fma; }

void force_bf16_products(std::optional<Bf16Products> route) {
  TB_CHECK(!route || *route == Bf16Products::Float32 || dnnl_has_bf16(), "force_bf16_products",
           "oneDNN has no bfloat16 products on this CPU");
  g_forced_bf16_products.store(route ? int(*route) : -1, std::memory_order_relaxed);
}

// Note [Widening bfloat16 products]
// bfloat16 operands into a float32 output: oneDNN's bfloat16 kernels accumulate in float32 anyway,
// and with a float32 destination they store that accumulator instead of rounding it to bfloat16
// (where bfloat16 runs through float32, the widened product writes out directly). Autocast's
// gradients use it (Note [Autocast gradients in float32] in autograd/functions/linalg.cpp): a
// float32 weight's gradient comes out of its product in float32, with no bfloat16 buffer and no
// conversion pass between them.
void gemm_batched(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                  const GemmEpilogue& ep) {
  if (out.dim() == 4) {
    // See Note [Two batch dims].
    TB_CHECK(a.dim() == 4 && b.dim() == 4 && out.is_contiguous() && ep.empty() && a.size(0) == out.size(0) &&
                 b.size(0) == out.size(0) && a.size(1) == out.size(1) && b.size(1) == out.size(1),
             "gemm_batched", "internal: 4-D operands need equal batch dims, a contiguous output and no epilogue");
    const int64_t B1 = out.size(0), B2 = out.size(1), M = out.size(2), N = out.size(3), K = a.size(3);
    const DType dt = out.dtype();
    auto plain = [](const Tensor& t) {
      const Mat m{1, t.size(2), t.size(3), 0, t.stride(2), t.stride(3)};
      return dnnl_compatible(describe_inner(m));
    };
    if (dnnl_multiplies(dt, N) && B1 * B2 * M * N > 0 && K > 0 && plain(a) && plain(b) &&
        dnnl_matmul4(out, a, b, alpha, beta))
      return;
    return gemm_batched(out.view({B1 * B2, M, N}), a.reshape({B1 * B2, M, K}), b.reshape({B1 * B2, K, N}), alpha, beta);
  }
  TB_CHECK(out.dim() == 3 && a.dim() == 3 && b.dim() == 3 && out.is_contiguous(), "gemm_batched",
           "internal: expects 3-D operands and a contiguous output");
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  TB_CHECK(ep.empty() || (alpha == 1 && beta == 0), "gemm_batched", "internal: an epilogue needs alpha 1, beta 0");
  TB_CHECK(!ep.bias.defined() || (ep.bias.dim() == 1 && ep.bias.size(0) == N && ep.bias.is_contiguous() &&
                                  ep.bias.dtype() == out.dtype()),
           "gemm_batched", "internal: the epilogue's bias must be (N) contiguous in out's dtype");
  if (B * M * N == 0) return;
  if (K == 0) {
    scale_out(out, beta);
    return apply_epilogue(out, ep);
  }
  const DType dt = out.dtype();
  // Note [Widening bfloat16 products]: the float32 accumulator stored as it is, by oneDNN's
  // bfloat16 kernels or, where they do not run here, by the product of the widened operands.
  const bool widening = a.dtype() != dt;
  if (widening) {
    TB_CHECK(a.dtype() == DType::BFloat16 && b.dtype() == DType::BFloat16 && dt == DType::Float32, "gemm_batched",
             "internal: mixed dtypes must be bfloat16 operands into a float32 output");
    if (!dnnl_multiplies(DType::BFloat16, N)) return gemm_batched(out, widen_bf16(a), widen_bf16(b), alpha, beta, ep);
  }
  if (widening || dnnl_multiplies(dt, N)) {
    Tensor a2 = dnnl_compatible(describe(a)) ? a : a.contiguous();
    Tensor b2 = dnnl_compatible(describe(b)) ? b : b.contiguous();
    // oneDNN broadcasts a batch of 1 only against a real batch: materialise one side if both broadcast.
    if (B > 1 && describe(a2).batch == 1 && describe(b2).batch == 1) a2 = a2.contiguous();
    if (!widening && dt == DType::Float32 && pads_leading_dims()) {  // Note [Padded leading dimensions]
      a2 = padded(a2, N, /*want_row_major=*/false);
      b2 = padded(b2, M, /*want_row_major=*/true);
    }
    if (!widening && ep.empty() && try_sgemm(out, a2, b2, alpha, beta))
      return;  // Note [Large float32 products through dnnl_sgemm]
    return dnnl_matmul(out, a2, b2, alpha, beta, ep);
  }
  if (dt == DType::BFloat16) {
    // Note [bfloat16 products through float32] (and below AVX-512, and Note [oneDNN AMX bfloat16
    // with 49 <= N <= 63]): widen, multiply in float32, round once on store.
    Tensor acc = beta != 0 ? widen_bf16(out) : empty(out.sizes(), DType::Float32);
    GemmEpilogue ep32{ep.bias.defined() ? widen_bf16(ep.bias) : Tensor(), ep.relu};
    gemm_batched(acc, widen_bf16(a), widen_bf16(b), alpha, beta, ep32);
    round_to_bf16(out, acc);
    return;
  }
  if (dt == DType::Float16) {
    // No float16 matmul in oneDNN here: compute in float32 and round once on store.
    Tensor acc = beta != 0 ? out.to(DType::Float32).contiguous() : empty(out.sizes(), DType::Float32);
    GemmEpilogue ep32{ep.bias.defined() ? ep.bias.to(DType::Float32) : Tensor(), ep.relu};
    gemm_batched(acc, a.to(DType::Float32), b.to(DType::Float32), alpha, beta, ep32);
    Tensor o = out;  // a handle to the same storage
    o.copy_(acc);
    return;
  }
  TB_CHECK(dt != DType::Bool, "matmul", "not implemented for dtype bool");
  Tensor b2 = b.stride(2) == 1 || b.size(2) == 1 ? b : b.contiguous();
  const Mat ma = describe(a), mb = describe(b2);
  core::dispatch(dt, [&]<typename T>() {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) {
      gemm_loop<T>(out.data_ptr<T>(), static_cast<const T*>(a.data()), ma, static_cast<const T*>(b2.data()), mb, B, M,
                   N, K, T(alpha), T(beta));
    }
  });
  apply_epilogue(out, ep);
}

}  // namespace tb::ops::cpu
