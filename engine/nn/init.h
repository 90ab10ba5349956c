// Parameter initialisers, as torch.nn.init: fills in place under no-grad, with PyTorch's gains
// and fan computation. Random values come from the engine's counter-based generator (the default
// one unless `gen` is given), so the values are not PyTorch's; the distributions are.
#pragma once
#include <string>

#include "engine/core/rng.h"
#include "engine/tensor/tensor.h"

namespace tb::nn::init {

// Recommended gain for a nonlinearity (linear, conv*, sigmoid: 1; tanh: 5/3; relu: sqrt(2);
// leaky_relu: sqrt(2 / (1 + a^2)) with a = param (0.01 if negative); selu: 3/4).
double calculate_gain(const std::string& nonlinearity, double param = -1);
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field; needs dim >= 2.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0, double b = 1, core::Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, core::Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// U(-bound, bound), bound = gain * sqrt(3 / fan), fan by mode ("fan_in" | "fan_out").
Tensor& kaiming_uniform_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", core::Generator* gen = nullptr);
Tensor& kaiming_normal_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", core::Generator* gen = nullptr);
// U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, core::Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1, core::Generator* gen = nullptr);

}  // namespace tb::nn::init
