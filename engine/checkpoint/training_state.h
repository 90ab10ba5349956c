// A training checkpoint: the model's state dict, the optimizer's tensors and JSON state, the LR
// scheduler, the loss scaler, the RNG, step, epoch and config, saved so that a crash at any
// moment (kill -9, power loss) leaves a loadable checkpoint: the old one or the new one.
// Not here: the tensor file format (safetensors.h), sharded / multi-rank checkpoints.
//
// Note [Checkpoint directory]
//   <dir>/step-<N>/model.safetensors      state.model (safetensors.h)
//   <dir>/step-<N>/optimizer.safetensors  state.optimizer_tensors
//   <dir>/step-<N>/state.json             everything else, plus a save id the two files repeat
//   <dir>/latest                          "step-<N>\n": the last complete checkpoint
// A save builds the step directory under a hidden staging name, fsyncs every file, moves it into
// place with one rename (an atomic exchange when step-<N> already exists), and only then
// replaces `latest` atomically. So `latest` always names a complete directory. One writer per
// directory at a time.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/safetensors.h"
#include "engine/core/rng.h"

namespace tb::checkpoint {

struct TrainingState {
  NamedTensors model;              // the model's state_dict()
  NamedTensors optimizer_tensors;  // the optimizer's per-parameter state tensors
  nlohmann::json optimizer;        // the optimizer's non-tensor state (groups, hyper-parameters)
  nlohmann::json scheduler;
  nlohmann::json scaler;
  nlohmann::json rng;  // e.g. {"default": {"seed": .., "offset": ..}}, see rng_state
  int64_t step = 0;
  int64_t epoch = 0;
  nlohmann::json config;
  nlohmann::json extra;
};

// keep_last > 0 removes older step directories afterwards, keeping the keep_last highest steps
// and always the one `latest` names; 0 keeps all.
void save_checkpoint(const std::string& dir, const TrainingState& state, int64_t keep_last = 0);

// `dir_or_step_dir` is either the root (then `latest` is followed) or one step directory.
TrainingState load_checkpoint(const std::string& dir_or_step_dir, const LoadOptions& options = {});

// The step directory `latest` names under `dir` (throws when there is none).
std::string latest_checkpoint(const std::string& dir);

// A generator's state as {"seed": .., "offset": ..} and back.
nlohmann::json rng_state(const core::Generator& gen);
void set_rng_state(core::Generator& gen, const nlohmann::json& state);

}  // namespace tb::checkpoint
