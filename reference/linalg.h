// LibTorch counterparts of engine/ops/linalg.h, one per engine op (no LibTorch in this header).
#pragma once
#include <string>
#include <vector>

#include "reference/tensor.h"

namespace tb::ref {

Tensor mm(const Tensor& a, const Tensor& b);
Tensor mm_out(Tensor& out, const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, double beta = 1, double alpha = 1);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
Tensor outer(const Tensor& a, const Tensor& b);
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace tb::ref
