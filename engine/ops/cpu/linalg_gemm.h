// The one batched matrix-product kernel every linalg op (mm, bmm, matmul, addmm, linear, einsum)
// and conv fallback ends in. float32 and bfloat16 run on oneDNN's matmul primitive (cached per
// shape/strides/scales); float16 computes in float32 on oneDNN and rounds once; float64 and the
// integer types use a blocked OpenMP loop (oneDNN has neither). This file knows no broadcasting
// or PyTorch argument rules: linalg.cpp resolves those first.
#pragma once
#include "engine/tensor/tensor.h"

namespace tb::ops::cpu {

// out = alpha * (a @ b) + beta * out, per batch.
//   out: (B, M, N), contiguous, same dtype as a and b; read only when beta != 0.
//   a:   (B, M, K), any strides (batch stride 0 = broadcast).
//   b:   (B, K, N), any strides.
// beta == 0 ignores out's old contents (NaN included), as BLAS and PyTorch do.
void gemm_batched(const Tensor& out, const Tensor& a, const Tensor& b, double alpha = 1, double beta = 0);

}  // namespace tb::ops::cpu
