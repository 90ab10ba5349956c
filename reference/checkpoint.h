// The LibTorch side of the checkpoint benchmark: torch::save / torch::load of a list of tensors
// (LibTorch's own archive format), behind an opaque handle so suites need no LibTorch headers.
// Not here: any reading of our safetensors files (suites/checkpoint/read_safetensors.py does that).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::ref {

// A std::vector<torch::Tensor> held by LibTorch.
class TensorList {
 public:
  struct Impl;
  TensorList() = default;
  explicit TensorList(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  size_t size() const;
  Impl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<Impl> impl_;
};

TensorList to_tensor_list(const std::vector<tb::Tensor>& tensors);  // copies the bytes
std::vector<tb::Tensor> from_tensor_list(const TensorList& list);   // copies the bytes
void torch_save(const TensorList& list, const std::string& path);   // torch::save
TensorList torch_load(const std::string& path);                     // torch::load

}  // namespace tb::ref
