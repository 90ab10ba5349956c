// The analytic memory estimator: per-rank bytes of parameters, gradients, optimizer state,
// activations and communication buffers, per phase of a training step, for DDP and each FSDP
// strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD), computed from parameter shapes
// alone. It is what `trainbench estimate` prints and what the fsdp suite compares the allocator's
// per-tag peaks against. The categories are the allocator's tags (engine/memory/allocator.h).
// Formulas and the step model: docs/distributed.md, "FSDP memory estimator".
//
// Use:
//   MemoryEstimateInput in;
//   in.model = gpt_model(cfg, /*batch=*/8, /*seq=*/cfg.max_seq);
//   in.strategy = Strategy::FullShard;
//   in.world = 8;
//   MemoryEstimate e = estimate_memory(in);   // e.model_state_bytes(), e.backward.total(), ...
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/memory/allocator.h"
#include "engine/nn/models.h"

namespace tb::dist {

enum class Strategy { Ddp, FullShard, ShardGradOp, NoShard, HybridShard };
// "ddp", "full_shard", "shard_grad_op", "no_shard", "hybrid_shard" (the fsdp suite's case names).
const char* strategy_name(Strategy s);
Strategy strategy_from_name(const std::string& s);  // throws core::Error naming the valid ones

// Optimizer state per parameter element: Adam/AdamW 2 tensors (exp_avg, exp_avg_sq; 3 with
// amsgrad), SGD with momentum 1 (momentum_buffer), plain SGD 0.
enum class OptimizerKind { Sgd, SgdMomentum, Adam, AdamW };
const char* optimizer_name(OptimizerKind k);              // "sgd", "sgd-momentum", "adam", "adamw"
OptimizerKind optimizer_from_name(const std::string& s);  // throws core::Error naming the valid ones

// One parameter as the model registers it. `unit`: the index into ModelSpec::units of the FSDP
// unit (a fully_shard call) that owns it, or -1 for the root unit (what is left after the units).
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;  // a 0-dim parameter counts as one row of one element
  int unit = -1;
};

struct UnitSpec {
  std::string name;              // "blocks.0"
  int64_t activation_bytes = 0;  // saved for backward by this unit's forward (an estimate)
};

// A model as the estimator sees it: its trainable parameters in registration order
// (Module::named_parameters(): DDP's buckets follow it) and its FSDP units in forward order.
// The root unit wraps the whole model, so its gathered parameters live through the whole forward
// and the whole backward (as FSDP2 keeps the root's).
struct ModelSpec {
  std::vector<ParamSpec> params;
  std::vector<UnitSpec> units;
  int64_t root_activation_bytes = 0;  // activations outside the units (embeddings, head, loss)
  int64_t numel() const;
};

// Bounds on the models built here, far above any real model (tens to a few hundred blocks; the
// deepest published transformers have about a thousand layers), so that a mistyped count is an
// error rather than minutes and all the memory: a spec holds a named parameter (about 200 bytes)
// per unit, or 12 per GPT block, and the estimator is linear in them. At the bounds a spec has
// about 1.2 million parameters (some 350 MB; under a second to estimate).
inline constexpr int64_t kMaxUnits = 1'000'000;  // model_from_parameter_count's units
inline constexpr int64_t kMaxLayers = 100'000;   // gpt_model's blocks

// `n` parameters as `units` one-dimensional parameters of (nearly) equal size, one per unit (the
// last takes the remainder); units = 0: a single parameter in the root. `activation_bytes` is
// spread over the units (or given to the root). Throws on n < 1, units < 0, units > n or units
// > kMaxUnits.
ModelSpec model_from_parameter_count(int64_t n, int64_t units = 0, int64_t activation_bytes = 0);

// nn::MLP(in, hidden, out): parameters "0.weight", "0.bias", "2.*", "4.*", each Linear a unit.
// batch > 0 adds activations: per ReLU its output (batch x hidden), the logits and the loss's
// saved log-probabilities (batch x out), in `act_dtype` (an estimate).
ModelSpec mlp_model(int64_t in, int64_t hidden, int64_t out, int64_t batch = 0, DType act_dtype = DType::Float32);

// nn::GPT(c): tok_emb, pos_emb, blocks.i.* (each block a unit), ln_f, head (embeddings, ln_f and
// head in the root). batch > 0 adds activations for sequences of `seq` tokens (<= c.max_seq), an
// estimate from the tensors the engine's autograd saves (docs/distributed.md): per block
// (16 B T d + B H T^2) elements in act_dtype plus 4 B T float32 LayerNorm statistics; the root
// (2 B T d + 2 B T V) elements plus 2 B T float32. Throws on more than kMaxLayers layers, or a
// parameter or activation size past int64.
ModelSpec gpt_model(const nn::GPTConfig& c, int64_t batch = 0, int64_t seq = 0, DType act_dtype = DType::Float32);

struct MemoryEstimateInput {
  ModelSpec model;
  Strategy strategy = Strategy::FullShard;
  int world = 1;        // ranks
  int shard_group = 0;  // HYBRID_SHARD: ranks a parameter is sharded over (divides world); 0 otherwise
  // FSDP: the dtype of the gathered compute copies and of the unsharded gradients; the master
  // shards, their gradients and the optimizer state stay float32. DDP: the parameters' own dtype
  // (gradients and optimizer state follow it).
  DType param_dtype = DType::Float32;
  DType reduce_dtype = DType::Float32;  // FSDP: the reduce-scatter (all-reduce) buffers
  OptimizerKind optimizer = OptimizerKind::AdamW;
  bool amsgrad = false;  // Adam/AdamW: a third state tensor
  // FSDP: the next unit's all-gather overlaps the current unit (two units gathered) and a unit's
  // reduce-scatter overlaps the next unit's backward (two units' unsharded gradients).
  bool prefetch = true;
  // DDP (DDPOptions): bucket caps and gradient_as_bucket_view (.grad aliases the buckets).
  double bucket_cap_mb = 25, first_bucket_cap_mb = 1;
  bool gradient_as_bucket_view = false;
  // Count each tensor at its allocator block size (memory::block_size) and Adam's 0-dim "step"
  // tensors, as the allocator's statistics do; off: exact element bytes (the guide's figures).
  bool allocator_blocks = false;
};

// Bytes by category; the categories are the allocator's tags.
struct MemoryBytes {
  int64_t parameters = 0;       // master shards + gathered (unsharded) compute copies
  int64_t gradients = 0;        // gradient shards + unsharded gradients awaiting their reduction
  int64_t optimizer_state = 0;  // sharded under FSDP
  int64_t activations = 0;      // saved for backward (an estimate)
  int64_t communication = 0;    // DDP buckets; FSDP reduce-scatter buffers in flight
  // Sums checked like every other figure: past int64 they throw core::Error. estimate_memory
  // computes both for every phase it returns, so on its result they never throw.
  int64_t model_state() const;      // parameters + gradients + optimizer_state
  int64_t total() const;            // model_state() + activations + communication
  int64_t of(memory::Tag t) const;  // 0 for Tag::Other
};

// One rank's memory (every rank holds the same: shards are padded to equal size). Phases are of
// a steady-state step: zero_grad(set_to_none) before the forward, so no gradient lives in the
// forward; the optimizer state exists from the first step on. Each phase is its largest moment
// (its categories add up to its total); see docs/distributed.md for the moments.
struct MemoryEstimate {
  int shard_world = 1;  // ranks one parameter is split over (1 for DDP and NO_SHARD)
  int64_t numel = 0;    // parameter elements of the model
  // Held between steps: the guide's bytes-per-parameter figure (16 x numel for DDP + AdamW fp32).
  int64_t parameter_bytes = 0;                 // master shards (DDP: the full parameters)
  int64_t gradient_bytes = 0;                  // the .grad the optimizer reads (0 in DDP with bucket views)
  int64_t optimizer_state_bytes = 0;           // sharded with the parameters
  int64_t persistent_communication_bytes = 0;  // DDP's buckets, allocated once
  int64_t model_state_bytes() const;           // the three above (checked; never throws on a result)
  // Transient, at their largest moment in the step.
  int64_t gathered_parameter_bytes = 0;  // unsharded compute copies (FSDP)
  int64_t unsharded_gradient_bytes = 0;  // full-size gradients awaiting their reduce-scatter
  int64_t activation_bytes = 0;          // the model's activations (ModelSpec), all units
  MemoryBytes after_init, forward, backward, optimizer_step;
  MemoryBytes peak;                    // the phase with the largest total (the first of equals)
  std::string peak_phase;              // its name: after_init, forward, backward or optimizer_step
  int64_t peak_model_state_bytes = 0;  // the step's largest parameters + gradients + optimizer state
};

// Throws core::Error on bad input: world < 1, a shard group that is not 1..world or does not
// divide it (or one given to another strategy), a negative dimension, a non-floating dtype, a
// parameter's unit out of range, a byte count past int64 (any sum or product on the way, every
// phase's total included). Linear in the parameters and units.
MemoryEstimate estimate_memory(const MemoryEstimateInput& in);

}  // namespace tb::dist
