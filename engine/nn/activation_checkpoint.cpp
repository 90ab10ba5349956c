// Activation checkpointing of modules. See activation_checkpoint.h.
#include "engine/nn/activation_checkpoint.h"

#include <memory>

namespace tb::nn {

// Note [Checkpointed modules]
// PyTorch has two module-level forms: checkpoint_wrapper(module), a new module holding the old
// one as `_checkpoint_wrapped_module` (its state_dict hooks strip that prefix again when saving,
// but named_parameters, module types and load paths see it), and the composable
// checkpoint(module), a flag with forward hooks, which FSDP2 uses beside fully_shard. This is the
// composable form: Module::call_with_hooks runs the module's forward through
// autograd::checkpoint. So names and state_dict keys are exactly the plain model's (a checkpoint
// file, an optimizer's parameter order and FSDP's wrap policies by type or name see no
// difference), and a module can be switched on and off in place. The region is the forward
// alone: the module's own forward pre-hooks, forward hooks and full backward hooks run once,
// outside it (FSDP's pre-forward all-gather and pre-backward hooks on the unit's outputs run
// before the recomputation, which then finds the parameters gathered); the hooks of modules
// inside it run again when it is recomputed, as in PyTorch. What the recomputation reads is the
// module as it is at backward: its parameters (the same tensors, or the backward is an error),
// its training flag and buffers. A Sequential does not fuse a checkpointed Linear with the ReLU
// after it (Note [Sequential fuses Linear + ReLU]): the Linear's forward must be what runs.

void checkpoint_module(Module& m, bool on, const autograd::CheckpointOptions& options) {
  m.set_checkpoint(on ? std::make_shared<const autograd::CheckpointOptions>(options) : nullptr);
}

CheckpointPolicy checkpoint_type(const std::string& type_name) {
  return [type_name](const std::string&, const Module& m) { return m.type_name() == type_name; };
}

namespace {
void apply_below(Module& m, const std::string& name, const CheckpointPolicy& policy,
                 const autograd::CheckpointOptions& options, std::vector<std::string>& chosen) {
  if (policy(name, m)) {
    checkpoint_module(m, true, options);
    chosen.push_back(name);
    return;
  }
  for (const auto& [child_name, child] : m.named_children())
    apply_below(*child, name.empty() ? child_name : name + "." + child_name, policy, options, chosen);
}
}  // namespace

std::vector<std::string> apply_activation_checkpointing(Module& root, const CheckpointPolicy& policy,
                                                        const autograd::CheckpointOptions& options) {
  TB_CHECK(static_cast<bool>(policy), "apply_activation_checkpointing", "policy is empty");
  std::vector<std::string> chosen;
  apply_below(root, "", policy, options, chosen);
  return chosen;
}

std::vector<std::string> checkpoint_blocks(GPT& gpt, const autograd::CheckpointOptions& options) {
  std::vector<std::string> names;
  for (size_t i = 0; i < gpt.blocks->size(); ++i) {
    checkpoint_module(*(*gpt.blocks)[i], true, options);
    names.push_back("blocks." + std::to_string(i));
  }
  return names;
}

}  // namespace tb::nn
