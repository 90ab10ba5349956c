// Collate functions: a list of examples -> one batch. stack_collate (fixed shapes) and
// pad_collate (variable-length 1-D sequences, padded on the right). Not here: which examples
// form a batch (dataloader.h, sampler.h).
#pragma once
#include <functional>
#include <vector>

#include "engine/data/dataset.h"

namespace tb::data {

// What a DataLoader yields. `mask` is defined only for padded batches (pad_collate).
struct Batch {
  Tensor input;
  Tensor target;
  Tensor mask;
};
// pad_collate's result is an ordinary Batch, so it plugs into a DataLoader as is.
using PaddedBatch = Batch;

// The DataLoader's collate. Called from worker threads concurrently: must be thread-safe.
using Collate = std::function<Batch(const std::vector<Example>&)>;

// Stacks inputs, and targets, along a new dim 0: B examples of shape S -> (B, S...).
// Every example's input must have the same shape and dtype (likewise targets); an error names
// the first mismatching example and both shapes. Targets may be undefined in all examples (the
// result's target is then undefined), not in some.
Example stack_collate(const std::vector<Example>& examples);

// Right-pads variable-length 1-D sequences to the longest one, Tmax:
//   input  (B, Tmax), input's dtype, positions past an example's length hold pad_value
//   target (B, Tmax), target's dtype, positions past the length hold target_pad (-100:
//          PyTorch's ignore_index default, so cross_entropy skips them); a 0-dim target per
//          example (one label per sequence) is stacked to (B) instead; undefined stays undefined
//   mask   (B, Tmax) bool: TRUE WHERE A REAL TOKEN IS, false on padding
//          (the opposite of torch.nn.MultiheadAttention's key_padding_mask, where true = ignore).
// A 1-D target must have its input's length.
PaddedBatch pad_collate(const std::vector<Example>& examples, double pad_value = 0, int64_t target_pad = -100);

// Collate adapters for a DataLoader: stack_collate as a Batch (mask undefined), and pad_collate
// with fixed padding values.
Collate stack_collate_fn();
Collate pad_collate_fn(double pad_value = 0, int64_t target_pad = -100);

}  // namespace tb::data
