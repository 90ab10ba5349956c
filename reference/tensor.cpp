#include <cstring>

#include "reference/torch_access.h"

namespace tb::ref {

torch::ScalarType to_torch(DType t) {
  switch (t) {
    case DType::Bool: return torch::kBool;
    case DType::Int32: return torch::kInt32;
    case DType::Int64: return torch::kInt64;
    case DType::BFloat16: return torch::kBFloat16;
    case DType::Float16: return torch::kFloat16;
    case DType::Float32: return torch::kFloat32;
    case DType::Float64: return torch::kFloat64;
  }
  throw RefError("to_torch: invalid dtype");
}

DType from_torch(torch::ScalarType t) {
  switch (t) {
    case torch::kBool: return DType::Bool;
    case torch::kInt32: return DType::Int32;
    case torch::kInt64: return DType::Int64;
    case torch::kBFloat16: return DType::BFloat16;
    case torch::kFloat16: return DType::Float16;
    case torch::kFloat32: return DType::Float32;
    case torch::kFloat64: return DType::Float64;
    default: throw RefError(std::string("from_torch: no engine dtype for ") + c10::toString(t));
  }
}

bool Tensor::defined() const { return impl_ && impl_->t.defined(); }
Shape Tensor::sizes() const { return T(*this).sizes().vec(); }
Shape Tensor::strides() const { return T(*this).strides().vec(); }
int64_t Tensor::storage_offset() const { return T(*this).storage_offset(); }
DType Tensor::dtype() const { return from_torch(T(*this).scalar_type()); }
bool Tensor::shares_storage(const Tensor& o) const { return T(*this).storage().is_alias_of(T(o).storage()); }

Tensor to_ref(const tb::Tensor& t) {
  const int64_t n = reach(t.sizes(), t.strides(), t.storage_offset());
  const size_t item = t.itemsize();
  torch::Tensor flat = torch::empty({n}, torch::TensorOptions().dtype(to_torch(t.dtype())));
  if (n > 0) std::memcpy(flat.data_ptr(), t.storage()->data(), size_t(n) * item);
  return wrap(flat.as_strided(t.sizes(), t.strides(), t.storage_offset()));
}

tb::Tensor from_ref(const Tensor& r) {
  const torch::Tensor& t = T(r);
  const int64_t n = reach(t.sizes().vec(), t.strides().vec(), t.storage_offset());
  // Negative or odd layouts (flip) have no engine form: take a contiguous copy instead.
  for (int64_t s : t.strides())
    if (s < 0) return from_ref(wrap(t.contiguous()));
  const DType dt = from_torch(t.scalar_type());
  auto storage = std::make_shared<Storage>(size_t(n) * core::itemsize(dt), memory::cpu_allocator());
  if (n > 0) std::memcpy(storage->data(), static_cast<const char*>(t.storage().data()), size_t(n) * core::itemsize(dt));
  return make_tensor(storage, t.sizes().vec(), t.strides().vec(), t.storage_offset(), dt, "from_ref");
}

void set_threads(int n) { torch::set_num_threads(n); }
int threads() { return torch::get_num_threads(); }

nlohmann::json info() {
  std::string config = torch::show_config();
  std::string blas = "unknown";
  if (auto p = config.find("BLAS_INFO="); p != std::string::npos)
    blas = config.substr(p + 10, config.find(',', p) - p - 10);
  return {{"libtorch_version", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                                   std::to_string(TORCH_VERSION_PATCH)},
          {"reference_blas", blas},
          {"reference_parallel", at::get_parallel_info().substr(0, 400)},
          {"reference_threads", torch::get_num_threads()}};
}

}  // namespace tb::ref
