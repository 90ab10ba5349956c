// LibTorch one-liners behind reference/reduce.h.
#include "reference/reduce.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
std::optional<torch::ScalarType> st(std::optional<DType> d) {
  if (!d) return std::nullopt;
  return to_torch(*d);
}
torch::IntArrayRef ia(const DimList& d) { return torch::IntArrayRef(d); }
// var/std: an empty dim list means every dim. Passed as None, not [], because LibTorch's
// var_backward takes an explicit [] as a one-element reduction (a gradient of -inf).
at::OptionalIntArrayRef all_if_empty(const DimList& d) {
  return d.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(ia(d));
}
std::tuple<Tensor, Tensor> wrap2(const std::tuple<torch::Tensor, torch::Tensor>& t) {
  return {wrap(std::get<0>(t)), wrap(std::get<1>(t))};
}
}  // namespace

Tensor sum(const Tensor& x, std::optional<DType> dtype) {
  return guarded("sum", [&] { return wrap(torch::sum(T(x), st(dtype))); });
}
Tensor sum(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  return guarded("sum", [&] { return wrap(torch::sum(T(x), at::OptionalIntArrayRef(ia(dims)), keepdim, st(dtype))); });
}
Tensor sum_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim) {
  return guarded("sum_out", [&] {
    torch::Tensor o = T(out);
    torch::sum_out(o, T(x), at::OptionalIntArrayRef(ia(dims)), keepdim);
    return wrap(o);
  });
}
Tensor mean(const Tensor& x, std::optional<DType> dtype) {
  return guarded("mean", [&] { return wrap(torch::mean(T(x), st(dtype))); });
}
Tensor mean(const Tensor& x, const DimList& dims, bool keepdim, std::optional<DType> dtype) {
  return guarded("mean",
                 [&] { return wrap(torch::mean(T(x), at::OptionalIntArrayRef(ia(dims)), keepdim, st(dtype))); });
}
Tensor mean_out(Tensor& out, const Tensor& x, const DimList& dims, bool keepdim) {
  return guarded("mean_out", [&] {
    torch::Tensor o = T(out);
    torch::mean_out(o, T(x), at::OptionalIntArrayRef(ia(dims)), keepdim);
    return wrap(o);
  });
}
Tensor prod(const Tensor& x, std::optional<DType> dtype) {
  return guarded("prod", [&] { return wrap(torch::prod(T(x), st(dtype))); });
}
Tensor prod(const Tensor& x, int64_t dim, bool keepdim, std::optional<DType> dtype) {
  return guarded("prod", [&] { return wrap(torch::prod(T(x), dim, keepdim, st(dtype))); });
}
Tensor max(const Tensor& x) {
  return guarded("max", [&] { return wrap(torch::max(T(x))); });
}
Tensor min(const Tensor& x) {
  return guarded("min", [&] { return wrap(torch::min(T(x))); });
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return guarded("max", [&] { return wrap2(torch::max(T(x), dim, keepdim)); });
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return guarded("min", [&] { return wrap2(torch::min(T(x), dim, keepdim)); });
}
Tensor amax(const Tensor& x, const DimList& dims, bool keepdim) {
  return guarded("amax", [&] { return wrap(torch::amax(T(x), ia(dims), keepdim)); });
}
Tensor amin(const Tensor& x, const DimList& dims, bool keepdim) {
  return guarded("amin", [&] { return wrap(torch::amin(T(x), ia(dims), keepdim)); });
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return guarded("argmax", [&] { return wrap(torch::argmax(T(x), dim, keepdim)); });
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return guarded("argmin", [&] { return wrap(torch::argmin(T(x), dim, keepdim)); });
}
Tensor var(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  return guarded("var", [&] { return wrap(torch::var(T(x), all_if_empty(dims), c10::Scalar(correction), keepdim)); });
}
Tensor std(const Tensor& x, const DimList& dims, double correction, bool keepdim) {
  return guarded("std", [&] { return wrap(torch::std(T(x), all_if_empty(dims), c10::Scalar(correction), keepdim)); });
}
Tensor norm(const Tensor& x, double p, const DimList& dims, bool keepdim) {
  return guarded("norm",
                 [&] { return wrap(torch::linalg_vector_norm(T(x), p, at::OptionalIntArrayRef(ia(dims)), keepdim)); });
}
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim) {
  return guarded("logsumexp", [&] { return wrap(torch::logsumexp(T(x), ia(dims), keepdim)); });
}
Tensor all(const Tensor& x) {
  return guarded("all", [&] { return wrap(torch::all(T(x))); });
}
Tensor all(const Tensor& x, int64_t dim, bool keepdim) {
  return guarded("all", [&] { return wrap(torch::all(T(x), dim, keepdim)); });
}
Tensor any(const Tensor& x) {
  return guarded("any", [&] { return wrap(torch::any(T(x))); });
}
Tensor any(const Tensor& x, int64_t dim, bool keepdim) {
  return guarded("any", [&] { return wrap(torch::any(T(x), dim, keepdim)); });
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return guarded("cumsum", [&] { return wrap(torch::cumsum(T(x), dim, st(dtype))); });
}
Tensor cumsum_(Tensor& x, int64_t dim) {
  return guarded("cumsum_", [&] { return wrap(T(x).cumsum_(dim)); });
}

}  // namespace tb::ref
