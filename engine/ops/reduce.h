// Reductions, named and typed like LibTorch's: sum, mean, prod, max/min (full, or with a dim ->
// values and indices), argmax/argmin, var/std (correction), norm (p = 0, 1, 2, inf, -inf, any p),
// logsumexp, all/any, cumsum. `dims` lists the dims to reduce (negative dims wrap; an empty list
// means every dim, as in torch.sum(x, dim=[])). Sums of integers and bool give int64; mean, var,
// std and norm need floating inputs; empty reductions follow PyTorch (sum 0, prod 1, mean nan,
// max/argmax error). Kernels: engine/ops/cpu/reduce_kernel.h.
#pragma once
#include <optional>
#include <tuple>
#include <vector>

#include "engine/ops/common.h"

namespace tb::ops {

using DimList = std::vector<int64_t>;

Tensor sum(const Tensor& x, std::optional<DType> dtype = {});
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor& sum_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim = false,
                std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor& mean_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim = false,
                 std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, std::optional<DType> dtype = {});

// Full reductions: the value; errors on an empty tensor.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Along one dim: (values, indices); the first index of the extreme value, NaN wins.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
// No dim: the index into the flattened tensor.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);

Tensor var(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
// torch.norm / linalg.vector_norm: (sum |x|^p)^(1/p); p = inf/-inf: max/min |x|; p = 0: count of non-zeros.
Tensor norm(const Tensor& x, double p = 2, const DimList& dims = {}, bool keepdim = false);
// log(sum(exp(x))) over dims (which must not be empty), stable for large |x|; integers -> float32.
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim = false);

Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);

// Integer and bool inputs give int64 unless dtype says otherwise (the input is cast to dtype first).
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor& cumsum_(Tensor& x, int64_t dim);

// ---- backward kernels (used by engine/autograd/functions/reduce.cpp) ----
// The gradient of prod along `dim`: grad times the product of the other elements of each slice,
// as PyTorch's prod_backward: grad * (result / x) when x has no zero anywhere, else exclusive
// prefix * suffix products (exact with zeros).
//   grad, result: x's shape with size 1 along dim (keepdim layout), any strides; x: any strides.
// Returns x's shape, floating dtype of x.
Tensor prod_backward(const Tensor& grad, const Tensor& x, const Tensor& result, int64_t dim);
// The gradient of cumsum: the reversed cumulative sum of grad along dim (PyTorch's
// grad.flip(dim).cumsum(dim).flip(dim), accumulated in double for float32 like cumsum).
Tensor cumsum_backward(const Tensor& grad, int64_t dim);

}  // namespace tb::ops
