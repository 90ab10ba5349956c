// torch.nn.Conv2d over tb::conv2d. See conv.h.
#include "engine/nn/conv.h"

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/nn/init.h"

namespace tb::nn {

namespace {
Shape pair_of(const Shape& s, const char* what) {
  TB_CHECK(s.size() == 1 || s.size() == 2, "Conv2d", what, " must have 1 or 2 elements, got ", shape_str(s));
  return s.size() == 1 ? Shape{s[0], s[0]} : s;
}
}  // namespace

Conv2d::Conv2d(const Conv2dOptions& o) : Module("Conv2d"), options(o) {
  options.kernel_size = pair_of(o.kernel_size, "kernel_size");
  options.stride = pair_of(o.stride, "stride");
  options.padding = pair_of(o.padding, "padding");
  options.dilation = pair_of(o.dilation, "dilation");
  TB_CHECK(o.groups > 0 && o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0, "Conv2d", "in_channels (",
           o.in_channels, ") and out_channels (", o.out_channels, ") must be divisible by groups (", o.groups, ")");
  weight = register_parameter("weight", empty({o.out_channels, o.in_channels / o.groups, options.kernel_size[0],
                                               options.kernel_size[1]},
                                              o.dtype));
  bias = register_parameter("bias", o.bias ? empty({o.out_channels}, o.dtype) : Tensor());
  reset_parameters();
}

Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias, DType dtype)
    : Conv2d(Conv2dOptions{in, out, {kernel, kernel}, {stride, stride}, {padding, padding}, {1, 1}, 1, bias, dtype}) {}

void Conv2d::reset_parameters(core::Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), "fan_in", "leaky_relu", gen);
  if (bias.defined()) {
    const int64_t fan_in = init::fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1 / std::sqrt(double(fan_in)) : 0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return tb::conv2d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

}  // namespace tb::nn
