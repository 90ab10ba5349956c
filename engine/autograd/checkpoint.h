// Activation checkpointing, as torch.utils.checkpoint: checkpoint(fn, inputs) runs fn without
// keeping its activations (only its inputs are saved) and runs it again in backward to
// backpropagate through it, with the generator state of the forward replayed so dropout draws the
// same masks. Trades one more forward of fn for the memory of its intermediate tensors.
// (Not to be confused with engine/checkpoint/, which writes training state to files.)
//
//   Tensor y = autograd::checkpoint([&](const Tensor& x) { return (*block)(x); }, x);
//
// How it works and how it differs from PyTorch: Note [Activation checkpointing] in checkpoint.cpp.
// The module-level switch (whole modules, each block of a GPT) is engine/nn/activation_checkpoint.h.
#pragma once
#include <functional>
#include <vector>

#include "engine/autograd/node.h"
#include "engine/core/rng.h"

namespace tb::autograd {

struct CheckpointOptions {
  // Stash the default generator's state at the forward and replay it for the recomputation, so
  // random ops in fn (dropout) draw what they drew the first time (PyTorch's preserve_rng_state).
  // The generator's state after the backward is what it was before it, either way.
  bool preserve_rng_state = true;
  // Other generators fn draws from (a Dropout or MultiheadAttention given its own), stashed and
  // replayed likewise when preserve_rng_state. Not owned: they must outlive the backward.
  std::vector<core::Generator*> generators;
};

using CheckpointFn = std::function<TensorList(const TensorList&)>;

// fn(inputs), recording one node (CheckpointBackward0) instead of fn's graph. fn must return at
// least one tensor, compute the same thing when run again (the same tensors requiring grad, the
// same output shapes and dtypes), and must not write its inputs in place. An output requires grad
// when it did inside fn: when it depends on an input or on any other tensor requiring grad that
// fn uses (parameters), whose gradients then accumulate as without checkpointing. fn is copied
// and runs again in backward, so what it captures must outlive the backward. Outside grad mode,
// it is just fn(inputs).
TensorList checkpoint(const CheckpointFn& fn, const TensorList& inputs, const CheckpointOptions& options = {});
// The one-tensor form.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options = {});

}  // namespace tb::autograd
