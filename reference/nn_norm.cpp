// LibTorch one-liners behind reference/nn_norm.h.
#include "reference/nn_norm.h"

#include "reference/torch_access.h"

namespace tb::ref {

namespace {
std::optional<torch::ScalarType> st(std::optional<DType> d) {
  if (!d) return std::nullopt;
  return to_torch(*d);
}
torch::Tensor opt(const Tensor& t) { return t.defined() ? T(t) : torch::Tensor(); }
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return guarded("softmax", [&] { return wrap(torch::softmax(T(x), dim, st(dtype))); });
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return guarded("log_softmax", [&] { return wrap(torch::log_softmax(T(x), dim, st(dtype))); });
}
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return guarded("layer_norm", [&] {
    return wrap(torch::layer_norm(T(x), torch::IntArrayRef(normalized_shape), opt(weight), opt(bias), eps));
  });
}
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return guarded("batch_norm", [&] {
    namespace F = torch::nn::functional;
    return wrap(F::batch_norm(
        T(x), opt(running_mean), opt(running_var),
        F::BatchNormFuncOptions().weight(opt(weight)).bias(opt(bias)).training(training).momentum(momentum).eps(eps)));
  });
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  return guarded("group_norm", [&] { return wrap(torch::group_norm(T(x), num_groups, opt(weight), opt(bias), eps)); });
}

}  // namespace tb::ref
