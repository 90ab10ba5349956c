// mm, bmm, matmul, dot, addmm, linear, outer: PyTorch's argument rules (shapes, dtypes,
// broadcasting) resolved here, arithmetic in cpu::gemm_batched. einsum lives in
// cpu/linalg_einsum.cpp.
#include "engine/ops/linalg.h"

#include <cmath>

#include "engine/ops/cpu/linalg_gemm.h"
#include "engine/ops/cpu/loops.h"

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
  check_dim("mm", a, 2, "self");
  check_dim("mm", b, 2, "mat2");
  check_same_dtype("mm", a, b);
  TB_CHECK(a.size(1) == b.size(0), "mm", "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
           " and ", b.size(0), "x", b.size(1), ")");
  return bmm_fresh(a.unsqueeze(0), b.unsqueeze(0)).view({a.size(0), b.size(1)});
}

Tensor& mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  Tensor r = mm(a, b);
  TB_CHECK(!out.defined() || out.dtype() == r.dtype(), "mm", "expected out tensor to have dtype ",
           core::name(r.dtype()), ", but got ", core::name(out.dtype()), " instead");
  out = prepare_out(&out, r.sizes(), r.dtype(), "mm");
  out.copy_(r);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_dim("bmm", a, 3, "batch1");
  check_dim("bmm", b, 3, "batch2");
  check_same_dtype("bmm", a, b);
  TB_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm", "batch1 and batch2 shapes do not match: ",
           core::to_string(a.sizes()), " and ", core::to_string(b.sizes()));
  return bmm_fresh(a, b);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  check_dim("dot", a, 1, "self");
  check_dim("dot", b, 1, "tensor");
  check_same_dtype("dot", a, b);
  TB_CHECK(a.size(0) == b.size(0), "dot", "inconsistent tensor size, expected tensor [", a.size(0),
           "] and src [", b.size(0), "] to have the same number of elements");
  return bmm_fresh(a.unsqueeze(0).unsqueeze(0), b.unsqueeze(1).unsqueeze(0)).view({});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
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
  return bmm_fresh(as_batched(a2, batch), as_batched(b2, batch)).view(out_shape);
}

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha) {
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

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  TB_CHECK(x.dim() >= 1, "linear", "input must be at least 1-D, got a 0-D tensor");
  check_dim("linear", weight, 2, "weight");
  check_same_dtype("linear", x, weight);
  const int64_t in = weight.size(1), outf = weight.size(0);
  TB_CHECK(x.size(-1) == in, "linear", "mat1 and mat2 shapes cannot be multiplied: input ", core::to_string(x.sizes()),
           ", weight ", core::to_string(weight.sizes()));
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  const Tensor x2 = x.reshape({rows, in});
  Tensor out = empty({rows, outf}, x.dtype());
  if (bias.defined()) {
    check_same_dtype("linear", x, bias);
    TB_CHECK(bias.dim() <= 1 && (bias.numel() == outf || bias.numel() == 1), "linear", "bias of shape ",
             core::to_string(bias.sizes()), " does not match ", outf, " output features");
  }
  // Like PyTorch: a 2-D input is one fused addmm; other ranks round the product to the dtype
  // first and then add the bias (visible in float16/bfloat16).
  const bool fused = bias.defined() && x.dim() == 2;
  if (fused) out.copy_(bias);
  cpu::gemm_batched(out.unsqueeze(0), x2.unsqueeze(0), weight.t().unsqueeze(0), 1, fused ? 1 : 0);
  if (bias.defined() && !fused) {
    StridedLoop loop({out, out, bias.expand({rows, outf})});
    core::dispatch(out.dtype(), [&]<typename T>() {
      using Op = core::opmath_t<T>;
      cpu::cpu_kernel<T, T, T>(loop, [](Op y, Op b) -> Op { return y + b; });
    });
  }
  Shape shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(outf);
  return out.view(shape);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_dim("outer", a, 1, "self");
  check_dim("outer", b, 1, "vec2");
  const DType dt = result_type(a, b);
  const int64_t n = a.size(0), m = b.size(0);
  Tensor out = empty({n, m}, dt);
  StridedLoop loop({out, a.to(dt).unsqueeze(1).expand({n, m}), b.to(dt).unsqueeze(0).expand({n, m})});
  core::dispatch(dt, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    cpu::cpu_kernel<T, T, T>(loop, [](Op x, Op y) -> Op {
      if constexpr (std::is_same_v<T, bool>) return x && y;
      else return x * y;
    });
  });
  return out;
}

}  // namespace tb::ops
