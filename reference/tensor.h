// The LibTorch side seen from the suites, without including LibTorch: ref::Tensor is an opaque
// handle to a torch::Tensor. to_ref/from_ref copy the bytes and keep sizes, strides and storage
// offset, so both sides compute on the same values in the same layout. Any LibTorch error
// surfaces as ref::RefError. Only files in reference/ include <torch/...>.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tensor/tensor.h"

namespace tb::ref {

class RefError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tensor {
 public:
  struct Impl;  // holds the torch::Tensor (reference/torch_access.h)
  Tensor() = default;
  explicit Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  bool defined() const;
  Shape sizes() const;
  Shape strides() const;
  int64_t storage_offset() const;
  DType dtype() const;
  bool shares_storage(const Tensor& other) const;
  Impl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<Impl> impl_;
};

Tensor to_ref(const tb::Tensor& t);    // same bytes, sizes, strides, offset
tb::Tensor from_ref(const Tensor& t);  // same bytes, sizes, strides, offset

void set_threads(int n);  // torch::set_num_threads
int threads();
// libtorch_version, reference_blas, reference_parallel: for the JSON run header.
nlohmann::json info();

}  // namespace tb::ref
