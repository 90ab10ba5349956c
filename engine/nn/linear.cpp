// torch.nn.Linear over tb::linear. See linear.h.
#include "engine/nn/linear.h"

#include <cmath>

#include "engine/autograd/functions.h"
#include "engine/nn/init.h"

namespace tb::nn {

Linear::Linear(int64_t in, int64_t out, bool has_bias, DType dtype)
    : Module("Linear"), in_features(in), out_features(out) {
  TB_CHECK(in >= 0 && out >= 0, "Linear", "negative features: in ", in, ", out ", out);
  weight = register_parameter("weight", empty({out, in}, dtype));
  bias = register_parameter("bias", has_bias ? empty({out}, dtype) : Tensor());
  reset_parameters();
}

void Linear::reset_parameters(core::Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), "fan_in", "leaky_relu", gen);
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1 / std::sqrt(double(in_features)) : 0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& x) { return tb::linear(x, weight, bias); }

}  // namespace tb::nn
