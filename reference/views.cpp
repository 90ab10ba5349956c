// One line of LibTorch per engine view/copy/creation op (see views.h).
#include "reference/views.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
torch::TensorOptions opts(DType dt) { return torch::TensorOptions().dtype(to_torch(dt)); }
std::optional<c10::SymInt> sym(std::optional<int64_t> v) {
  return v ? std::optional<c10::SymInt>(c10::SymInt(*v)) : std::nullopt;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& s) {
  return guarded("view", [&] { return wrap(T(x).view(s)); });
}
Tensor reshape(const Tensor& x, const Shape& s) {
  return guarded("reshape", [&] { return wrap(T(x).reshape(s)); });
}
Tensor transpose(const Tensor& x, int64_t a, int64_t b) {
  return guarded("transpose", [&] { return wrap(T(x).transpose(a, b)); });
}
Tensor t(const Tensor& x) {
  return guarded("t", [&] { return wrap(T(x).t()); });
}
Tensor permute(const Tensor& x, const Shape& d) {
  return guarded("permute", [&] { return wrap(T(x).permute(d)); });
}
Tensor expand(const Tensor& x, const Shape& s) {
  return guarded("expand", [&] { return wrap(T(x).expand(s)); });
}
Tensor narrow(const Tensor& x, int64_t d, int64_t s, int64_t l) {
  return guarded("narrow", [&] { return wrap(T(x).narrow(d, s, l)); });
}
Tensor select(const Tensor& x, int64_t d, int64_t i) {
  return guarded("select", [&] { return wrap(T(x).select(d, i)); });
}
Tensor slice(const Tensor& x, int64_t d, std::optional<int64_t> s, std::optional<int64_t> e, int64_t step) {
  return guarded("slice", [&] { return wrap(T(x).slice_symint(d, sym(s), sym(e), step)); });
}
Tensor squeeze(const Tensor& x) {
  return guarded("squeeze", [&] { return wrap(T(x).squeeze()); });
}
Tensor squeeze(const Tensor& x, int64_t d) {
  return guarded("squeeze", [&] { return wrap(T(x).squeeze(d)); });
}
Tensor unsqueeze(const Tensor& x, int64_t d) {
  return guarded("unsqueeze", [&] { return wrap(T(x).unsqueeze(d)); });
}
Tensor flatten(const Tensor& x, int64_t s, int64_t e) {
  return guarded("flatten", [&] { return wrap(T(x).flatten(s, e)); });
}
Tensor unflatten(const Tensor& x, int64_t d, const Shape& s) {
  return guarded("unflatten", [&] { return wrap(T(x).unflatten(d, s)); });
}
Tensor as_strided(const Tensor& x, const Shape& s, const Shape& st, std::optional<int64_t> off) {
  return guarded("as_strided", [&] { return wrap(T(x).as_strided(s, st, off)); });
}
Tensor contiguous(const Tensor& x) {
  return guarded("contiguous", [&] { return wrap(T(x).contiguous()); });
}
Tensor clone(const Tensor& x) {
  return guarded("clone", [&] { return wrap(T(x).clone()); });
}
Tensor to(const Tensor& x, DType dt) {
  return guarded("to", [&] { return wrap(T(x).to(to_torch(dt))); });
}
Tensor copy_(Tensor& dst, const Tensor& src) {
  return guarded("copy_", [&] {
    T(dst).copy_(T(src));
    return dst;
  });
}

Tensor empty(const Shape& s, DType dt) {
  return guarded("empty", [&] { return wrap(torch::empty(s, opts(dt))); });
}
Tensor zeros(const Shape& s, DType dt) {
  return guarded("zeros", [&] { return wrap(torch::zeros(s, opts(dt))); });
}
Tensor ones(const Shape& s, DType dt) {
  return guarded("ones", [&] { return wrap(torch::ones(s, opts(dt))); });
}
Tensor full(const Shape& s, double v, DType dt) {
  return guarded("full", [&] { return wrap(torch::full(s, v, opts(dt))); });
}
Tensor eye(int64_t n, int64_t m, DType dt) {
  return guarded("eye", [&] { return wrap(torch::eye(n, m, opts(dt))); });
}
Tensor arange(double s, double e, double step, DType dt) {
  return guarded("arange", [&] { return wrap(torch::arange(s, e, step, opts(dt))); });
}
Tensor linspace(double s, double e, int64_t n, DType dt) {
  return guarded("linspace", [&] { return wrap(torch::linspace(s, e, n, opts(dt))); });
}
Tensor rand(const Shape& s, DType dt) {
  return guarded("rand", [&] { return wrap(torch::rand(s, opts(dt))); });
}
Tensor randn(const Shape& s, DType dt) {
  return guarded("randn", [&] { return wrap(torch::randn(s, opts(dt))); });
}
Tensor randint(int64_t lo, int64_t hi, const Shape& s, DType dt) {
  return guarded("randint", [&] { return wrap(torch::randint(lo, hi, s, opts(dt))); });
}
Tensor zeros_like(const Tensor& x) {
  return guarded("zeros_like", [&] { return wrap(torch::zeros_like(T(x))); });
}
Tensor ones_like(const Tensor& x) {
  return guarded("ones_like", [&] { return wrap(torch::ones_like(T(x))); });
}
Tensor full_like(const Tensor& x, double v) {
  return guarded("full_like", [&] { return wrap(torch::full_like(T(x), v)); });
}

}  // namespace tb::ref
