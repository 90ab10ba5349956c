// Dataset's out-of-line pieces and TensorDataset.
#include "engine/data/dataset.h"

#include "engine/core/shape.h"

namespace tb::data {

Dataset::~Dataset() = default;

void check_index(const char* op, int64_t index, int64_t size) {
  TB_CHECK(index >= 0 && index < size, op, "index ", index, " is out of range for a dataset of ", size,
           " examples (valid: 0..", size - 1, ")");
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  TB_CHECK(inputs_.defined(), "TensorDataset", "inputs must be a defined tensor of shape (N, ...)");
  TB_CHECK(inputs_.dim() >= 1, "TensorDataset", "inputs must have a leading example dimension, got a 0-dim tensor");
  size_ = inputs_.size(0);
  if (targets_.defined()) {
    TB_CHECK(targets_.dim() >= 1, "TensorDataset", "targets must have a leading example dimension, got a 0-dim tensor");
    TB_CHECK(targets_.size(0) == size_, "TensorDataset", "inputs ", core::to_string(inputs_.sizes()), " and targets ",
             core::to_string(targets_.sizes()), " disagree on the number of examples (dim 0)");
  }
}

Example TensorDataset::get(int64_t index) const {
  check_index("TensorDataset::get", index, size_);
  Example ex;
  ex.input = inputs_.select(0, index);
  if (targets_.defined()) ex.target = targets_.select(0, index);
  return ex;
}

}  // namespace tb::data
