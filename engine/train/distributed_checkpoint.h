// A model and its optimizer as a distributed checkpoint's state (engine/checkpoint/distributed.h),
// under any layout: one process, DDP (whole tensors on every rank) or FSDP (each parameter's rows
// of this rank, dist::sharded_state_dict). Saved under one layout, loads under any other.
//   "model.<fqn>"        every entry of the plain model's state_dict (parameters and buffers)
//   "optim.<fqn>.<key>"  the optimizer's per-parameter state (e.g. exp_avg, exp_avg_sq, step,
//                        momentum_buffer), with its parameter's rows when it has its shape
//   state["optimizer"]   the optimizer's groups (options and parameter indices, PyTorch's layout)
// Parameters are named by their fully qualified names, so the indices of the optimizer's groups
// refer to the same parameters under every layout (FSDP registers the shards in their places).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/distributed.h"
#include "engine/dist/process_group.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"

namespace tb::train {

// `model` is the plain module (for DDP the wrapped module, not the wrapper); `optimizer` may be
// null. Entries view the live tensors (no copy): save before the next step changes them. `extra`
// is stored as state["extra"] (scheduler, RNG, epoch: the caller's).
checkpoint::DistributedState distributed_state(nn::Module& model, const optim::Optimizer* optimizer, int64_t step,
                                               const nlohmann::json& extra = {}, const std::string& layout = "");

// A collective: loads `path` (root, step directory or one safetensors file) into the model's
// tensors and the optimizer's state in place, whatever layout wrote it. Returns the loaded state
// (step, layout and state["extra"] for the caller to restore the rest).
checkpoint::DistributedState load_distributed_state(nn::Module& model, optim::Optimizer* optimizer,
                                                    const std::string& path, dist::ProcessGroup& group,
                                                    const checkpoint::DistributedLoadOptions& options = {});

}  // namespace tb::train
