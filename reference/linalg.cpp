// LibTorch one-liners for reference/linalg.h.
#include "reference/linalg.h"

#include "reference/torch_access.h"

namespace tb::ref {

Tensor mm(const Tensor& a, const Tensor& b) {
  return guarded("mm", [&] { return wrap(torch::mm(T(a), T(b))); });
}
Tensor mm_out(Tensor& out, const Tensor& a, const Tensor& b) {
  return guarded("mm_out", [&] {
    torch::Tensor o = T(out);
    torch::mm_out(o, T(a), T(b));
    return wrap(o);
  });
}
Tensor bmm(const Tensor& a, const Tensor& b) {
  return guarded("bmm", [&] { return wrap(torch::bmm(T(a), T(b))); });
}
Tensor matmul(const Tensor& a, const Tensor& b) {
  return guarded("matmul", [&] { return wrap(torch::matmul(T(a), T(b))); });
}
Tensor dot(const Tensor& a, const Tensor& b) {
  return guarded("dot", [&] { return wrap(torch::dot(T(a), T(b))); });
}
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta, double alpha) {
  return guarded("addmm", [&] { return wrap(torch::addmm(T(self), T(a), T(b), beta, alpha)); });
}
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return guarded("linear", [&] {
    return wrap(torch::nn::functional::linear(T(x), T(weight), bias.defined() ? T(bias) : torch::Tensor()));
  });
}
Tensor outer(const Tensor& a, const Tensor& b) {
  return guarded("outer", [&] { return wrap(torch::outer(T(a), T(b))); });
}
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  return guarded("einsum", [&] {
    std::vector<torch::Tensor> ts;
    for (const Tensor& t : operands) ts.push_back(T(t));
    return wrap(torch::einsum(equation, ts));
  });
}

}  // namespace tb::ref
