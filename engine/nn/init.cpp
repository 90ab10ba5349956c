// torch.nn.init's initialisers over the engine's generator. See init.h.
#include "engine/nn/init.h"

#include <cmath>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor/factories.h"

namespace tb::nn::init {

namespace {

core::Generator* pick(core::Generator* gen) { return gen ? gen : &core::default_generator(); }

// Draws in float64 (or the tensor's dtype when that is float64) and copies in, as a no-grad write.
DType draw_dtype(const Tensor& t) {
  TB_CHECK(core::is_floating(t.dtype()), "nn.init", "initialisers need a floating tensor, got ", core::name(t.dtype()));
  return t.dtype() == DType::Float32 ? DType::Float32 : DType::Float64;
}

int64_t fan(const Tensor& t, const std::string& mode) {
  auto [in, out] = fan_in_and_fan_out(t);
  TB_CHECK(mode == "fan_in" || mode == "fan_out", "kaiming", "mode ", mode,
           " not supported, please use fan_in or fan_out");
  return mode == "fan_in" ? in : out;
}

}  // namespace

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "conv_transpose1d" ||
      nl == "conv_transpose2d" || nl == "conv_transpose3d" || nl == "sigmoid")
    return 1;
  if (nl == "tanh") return 5.0 / 3;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") {
    const double slope = param < 0 ? 0.01 : param;
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nl == "selu") return 3.0 / 4;
  throw core::Error("calculate_gain", "Unsupported nonlinearity " + nl);
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  TB_CHECK(t.dim() >= 2, "nn.init", "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b, core::Generator* gen) {
  autograd::NoGradGuard no_grad;
  Tensor r = rand(t.sizes(), draw_dtype(t), pick(gen));
  t.copy_(ops::add(ops::mul(r, b - a), a));
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, core::Generator* gen) {
  autograd::NoGradGuard no_grad;
  Tensor r = randn(t.sizes(), draw_dtype(t), pick(gen));
  t.copy_(ops::add(ops::mul(r, std), mean));
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  autograd::NoGradGuard no_grad;
  fill_(t, value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1); }

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                         core::Generator* gen) {
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(double(fan(t, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                        core::Generator* gen) {
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(double(fan(t, mode)));
  return normal_(t, 0, std, gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, core::Generator* gen) {
  auto [in, out] = fan_in_and_fan_out(t);
  const double a = gain * std::sqrt(6.0 / double(in + out));
  return uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, core::Generator* gen) {
  auto [in, out] = fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / double(in + out)), gen);
}

}  // namespace tb::nn::init
