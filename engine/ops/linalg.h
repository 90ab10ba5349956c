// Linear algebra ops, named and shaped like LibTorch's: mm, bmm, matmul (PyTorch's 1-D/2-D/N-D
// broadcasting rules), addmm, linear (and linear_relu), outer, dot, einsum. All matrix products end in one batched
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
// a: (M, K), b: (K, N), both bfloat16 -> float32 (M, N): the product's float32 accumulator, not
// rounded to bfloat16 (autocast's float32 gradients). Into `into` where it is a contiguous float32
// (M, N) tensor sharing no memory with a or b, else a fresh tensor; returns the result.
Tensor mm_float32(const Tensor& a, const Tensor& b, const Tensor& into = {});
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
// relu(linear(x, weight, bias)) as one product: the bias and the relu run in the gemm's epilogue
// (oneDNN post-ops), so the activation costs no pass of its own. Same shapes and rules as linear.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// relu's backward mask of a (rows, n) float output, packed: bit (j % 32) of int32 word
// (r, j / 32) is set where output[r, j] is not <= 0 (> 0, or NaN, as threshold_backward keeps
// the gradient there). A linear_relu node saves this (n / 8 bytes a row) instead of the output.
Tensor relu_mask(const Tensor& output);
// The two passes a linear layer's backward needs besides its two products, fused into one read of
// grad (rows, out):
//   grad_in = grad where the mask bit is set, else 0  (relu's backward; with `mask` undefined,
//                                                      grad_in is grad itself, uncopied)
//   bias_grad = grad_in summed over the rows          (out), when want_bias_grad
// grad: 2-D (rows, out), floating; mask: relu_mask of the (rows, out) output. The row sums are
// blocked (partial sums of 64 rows, then the partials), accumulating in the dtype's opmath type.
// in_place: grad_in overwrites grad when grad is contiguous (for a caller that alone holds grad's
// buffer: the backward then needs no second gradient-sized buffer). bias_float32: bias_grad is
// float32 whatever grad's dtype (the opmath sums stored unrounded: autocast's float32 gradients).
struct LinearGradPrep {
  Tensor grad_in, bias_grad;
};
LinearGradPrep linear_grad_prep(const Tensor& grad, const Tensor& mask, bool want_bias_grad, bool in_place = false,
                                bool bias_float32 = false);
// a: (N), b: (M) -> (N, M), with type promotion like torch.outer.
Tensor outer(const Tensor& a, const Tensor& b);
// General einsum: explicit ("ij,jk->ik") or implicit ("ij,jk") output, repeated labels within an
// operand take a diagonal ("ii->i"), "..." broadcasts; contractions run pairwise, left to right,
// through bmm.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace tb::ops
