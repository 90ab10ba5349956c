// Backward kernels of embedding and dropout (engine/ops/nn.h): embedding_dense_backward and
// native_dropout_backward. Both are plain loops; the reduced floats compute in float.
#include <vector>

#include "engine/ops/nn.h"

namespace tb::ops {

Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx) {
  KernelEvent event("embedding_dense_backward", {&grad_output, &indices});  // Note [Backward kernels]
  constexpr const char* op = "embedding_dense_backward";
  TB_CHECK(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32, op,
           "expected indices of type Long or Int, got ", core::name(indices.dtype()));
  TB_CHECK(grad_output.dim() == indices.dim() + 1, op, "expected grad_output of shape indices.shape + (D), got ",
           core::to_string(grad_output.sizes()), " for indices ", core::to_string(indices.sizes()));
  const int64_t D = grad_output.size(-1), n = indices.numel();
  const Tensor ic = indices.to(DType::Int64).contiguous();
  const int64_t* idx = ic.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    TB_CHECK(idx[i] >= 0 && idx[i] < num_weights, op, "index ", idx[i], " is out of range for ", num_weights,
             " embeddings");
  const Tensor g = grad_output.contiguous();
  return core::dispatch_floating(g.dtype(), op, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    Tensor acc = zeros({num_weights, D}, core::dtype_of<Op>);  // reduced floats accumulate in float
    Op* gw = acc.data_ptr<Op>();
    const T* go = g.data_ptr<T>();
    // Repeated indices add into one row, so threads split the columns: each owns a block of every
    // row, and every element sums its contributions in index order, whatever the thread count.
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (D + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1 && n * D > 32768)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kBlock, c1 = std::min(D, c0 + kBlock);
      for (int64_t i = 0; i < n; ++i) {
        if (idx[i] == padding_idx) continue;
        Op* dst = gw + idx[i] * D;
        const T* src = go + i * D;
        for (int64_t c = c0; c < c1; ++c) dst[c] += Op(src[c]);
      }
    }
    return acc.dtype() == g.dtype() ? acc : acc.to(g.dtype());
  });
}

Tensor native_dropout_backward(const Tensor& grad_output, const Tensor& mask, double scale) {
  KernelEvent event("native_dropout_backward", {&grad_output, &mask});  // Note [Backward kernels]
  constexpr const char* op = "native_dropout_backward";
  TB_CHECK(mask.dtype() == DType::Bool && mask.sizes() == grad_output.sizes(), op,
           "expected a bool mask of grad_output's shape ", core::to_string(grad_output.sizes()), ", got ",
           core::name(mask.dtype()), core::to_string(mask.sizes()));
  const Tensor g = grad_output.contiguous(), m = mask.contiguous();
  Tensor out = empty(g.sizes(), g.dtype());
  const int64_t n = g.numel();
  core::dispatch_floating(g.dtype(), op, [&]<typename T>() {
    using Op = core::opmath_t<T>;
    const Op s = Op(scale);
    const T* gp = g.data_ptr<T>();
    const bool* mp = m.data_ptr<bool>();
    T* o = out.data_ptr<T>();
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) o[i] = T(mp[i] ? Op(gp[i]) * s : Op(0));
  });
  return out;
}

}  // namespace tb::ops
