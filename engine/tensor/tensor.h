// TensorImpl (storage + sizes + strides + offset + dtype + version counter + autograd slot) and
// Tensor, the cheap shared handle users hold. View methods only change metadata and share the
// storage; they give the same sizes, strides and storage offsets as PyTorch.
// Kernels live in engine/ops; this file knows no arithmetic beyond copy/cast (copy.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/shape.h"
#include "engine/tensor/storage.h"

namespace tb {

namespace autograd {
class Node;
}

using core::BFloat16;
using core::Device;
using core::DType;
using core::Error;
using core::Half;
using core::Shape;

// Shared by a tensor and all its views: bumped by every in-place write, so autograd can tell a
// saved tensor was modified after it was saved.
struct VersionCounter {
  uint64_t version = 0;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<VersionCounter> version = std::make_shared<VersionCounter>();
  std::shared_ptr<void> autograd_meta;  // owned by engine/autograd; opaque here
  bool inference = false;               // created under InferenceMode (see Note [Autograd hooks])
};

class Tensor;

// Note [Autograd hooks]
// tensor/ sits below autograd/, yet a view or a copy of a tensor that requires grad must join
// the autograd graph, and an in-place write must be seen by it. autograd/ installs these hooks
// when it is linked in (engine/autograd/variable.cpp); while they are null, tensors carry no
// gradient history. The inference-mode bit lives here because every tensor created while it is
// set is an inference tensor, and creation happens in tensor/.
struct AutogradHooks {
  void (*check_inplace)(const Tensor& dst) = nullptr;           // before an in-place write
  void (*on_view)(const Tensor& base, Tensor& view) = nullptr;  // after make_view / as_strided
  void (*on_copy)(Tensor& dst, const Tensor& src) = nullptr;    // after dst.copy_(src)
  void (*on_fill)(Tensor& dst) = nullptr;                       // after fill_ / zero_
};
AutogradHooks& autograd_hooks();
bool& inference_mode_flag();  // thread-local: InferenceMode is active on this thread

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  int64_t dim() const { return int64_t(impl_->sizes.size()); }
  const Shape& sizes() const { return impl_->sizes; }
  const Shape& strides() const { return impl_->strides; }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return impl_->offset; }
  int64_t numel() const;
  DType dtype() const { return impl_->dtype; }
  size_t itemsize() const { return core::itemsize(impl_->dtype); }
  Device device() const { return impl_->storage->device(); }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  bool is_contiguous() const;
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  bool shares_storage(const Tensor& o) const { return impl_->storage == o.impl_->storage; }
  uint64_t version() const { return impl_->version->version; }
  // Every in-place write calls this. An inference tensor may not be written in place outside
  // InferenceMode, as in PyTorch.
  void bump_version() const {
    TB_CHECK(!impl_->inference || inference_mode_flag(), "inplace",
             "Inplace update to inference tensor outside InferenceMode is not allowed. "
             "Make a clone to get a normal tensor before doing inplace update.");
    ++impl_->version->version;
  }
  bool is_inference() const { return impl_->inference; }

  // Address of element [0, 0, ...] (storage base + offset).
  void* data() const;
  template <typename T>
  T* data_ptr() const {
    TB_CHECK(core::dtype_of<T> == dtype(), "data_ptr", "requested ", core::name(core::dtype_of<T>), " from a ",
             core::name(dtype()), " tensor");
    return static_cast<T*>(data());
  }
  // The single value of a one-element tensor, converted to T.
  template <typename T>
  T item() const;
  double item_double() const;

  // ---- views: metadata only, shared storage ----
  Tensor view(const Shape& shape) const;     // fails on an incompatible layout, like PyTorch
  Tensor reshape(const Shape& shape) const;  // view if possible, else a contiguous copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // 2-D transpose (0-D and 1-D unchanged)
  Tensor permute(const Shape& dims) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a size; new leading dims allowed
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  // Python slicing a[start:end:step] along `dim`; start/end are clamped as in Python.
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset = {}) const;

  // ---- copies ----
  Tensor contiguous() const;     // self when already contiguous
  Tensor clone() const;          // always a fresh contiguous copy
  Tensor to(DType dtype) const;  // self when the dtype already matches
  // Copies src into self (broadcasting src, casting dtype; rounding to nearest even into
  // bf16/f16). Bumps the version.
  Tensor& copy_(const Tensor& src);

  std::string str() const;  // printed like torch: values, shape, dtype

  // ---- autograd: declared here, defined in engine/autograd/variable.cpp (PyTorch's names) ----
  bool requires_grad() const;              // a leaf that requires grad, or has a grad_fn
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;                      // undefined until a backward reaches it
  void set_grad(const Tensor& grad) const;  // undefined clears it (zero_grad(set_to_none))
  std::shared_ptr<autograd::Node> grad_fn() const;
  uint32_t output_nr() const;
  Tensor detach() const;     // shares storage and version, no history
  void retain_grad() const;  // keep .grad of a non-leaf
  bool retains_grad() const;
  // gradient: defaults to 1 for a one-element tensor, required otherwise.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  // hook(grad) runs when this tensor's gradient is computed; a defined result replaces it.
  // Returns a handle for remove_hook.
  int64_t register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void remove_hook(int64_t handle) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A fresh tensor of `sizes` with contiguous strides and uninitialised contents.
Tensor empty(const Shape& sizes, DType dtype = DType::Float32);
// A fresh tensor with the layout PyTorch's memory_format=preserve gives: the same strides as `t`
// when t is dense and non-overlapping (a transposed tensor stays transposed), else contiguous.
Tensor empty_like_preserve(const Tensor& t, DType dtype);
bool is_non_overlapping_and_dense(const Tensor& t);
// PyTorch's suggest_memory_format() != contiguous: a 4-D tensor whose strides look channels-last,
// or a 5-D one channels-last-3d, by its heuristic (Note [Channels-last by strides]). PyTorch's ops
// that allocate "in the input's memory format" (pad, group_norm, ...) then return that layout.
bool suggests_channels_last(const Tensor& t);
// PyTorch's is_contiguous(memory_format=channels_last): a 4-D tensor whose non-size-1 dims are
// dense in the order C, W, H, N (size-1 dims may have any stride). 5-D tensors never are.
bool is_channels_last_contiguous(const Tensor& t);
// A fresh 4-D (5-D) tensor with channels-last (-3d) strides: C innermost, then W, H (, D), N.
Tensor empty_channels_last(const Shape& sizes, DType dtype);
// `r`, or a channels-last copy of it when `like` suggests channels-last and r has its rank.
Tensor in_memory_format_of(const Tensor& like, const Tensor& r);
// A tensor over existing storage with the given layout (checked to stay inside the storage).
Tensor make_tensor(std::shared_ptr<Storage> storage, const Shape& sizes, const Shape& strides, int64_t offset,
                   DType dtype, const char* op = "make_tensor");
// A view of `t` with new metadata, sharing storage, version counter.
Tensor make_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset);
// Memory of the storage range a tensor can reach, in elements: max index + 1 (0 if empty).
int64_t reach(const Shape& sizes, const Shape& strides, int64_t offset);
// PyTorch's stride computation for view(): nullopt if the new shape cannot share the layout.
std::optional<Shape> compute_view_strides(const Shape& old_sizes, const Shape& old_strides, const Shape& new_sizes);

template <typename T>
T Tensor::item() const {
  TB_CHECK(numel() == 1, "item", "a tensor with ", numel(), " elements cannot be converted to a scalar");
  return core::dispatch(dtype(), [&]<typename S>() {
    return static_cast<T>(static_cast<core::opmath_t<S>>(*static_cast<const S*>(data())));
  });
}

}  // namespace tb
