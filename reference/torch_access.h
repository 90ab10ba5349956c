// Inside reference/ only: the torch::Tensor behind a ref::Tensor, and `guarded`, which turns
// LibTorch's exceptions into ref::RefError so callers need no LibTorch headers.
#pragma once
#include <torch/torch.h>

#include "reference/tensor.h"

namespace tb::ref {

struct Tensor::Impl {
  torch::Tensor t;
};

inline const torch::Tensor& T(const Tensor& t) { return t.impl()->t; }
inline Tensor wrap(torch::Tensor t) { return Tensor(std::make_shared<Tensor::Impl>(Tensor::Impl{std::move(t)})); }

template <typename F>
auto guarded(const char* op, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error& e) {
    throw RefError(std::string(op) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw RefError(std::string(op) + ": " + e.what());
  }
}

torch::ScalarType to_torch(DType t);
DType from_torch(torch::ScalarType t);

}  // namespace tb::ref
