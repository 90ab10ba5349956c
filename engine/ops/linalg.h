// Linear algebra ops, named and shaped like LibTorch's: mm, bmm, matmul (PyTorch's 1-D/2-D/N-D
// broadcasting rules), addmm, linear, outer, dot, einsum. All matrix products end in one batched
// kernel (engine/ops/cpu/linalg_gemm.h): oneDNN for float32/bfloat16, a blocked loop otherwise.
// Operands of a product must share a dtype (as in PyTorch); bool products are an error.
#pragma once
#include <string>
#include <vector>

#include "engine/ops/common.h"

namespace tb::ops {

// a: (M, K), b: (K, N) -> (M, N).
Tensor mm(const Tensor& a, const Tensor& b);
Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b);
// a: (B, M, K), b: (B, K, N) -> (B, M, N); batch sizes must match exactly (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.matmul: 1-D x 1-D is a dot product, 1-D operands get a dim prepended (left) or appended
// (right) and removed again, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// a: (N), b: (N) -> 0-dim.
Tensor dot(const Tensor& a, const Tensor& b);
// beta * self + alpha * (a @ b); self broadcasts to (M, N); beta == 0 ignores self (NaN too).
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta = 1, double alpha = 1);
// x: (*, in), weight: (out, in), bias: (out) or undefined -> (*, out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// a: (N), b: (M) -> (N, M), with type promotion like torch.outer.
Tensor outer(const Tensor& a, const Tensor& b);
// General einsum: explicit ("ij,jk->ik") or implicit ("ij,jk") output, repeated labels within an
// operand take a diagonal ("ii->i"), "..." broadcasts; contractions run pairwise, left to right,
// through bmm.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace tb::ops
