// The one batched matrix-product kernel every linalg op (mm, bmm, matmul, addmm, linear, einsum)
// and conv fallback ends in. float32 and bfloat16 run on oneDNN's matmul primitive (cached per
// shape/strides/scales; large float32 products on AVX-512 on dnnl_sgemm: Note [Large float32
// products through dnnl_sgemm] in linalg_gemm.cpp). float16, and bfloat16 where oneDNN has no
// bfloat16 kernels (below AVX-512), where they are slower than float32 (Note [bfloat16 products
// through float32]) or where its AMX kernels go wrong (products with 49 to 63 columns: Note
// [oneDNN AMX bfloat16 with 49 <= N <= 63]), compute in float32 on oneDNN and round once; float64
// and the integer types use a blocked OpenMP loop (oneDNN has neither). This file knows no
// broadcasting or PyTorch argument rules: linalg.cpp resolves those first.
#pragma once
#include <optional>

#include "engine/tensor/tensor.h"

namespace tb::ops::cpu {

// What the product kernel applies to each output element before storing it, so that a linear
// layer's bias and activation cost no pass of their own: out = relu(a @ b + bias). float32 and
// bfloat16 run it as oneDNN's bias argument and eltwise post-op (the bias added to the float32
// accumulator, rounded once, like PyTorch's addmm); other dtypes add and clamp in the product
// loop's own dtype. Requires alpha == 1 and beta == 0.
struct GemmEpilogue {
  Tensor bias;  // (N) contiguous, out's dtype, or undefined
  bool relu = false;
  bool empty() const { return !bias.defined() && !relu; }
};

// out = alpha * (a @ b) + beta * out, per batch, then the epilogue.
// Also 4-D: out (B1, B2, M, N) contiguous, a (B1, B2, M, K) and b (B1, B2, K, N) with any
// strides (no epilogue): two batch dims that cannot merge into one stride, read in place.
//   out: (B, M, N), contiguous, same dtype as a and b -- or float32 with bfloat16 a and b, the float32
//        accumulator stored unrounded (Note [Widening bfloat16 products] in linalg_gemm.cpp); read
//        only when beta != 0.
//   a:   (B, M, K), any strides (batch stride 0 = broadcast).
//   b:   (B, K, N), any strides.
// beta == 0 ignores out's old contents (NaN included), as BLAS and PyTorch do.
void gemm_batched(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1, double beta = 0,
                  const GemmEpilogue& epilogue = {});

// Whether oneDNN runs bfloat16 products and convolutions on this CPU (it needs AVX-512; on an
// AVX2-only CPU it declines them). Where it does not, bfloat16 computes in float32 and rounds once,
// which is what oneDNN's own bfloat16 kernels do (float32 accumulation, one rounding on store).
// Asked once, by creating a small bfloat16 matmul.
bool dnnl_has_bf16();

// How bfloat16 products run here (Note [bfloat16 products through float32] in linalg_gemm.cpp):
// oneDNN's bfloat16 kernels, or both operands widened to float32 for the float32 kernel and the
// result rounded once. Decided once per process from TRAINBENCH_BF16_MATMUL (auto | onednn |
// float32) and, for auto, by timing this core's vdpbf16ps against its vfmadd231ps.
enum class Bf16Products { OneDnn, Float32 };
Bf16Products bf16_products();
// vdpbf16ps's FLOP rate over vfmadd231ps's on this core as measured (0 without AVX512-BF16, or
// with AMX, where it is not measured); for run headers and logs.
double bf16_dot_over_fma();
// For tests and A/B runs in one process: force a route, or std::nullopt to go back to the decided
// one. OneDnn requires dnnl_has_bf16().
void force_bf16_products(std::optional<Bf16Products> route);

}  // namespace tb::ops::cpu
