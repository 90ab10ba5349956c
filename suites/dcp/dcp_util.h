// What the dcp suite's files share: the layouts a model trains under (one process, DDP, FSDP
// strategies on subgroups of the launched world), the model and data they train on, and the
// whole-tensor view of a layout's state that every comparison uses.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/distributed.h"
#include "engine/dist/fsdp/fsdp.h"
#include "engine/dist/process_group.h"
#include "engine/nn/module.h"
#include "engine/optim/optimizer.h"
#include "harness/suite.h"
#include "suites/ops/tolerance.h"
#include "suites/recorded.h"

namespace tb::suites::dcp {

using checkpoint::NamedTensors;

enum class Kind { Single, DDP, FSDP };

struct Layout {
  std::string name;  // "single", "ddp_w2", "full_shard_w4", "hybrid_shard_2x2", ...
  int world = 1;
  Kind kind = Kind::Single;
  dist::ShardingStrategy strategy = dist::ShardingStrategy::FullShard;
  int shard_group_size = 0;  // HybridShard only
};
// The six: single, ddp_w2, full_shard_w2, full_shard_w4, shard_grad_op_w3, hybrid_shard_2x2.
const std::vector<Layout>& layouts();

// The ranks [0, world) of `all` as a group of their own (ProcessGroup::split, a collective on
// `all`); the other ranks get a group of the rest, which they leave unused.
std::shared_ptr<dist::ProcessGroup> first_ranks(dist::ProcessGroup& all, int world);

// A model and its AdamW optimizer under a layout, on `group` (of the layout's size).
struct Trained {
  Layout layout;
  std::shared_ptr<dist::ProcessGroup> group;
  std::shared_ptr<nn::Module> model;    // the plain module (sharded in place under FSDP)
  std::shared_ptr<nn::Module> forward;  // what the step calls: the DDP wrapper, or the model
  std::shared_ptr<optim::Optimizer> opt;
};
// A float64 GPT (vocab 50, d_model 20: sizes that divide neither 3 nor 4) initialised from
// `seed`, each TransformerBlock and the root an FSDP unit under FSDP layouts.
Trained make_trained(const Layout& l, std::shared_ptr<dist::ProcessGroup> group, uint64_t seed);
// Optimizer steps [first, first + n) on one fixed global batch per step, split over the ranks
// (every layout sees the same samples and the same mean loss). Returns the mean losses.
std::vector<double> train(Trained& t, int64_t first, int64_t n);

// Every tensor of the layout's state, whole and in its saved dtype, on every rank of t.group:
// "model.<name>" from the (full) state dict, "optim.<name>.<key>" gathered from each rank's rows
// (train::distributed_state's entries), bytes copied, never summed; every replica of a row must
// be bitwise the one kept. A collective on t.group.
NamedTensors whole_state(Trained& t);
// Rows of one tensor assembled from the ranks' (row_offset, local) pieces: each row from the
// lowest rank that holds it; a row no rank holds, or replicas of a row that differ, is a
// CheckFailed naming the tensor (alike on every rank: each sees every rank's rows).
Tensor gather_rows(dist::ProcessGroup& g, const std::string& name, const Tensor& local, const Shape& global,
                   int64_t row_offset);

// Rank 0's tensors on every rank of `g` (names, dtypes, shapes, bytes).
NamedTensors share_from_rank0(dist::ProcessGroup& g, const NamedTensors& mine);

// "" when both hold the same names with bit-identical tensors; else the first difference.
std::string bit_diff(const NamedTensors& got, const NamedTensors& want);
// The worst |got - want| / (atol + rtol |want|) over all tensors (names must match), and where.
double worst_ratio(const NamedTensors& got, const NamedTensors& want, Tolerance tol, std::string* where);

// A checkpoint root for `what`, the same path on every rank (ranks share this host): under the
// launch's run directory (TRAINBENCH_DIST_DIR) or the system's temporary directory.
std::string scratch_dir(dist::ProcessGroup& g, const std::string& what);

// Runs `f` on the ranks [0, world) of `all`, then every rank of `all` learns whether any of them
// failed (an all_reduce), so no rank is left waiting: the failing ranks rethrow their error, the
// others throw CheckFailed.
void on_first_ranks(dist::ProcessGroup& all, int world, const std::function<void()>& f);

// The steps trained before a save, and after it (dcp_reshard.cpp).
constexpr int64_t kSteps = 3;
// One saving layout's checkpoint and its uninterrupted run, on every rank of the world.
struct Saved {
  std::string dir;              // the checkpoint root
  NamedTensors at_save, after;  // whole state at the save and kSteps steps later
  std::vector<double> losses;   // the further steps' mean losses
};
// Made on first use and kept for the process (every rank runs the cases in the same order, so
// every rank makes the same ones at the same point). A collective on `world`.
const Saved& saved(const Layout& s, dist::ProcessGroup& world);
// On every rank of `g` (of the layout's size): a model trains kSteps steps under `s` from seed 7
// and saves into `dir` (step kSteps, layout s.name, extra {"next_step": kSteps}), then kSteps more;
// the result's whole states and losses are this group's (saved() shares them across the world).
Saved train_and_save(const Layout& s, std::shared_ptr<dist::ProcessGroup> g, const std::string& dir);
// On every rank of `g` (of l.world ranks): a fresh model under `l` (other initial weights) loads
// S.dir, saved under `s`, and must hold S.at_save bit for bit, then after kSteps further steps
// S.after (bitwise when l is s, else within the DDP suite's float64 tolerance); fills `rec`'s
// metrics (saved_world, loaded_world, tensors, loaded_bitwise, after_k_steps_*), series and
// tolerances. The mpi/reshard cases, and the hosts suite's loads on another host count.
void check_loaded(const Layout& s, const Saved& S, const Layout& l, std::shared_ptr<dist::ProcessGroup> g,
                  harness::Record& rec);

// The disk-full, mutated-file and Python-reader cases (dcp_faults.cpp).
std::vector<harness::TestCase> fault_rank_tests();

// Removes a scratch directory on rank 0 (no collective): call it after a collective that every
// rank reaches only once done with the files.
void remove_scratch(dist::ProcessGroup& g, const std::string& dir);

// The error `f` throws (empty when none).
std::string error_of(const std::function<void()>& f);

inline harness::TestCase dcp_case(const std::string& name, std::function<void(harness::Record&)> body) {
  return recorded_case("dcp", name, std::move(body), /*with_seed=*/false);
}

}  // namespace tb::suites::dcp
