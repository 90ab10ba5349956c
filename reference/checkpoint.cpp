// torch::save / torch::load of a tensor list, for the checkpoint benchmark (reference/checkpoint.h).
#include "reference/checkpoint.h"

#include "reference/torch_access.h"

namespace tb::ref {

struct TensorList::Impl {
  std::vector<torch::Tensor> v;
};

size_t TensorList::size() const { return impl_ ? impl_->v.size() : 0; }

TensorList to_tensor_list(const std::vector<tb::Tensor>& tensors) {
  auto impl = std::make_shared<TensorList::Impl>();
  for (const tb::Tensor& t : tensors) impl->v.push_back(T(to_ref(t)));
  return TensorList(impl);
}

std::vector<tb::Tensor> from_tensor_list(const TensorList& list) {
  std::vector<tb::Tensor> out;
  for (const torch::Tensor& t : list.impl()->v) out.push_back(from_ref(wrap(t)));
  return out;
}

void torch_save(const TensorList& list, const std::string& path) {
  guarded("torch::save", [&] { torch::save(list.impl()->v, path); });
}

TensorList torch_load(const std::string& path) {
  auto impl = std::make_shared<TensorList::Impl>();
  guarded("torch::load", [&] { torch::load(impl->v, path); });
  return TensorList(impl);
}

}  // namespace tb::ref
