// LibTorch references of the reduce family (engine/ops/reduce.h), one per engine op variant.
#pragma once
#include <optional>
#include <tuple>
#include <vector>

#include "reference/tensor.h"

namespace tb::ref {

using DimList = std::vector<int64_t>;

Tensor sum(const Tensor& x, std::optional<DType> dtype = {});
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor sum_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor mean(const Tensor& x, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const DimList& dims, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor prod(const Tensor& x, std::optional<DType> dtype = {});
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false, std::optional<DType> dtype = {});
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const DimList& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor var(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const DimList& dims = {}, double correction = 1, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, const DimList& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor cumsum_(Tensor& x, int64_t dim);

}  // namespace tb::ref
