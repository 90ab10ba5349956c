// Storage: a ref-counted byte buffer from an Allocator on a Device. Views share one Storage.
#pragma once
#include <cstddef>
#include <memory>

#include "engine/core/error.h"
#include "engine/core/device.h"
#include "engine/memory/allocator.h"

namespace tb {

class Storage {
 public:
  Storage(size_t nbytes, memory::Allocator& alloc, core::Device device = {})
      : data_(alloc.allocate(nbytes)), nbytes_(nbytes), device_(device) {}
  // Wraps memory the engine does not own (from_blob); `keep` keeps its owner alive.
  Storage(void* external, size_t nbytes, std::shared_ptr<void> keep)
      : data_(external, memory::DataDeleter{nullptr}), nbytes_(nbytes), keep_(std::move(keep)) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  core::Device device() const { return device_; }
  // Replaces the bytes by a fresh block of `nbytes` from the allocator that made them (0 frees
  // them), keeping this Storage object, so every tensor and view on it sees the new block. The
  // contents are not kept. FSDP frees a gathered parameter and gathers it again this way (as
  // PyTorch's storage().resize_()): autograd's saved views of it stay valid. The new block is
  // counted under the current TagGuard tag.
  void reallocate(size_t nbytes) {
    memory::Allocator* owner = data_.get_deleter().owner;
    TB_CHECK(owner != nullptr, "Storage.reallocate", "the storage wraps memory the engine does not own");
    data_.reset();  // free first: the peak holds one block, not two
    nbytes_ = 0;
    data_ = owner->allocate(nbytes);
    nbytes_ = nbytes;
  }
  // Counts this storage's block under `tag` from now on (See Note [Memory tags] in allocator.cpp).
  void set_tag(memory::Tag tag) const {
    if (memory::Allocator* a = data_.get_deleter().owner) a->retag(data_.get(), tag);
  }

 private:
  memory::DataPtr data_;
  size_t nbytes_;
  core::Device device_;
  std::shared_ptr<void> keep_;
};

}  // namespace tb
