// Autocast rows: the same forward under the engine's AutocastGuard and under LibTorch's CPU
// autocast (bfloat16); the value check compares those outputs (LibTorch's dtypes: bf16 products,
// float32 losses, untouched softmax and float64), and the gradient check runs the same backward
// outside autocast, so the gradients of float32 inputs arrive in float32 through the casts.
// Each family keeps its autocast rows beside its other rows (named "autocast/<op>/<dtype>").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd/autocast.h"
#include "reference/autograd.h"
#include "suites/ops/op_case.h"

namespace tb::suites {

// bf16 products accumulate in float32 on both sides and round once: at most about one bf16 ulp
// (2^-8 relative) apart, plus an absolute floor for values and gradients that cancel to near zero.
inline constexpr Tolerance kAutocastBf16{1.6e-2, 1e-2};

inline OpCase autocast_case(std::string name, std::vector<Input> inputs,
                            std::function<tb::Tensor(const std::vector<tb::Tensor>&)> e,
                            std::function<ref::Tensor(const std::vector<ref::Tensor>&)> r) {
  OpCase c = make_grad_case(
      "autocast/" + std::move(name), std::move(inputs),
      [e](const std::vector<tb::Tensor>& x) {
        tb::autograd::AutocastGuard guard;
        return one(e(x));
      },
      [r](const std::vector<ref::Tensor>& x) {
        std::vector<ref::Tensor> out;
        ref::with_autocast([&] { out = one(r(x)); });
        return out;
      });
  c.tol = kAutocastBf16;
  c.grad_tol = kAutocastBf16;
  c.gradcheck = false;  // bf16 arithmetic: finite differences cannot resolve it
  return c;
}

}  // namespace tb::suites
