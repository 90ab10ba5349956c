// Parameter-free layers: ReLU, GELU (approximate "none" | "tanh"), SiLU, Tanh, and Dropout
// (identity in eval mode or with p = 0; inverted scaling by 1 / (1 - p) in training).
#pragma once
#include <string>

#include "engine/nn/module.h"

namespace tb::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string approximate;
};

class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

class Dropout : public Module {
 public:
  // gen: the generator masks are drawn from (the default generator when null; not owned).
  explicit Dropout(double p = 0.5, core::Generator* gen = nullptr);
  Tensor forward(const Tensor& x) override;
  double p;
  core::Generator* gen;
};

}  // namespace tb::nn
