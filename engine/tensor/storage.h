// Storage: a ref-counted byte buffer from an Allocator on a Device. Views share one Storage.
#pragma once
#include <cstddef>
#include <memory>

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
