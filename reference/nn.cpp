// LibTorch one-liners for reference/nn.h.
#include "reference/nn.h"

#include "reference/torch_access.h"

namespace tb::ref {

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
  return guarded("conv2d", [&] {
    return wrap(
        torch::conv2d(T(x), T(weight), bias.defined() ? T(bias) : torch::Tensor(), stride, padding, dilation, groups));
  });
}
std::pair<Tensor, Tensor> convolution_backward(const Tensor& grad_output, const Tensor& x, const Tensor& weight,
                                               const Shape& stride, const Shape& padding, const Shape& dilation,
                                               int64_t groups) {
  return guarded("convolution_backward", [&] {
    auto [gx, gw, gb] = at::convolution_backward(T(grad_output), T(x), T(weight), std::nullopt, stride, padding,
                                                 dilation, false, {0, 0}, groups, {true, true, false});
    return std::pair<Tensor, Tensor>(wrap(gx), wrap(gw));
  });
}
Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return guarded("max_pool2d",
                 [&] { return wrap(torch::max_pool2d(T(x), kernel_size, stride, padding, dilation, ceil_mode)); });
}
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride,
                                                  const Shape& padding, const Shape& dilation, bool ceil_mode) {
  return guarded("max_pool2d_with_indices", [&] {
    auto [out, idx] = torch::max_pool2d_with_indices(T(x), kernel_size, stride, padding, dilation, ceil_mode);
    return std::make_pair(wrap(out), wrap(idx));
  });
}
Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return guarded("avg_pool2d", [&] {
    return wrap(torch::avg_pool2d(T(x), kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override));
  });
}
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  return guarded("embedding", [&] { return wrap(torch::embedding(T(weight), T(indices), padding_idx)); });
}
Tensor dropout(const Tensor& x, double p, bool training, uint64_t seed) {
  return guarded("dropout", [&] {
    torch::manual_seed(seed);
    return wrap(torch::dropout(T(x), p, training));
  });
}
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  return guarded("one_hot", [&] { return wrap(torch::one_hot(T(indices), num_classes)); });
}
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode, double value) {
  return guarded("pad", [&] {
    namespace F = torch::nn::functional;
    auto opts = F::PadFuncOptions(pad);
    if (mode == "reflect") opts.mode(torch::kReflect);
    else if (mode == "replicate") opts.mode(torch::kReplicate);
    else opts.mode(torch::kConstant).value(value);
    return wrap(F::pad(T(x), opts));
  });
}

}  // namespace tb::ref
