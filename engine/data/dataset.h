// Dataset: the indexed source of examples the DataLoader draws from, and TensorDataset (rows of
// in-memory tensors). Not here: ordering (sampler.h), batching (collate.h), threads (dataloader.h).
#pragma once
#include <cstdint>

#include "engine/tensor/tensor.h"

namespace tb::data {

// One example. `target` may be undefined (unlabelled data); collates keep it undefined then.
struct Example {
  Tensor input;
  Tensor target;
};

// A map-style dataset, as torch.utils.data.Dataset. get() must be safe to call from several
// threads at once (DataLoader workers do) and must throw core::Error for an index outside
// [0, size()), never read out of bounds.
class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
};

// Row i of `inputs` (N, ...) and of `targets` (N, ...), as views (no copy). `targets` may be
// undefined. Both tensors are shared, never written: get() is thread-safe.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets = {});
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_;
  Tensor targets_;
  int64_t size_ = 0;
};

// The shared range check every dataset uses: throws core::Error naming `op` unless
// 0 <= index < size.
void check_index(const char* op, int64_t index, int64_t size);

}  // namespace tb::data
