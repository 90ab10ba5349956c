// Activation checkpointing of modules, as PyTorch's composable checkpoint(module)
// (torch.distributed._composable, the one FSDP2 pairs with fully_shard): a switch on the module,
// not a wrapper, so names, state_dict keys and module types stay those of the plain model. A
// checkpointed module's forward runs through autograd::checkpoint (engine/autograd/checkpoint.h):
// it keeps no activations and runs again in backward, with dropout drawing the same masks.
// See Note [Checkpointed modules] in activation_checkpoint.cpp.
//
//   nn::checkpoint_blocks(gpt);                        // each TransformerBlock of a GPT
//   nn::apply_activation_checkpointing(model, nn::checkpoint_type("TransformerBlock"));
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd/checkpoint.h"
#include "engine/nn/models.h"

namespace tb::nn {

// Runs m's forward through autograd::checkpoint from now on; on = false turns it off. m must
// outlive the backward passes through graphs it recorded while checkpointed (as for its hooks).
void checkpoint_module(Module& m, bool on = true, const autograd::CheckpointOptions& options = {});

// Which modules to checkpoint, by dotted name ("" is the root) and module.
using CheckpointPolicy = std::function<bool(const std::string& name, const Module& module)>;
// The modules whose type_name() is `type_name` ("TransformerBlock").
CheckpointPolicy checkpoint_type(const std::string& type_name);

// Checkpoints every module of root the policy selects, depth first, not descending into one it
// selected (PyTorch's apply_activation_checkpointing(model, check_fn=...)). Returns their names.
std::vector<std::string> apply_activation_checkpointing(Module& root, const CheckpointPolicy& policy,
                                                        const autograd::CheckpointOptions& options = {});

// Each block of gpt.blocks ("blocks.0", "blocks.1", ...; returned), the units FSDP shards by.
std::vector<std::string> checkpoint_blocks(GPT& gpt, const autograd::CheckpointOptions& options = {});

}  // namespace tb::nn
