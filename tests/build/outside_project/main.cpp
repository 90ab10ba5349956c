// Built against the installed engine only (headers under include/engine/, trainbench::engine):
// two tensors, a differentiable op, backward, and the values checked by hand.
#include <cstdio>

#include "engine/autograd/functions.h"
#include "engine/tensor/factories.h"

int main() {
  tb::Tensor a = tb::from_vector({1, 2, 3});
  a.requires_grad_();
  const tb::Tensor b = tb::from_vector({4, 5, 6});
  const tb::Tensor y = tb::sum(tb::mul(a, b));  // 1*4 + 2*5 + 3*6
  y.backward();
  const float value = y.item<float>();
  const float* grad = a.grad().data_ptr<float>();  // d(sum(a*b))/da = b
  std::printf("outside: y = %g, dy/da = %g %g %g\n", value, grad[0], grad[1], grad[2]);
  const bool ok = value == 32.0f && grad[0] == 4.0f && grad[1] == 5.0f && grad[2] == 6.0f;
  if (!ok) std::printf("outside: expected y = 32, dy/da = 4 5 6\n");
  return ok ? 0 : 1;
}
