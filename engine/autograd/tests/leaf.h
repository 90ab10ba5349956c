// A float64 leaf that requires grad, from values written out in the test: the autograd, nn and
// optim tests start their hand-worked examples from these.
#pragma once
#include <initializer_list>
#include <vector>

#include "engine/tensor/factories.h"

namespace tb::testing {

inline Tensor leaf(std::initializer_list<double> v) {
  Tensor t = from_vector(std::vector<double>(v), DType::Float64);
  t.requires_grad_();
  return t;
}

}  // namespace tb::testing
