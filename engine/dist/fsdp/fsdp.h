// Fully sharded data parallelism after PyTorch's FSDP2 (torch.distributed.fsdp.fully_shard):
// `fully_shard(module, group, options)` makes `module` a unit whose parameters (those not already
// in a unit below it) are sharded along dim 0 across the ranks; applied bottom-up (each
// transformer block, then the root). Each rank keeps a float32 master shard of every parameter,
// registered on the module in the parameter's place, so `module->parameters()` are the shards an
// optimizer steps and `zero_grad` clears. Around each unit's forward its parameters are gathered
// (all-gather, in `param_dtype`) into the layers' own tensors (e.g. Linear::weight) and freed
// again; gradients are reduce-scattered (averaged) into the shards' .grad at the end of the unit's
// backward. Why per-parameter and not FSDP1's flat parameters: Note [Per-parameter shards] in
// fsdp.cpp. The walk through one step: engine/dist/fsdp/README.md.
//
// Use:
//   for (auto& block : *model->blocks) dist::fully_shard(block, group);
//   dist::fully_shard(model, group);            // the root: whatever parameters are left
//   optim::AdamW opt(model->parameters(), {});   // the shards
//   Tensor loss = nn::GPT::loss((*model)(x), y); // gathers, computes, frees unit by unit
//   loss.backward();                             // gathers again, reduce-scatters the gradients
//   opt.step();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dist/process_group.h"
#include "engine/nn/module.h"

namespace tb::dist {

// What a unit keeps between its forward and its backward (PyTorch's ShardingStrategy).
//   FullShard:   gathered parameters are freed after the unit's forward and gathered again for its
//                backward (least memory; two all-gathers per step).
//   ShardGradOp: gathered parameters stay from the forward to the end of the unit's backward.
//   NoShard:     every rank keeps whole parameters; gradients are all-reduced (DDP's semantics
//                through FSDP's code).
//   HybridShard: sharded inside groups of `shard_group_size` consecutive ranks, replicated across
//                them: gradients are reduce-scattered in the group, then all-reduced across groups.
enum class ShardingStrategy { FullShard, ShardGradOp, NoShard, HybridShard };
const char* sharding_strategy_name(ShardingStrategy s);  // "full_shard", "shard_grad_op", ...
// Parses those names; throws core::Error listing them on anything else.
ShardingStrategy parse_sharding_strategy(const std::string& s);

struct FSDPOptions {
  ShardingStrategy strategy = ShardingStrategy::FullShard;
  // HybridShard: ranks per shard group (consecutive ranks; must divide the world size). 0: the
  // ranks on this host as the launcher reports them (WorldInfo::local_size), else the world.
  int shard_group_size = 0;
  // Mixed precision (PyTorch's MixedPrecisionPolicy): the dtype the gathered parameters compute
  // in (e.g. BFloat16; the master shards stay float32), the dtype gradients are reduced in
  // (default: param_dtype), and whether floating inputs of the unit's forward are cast to
  // param_dtype. output_dtype: the dtype floating outputs of the unit's forward are cast to.
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;
  bool cast_forward_inputs = true;
  std::optional<DType> output_dtype;
  // Issue the next unit's all-gather before this unit computes, in forward (in the order of the
  // previous forward) and in backward (in reverse), so it runs on the group's worker meanwhile.
  bool forward_prefetch = true;
  bool backward_prefetch = true;
  // Broadcast rank 0's parameters and buffers before sharding (PyTorch FSDP1's
  // sync_module_states), so ranks that initialised differently train the same model.
  bool sync_module_states = true;
};

// What the last step communicated and waited for, summed over a root's units.
struct FSDPStats {
  int64_t all_gathers = 0, reduce_scatters = 0, all_reduces = 0;
  int64_t bytes = 0;                     // bytes of every collective's output (all-gather), input (reduce-scatter)
                                         // or buffer (all-reduce) on this rank
  double comm_wait_s = 0;                // time the training thread blocked waiting for collectives
  uint64_t first_seq = 0, last_seq = 0;  // the root group's collective sequence numbers (comm_seconds)
};

struct FSDPUnit;  // fsdp.cpp

// The handle fully_shard returns; the module owns the unit (its hooks hold it).
class FSDPModule {
 public:
  explicit FSDPModule(std::shared_ptr<FSDPUnit> unit) : unit_(std::move(unit)) {}
  nn::Module& module() const;
  ShardingStrategy strategy() const;
  // Gradient accumulation (PyTorch's set_requires_gradient_sync): while off, backward keeps the
  // whole (unsharded) gradients and communicates nothing; the next backward with it on reduces
  // the sum. Applies to this unit and every unit below it.
  void set_requires_gradient_sync(bool on);
  // Gathers / frees this unit's parameters outside forward and backward (e.g. to read them).
  void unshard();
  void reshard();
  // The root's counters of the last forward + backward (all zero for a unit that is not a root).
  FSDPStats stats() const;
  // The shards this unit manages, in its parameters' order (the tensors registered on the modules).
  std::vector<Tensor> sharded_parameters() const;

 private:
  std::shared_ptr<FSDPUnit> unit_;
};

// Makes `module` a unit over `group` (a collective when sync_module_states: every rank calls it,
// with the same modules in the same order). Its parameters that no unit below it holds are
// sharded; a module that already is a unit, or a parameter that is not a dim >= 0 floating leaf,
// is a clear error.
std::shared_ptr<FSDPModule> fully_shard(const std::shared_ptr<nn::Module>& module, std::shared_ptr<ProcessGroup> group,
                                        FSDPOptions options = {});
// The unit `module` is, or null.
std::shared_ptr<FSDPModule> fsdp_unit(const nn::Module& module);

// Wrap policies: which submodules become units (PyTorch's auto-wrap policies).
using WrapPolicy = std::function<bool(const std::string& name, const nn::Module& m)>;
// Modules whose type_name() is one of `types` (e.g. {"TransformerBlock"}).
WrapPolicy wrap_module_types(std::vector<std::string> types);
// Modules holding at least `min_params` parameter elements (their subtree's, excluding what
// deeper units already hold).
WrapPolicy wrap_min_params(int64_t min_params);
// fully_shard on every submodule the policy picks, deepest first, then on `root`; returns the
// root's unit. options.output_dtype is given to the root only (a unit's output feeds the root's
// next layer, which computes in param_dtype).
std::shared_ptr<FSDPModule> fully_shard_tree(const std::shared_ptr<nn::Module>& root,
                                             std::shared_ptr<ProcessGroup> group, const WrapPolicy& policy,
                                             FSDPOptions options = {});

// ---- state dicts of a sharded model (collectives: every rank calls them) ----
// The plain model's state dict (keys, shapes and float32 values of the master parameters; buffers
// as they are): gathered on every rank.
nn::StateDict full_state_dict(nn::Module& root);
// Loads a plain model's state dict (every rank passes the whole of it): each rank keeps its rows.
// Keys, shapes and strictness as Module::load_state_dict.
void load_full_state_dict(nn::Module& root, const nn::StateDict& state);
// This rank's rows of every parameter (padding excluded) with where they sit in the whole tensor;
// buffers whole. Keys are the plain model's.
struct ShardedTensor {
  Tensor local;  // rows [row_offset, row_offset + local.size(0)) of the whole tensor
  Shape global_shape;
  int64_t row_offset = 0;
  bool replicated = false;  // a buffer, or a NoShard parameter: every rank holds all of it
};
std::vector<std::pair<std::string, ShardedTensor>> sharded_state_dict(nn::Module& root);

// clip_grad_norm_ over a sharded model: the total norm of every shard's gradient across the ranks
// (each element counted once: shards summed over their shard group, replicas not), then the
// gradients scaled as optim::clip_grad_norm_ does. Returns the total norm (float32 scalar).
Tensor clip_grad_norm_(nn::Module& root, double max_norm, double norm_type = 2.0);

}  // namespace tb::dist
