// Distributed (sharded) checkpoints that reshard: every rank saves the rows of each tensor it
// holds, in parallel, and any world size and layout loads them again, each rank reading only the
// byte ranges its own rows need. A tensor may be split along dim 0 across ranks (FSDP's shards),
// whole on every rank (DDP, one process: written once, by the rank the plan picks) or whole on
// some and split on others (HYBRID_SHARD: replicas of the same rows are written once).
// Not here: which tensors a model and optimizer have (engine/train/distributed_checkpoint.h builds
// a DistributedState from a module and an optimizer under DDP, FSDP or one process).
//
// Note [Distributed checkpoint directory]
//   <dir>/step-<N>/rank-<r>.safetensors  the chunks rank r was assigned, keys "<name>@<row_begin>"
//   <dir>/step-<N>/metadata.json         written last, by rank 0 (schema: docs/checkpoint.md)
//   <dir>/latest                         "step-<N>\n", moved only after metadata.json is durable
// The save: (1) the ranks exchange what they hold and compute one plan, identical on every rank:
// each distinct (tensor, row range) is written by one of the ranks holding it (the one with the
// fewest bytes assigned so far), the rows of every tensor must tile its dim 0 exactly and agree in
// shape and dtype; (2) every rank writes its file into a staging directory and fsyncs it; (3) the
// ranks exchange success or their error; (4) if all succeeded, rank 0 writes metadata.json (each
// tensor's shape and dtype, each chunk's rows, file, key and checksums of its 1 MiB blocks), moves
// the staging directory into place and moves `latest`; its outcome is broadcast. Any failure (an
// exception, a full disk) is raised on every rank naming the failing ranks, the staging directory
// is removed, and the previous checkpoint stays what `latest` names. A killed rank ends the job
// (the launcher) or times the collectives out (`timeout`): metadata.json is never written, so a
// checkpoint is never torn. One save per directory at a time.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/safetensors.h"
#include "engine/dist/process_group.h"

namespace tb::checkpoint {

// One rank's rows of a named tensor: rows [row_offset, row_offset + local.size(0)) of a tensor of
// `global_shape` (a 0-dim tensor is always whole: row_offset 0).
struct ShardedEntry {
  std::string name;
  Tensor local;  // on load: allocated by the caller with the rows it wants, filled in place
  Shape global_shape;
  int64_t row_offset = 0;
};

struct DistributedState {
  std::vector<ShardedEntry> tensors;  // the same names on every rank (each with its own rows)
  nlohmann::json state;               // everything else (optimizer groups, scheduler, RNG, ...): rank 0's is saved
  int64_t step = 0;
  std::string layout;  // who wrote it, e.g. "fsdp/full_shard", "ddp", "single": informative only
};

struct DistributedSaveOptions {
  int64_t keep_last = 0;  // > 0: older step directories are removed after the commit
  // The longest any collective of the save may wait for a peer (a killed or hung rank).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct SaveStats {
  std::string step_dir;
  int64_t bytes_written = 0;  // this rank's file's data bytes
  double seconds = 0;         // the whole save on this rank, commit included
};

// A collective: every rank of `group` calls it with the same step and names.
SaveStats save_distributed(const DistributedState& state, const std::string& dir, dist::ProcessGroup& group,
                           const DistributedSaveOptions& options = {});

struct DistributedLoadOptions {
  bool verify_checksums = true;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct LoadStats {
  std::string step_dir;
  int64_t bytes_read = 0;  // data bytes this rank read (its rows, plus checksum blocks' edges)
  double seconds = 0;
};

// A collective. `path` is a checkpoint root (`latest` is followed), a step directory, or one
// safetensors file (e.g. `trainbench checkpoint consolidate`'s output: each tensor whole under
// its name). Fills every entry's `local` in place (its dtype and the global shape must match the
// checkpoint's) and bumps its version, as copy_ does; sets state.state, step and layout from the checkpoint. Any rank's failure (a
// missing tensor, a mismatched shape, a corrupt file) is raised on every rank, naming the ranks,
// the file and the tensor; then the entries' contents are unspecified.
LoadStats load_distributed(DistributedState& state, const std::string& path, dist::ProcessGroup& group,
                           const DistributedLoadOptions& options = {});

// What a distributed checkpoint holds, read and validated without ranks (inspect, consolidate,
// and callers that must know the saved names before they allocate, e.g. optimizer state).
struct SavedChunk {
  int64_t row_begin = 0, row_end = 0;
  int writer = 0;                            // the rank that wrote it
  std::string file, key;                     // file name inside the step directory, key in it
  std::string checksum;                      // XXH64 of the whole chunk (16 hex digits)
  std::vector<std::string> block_checksums;  // XXH64 of each `block_bytes` block of the chunk
};
struct SavedTensor {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<SavedChunk> chunks;  // sorted by row_begin; they tile [0, shape[0]) (one, for 0-dim)
};
struct DistributedMetadata {
  std::string step_dir;
  std::string save_id;
  int64_t step = 0;
  int world_size = 0;
  std::string layout;
  std::string created;  // UTC, ISO 8601
  int64_t block_bytes = 0;
  std::vector<SavedTensor> tensors;  // sorted by name
  nlohmann::json state;
  const SavedTensor* find(const std::string& name) const;  // nullptr when absent
};
// `path`: a root (following `latest`), a step directory, or one safetensors file (then each
// tensor is one whole chunk, and state comes from its "trainbench.state" metadata). Throws core::Error naming the file on
// malformed metadata (it is untrusted input: every field is checked).
DistributedMetadata read_distributed_metadata(const std::string& path);
// True when `path` (root or step directory) holds a distributed checkpoint's metadata.json.
bool is_distributed_checkpoint(const std::string& path);
// The step directory `path` names (following `latest` from a root).
std::string resolve_step_dir(const std::string& path);

// Every tensor whole (in the saved dtype), read and checksum-verified from the chunk files,
// in name order: what `checkpoint consolidate` writes into one safetensors file.
NamedTensors read_distributed_full(const DistributedMetadata& meta);

// Checksum status of every chunk (reads every byte): for `checkpoint inspect --verify`.
struct ChunkCheck {
  std::string tensor, file;
  int64_t row_begin = 0, row_end = 0;
  bool ok = false;
  std::string problem;  // empty when ok
};
std::vector<ChunkCheck> verify_distributed(const DistributedMetadata& meta);

// How AsyncCheckpointer::save() copies the state into staging memory (after PyTorch's
// torch.distributed.checkpoint.staging.StagingOptions::use_async_staging).
enum class Staging {
  // save() copies every tensor before it returns: training is blocked for one copy of the
  // rank's state, and may then do anything to it. The default, as in PyTorch's async_save.
  Blocking,
  // save() records what to copy and returns; a background thread copies. The saved tensors must
  // not be written until wait_staged() returns (Note [Background staging]).
  Background,
};

// Asynchronous save (after torch.distributed.checkpoint.async_save): save() waits for the previous
// save, has the state staged (copied) and returns; a background thread writes and commits it over
// a private group split from `group` (so its collectives never interleave with training's). Needs
// a backend that can split (MPI).
//
// Note [Background staging]
// With Staging::Background, save() returns after recording the tensors and their version
// counters; the background thread copies them and then writes as with Staging::Blocking. The rule:
// nothing may write a saved tensor between save() and wait_staged(). The optimizers' step() and
// load_distributed call tb::state_fence() (engine/tensor/state_fence.h), which waits for the
// staging, so the usual loop (save, forward, backward, optimizer step) keeps the rule without a
// call. Misuse is caught, never committed: wait_staged() (also run by the fence, wait(), the next
// save() and the destructor), after the copy is complete, compares every saved tensor's version
// counter with the one recorded at save(); every in-place op, copy_, fill_ and optimizer step
// bumps it. A changed version fails that save on every rank, naming the tensor and the remedy,
// because each rank's writer waits for this verdict before it reports success (the commit needs
// every rank's success), and the previous checkpoint stays what `latest` names. The check is
// exact (a write that happened to finish before the copy began is refused too) and costs nothing
// per byte; it cannot see writes through raw pointers (Tensor::data()), which bypass the version
// counter, as PyTorch's does. The version is read on the caller's thread: a write from another
// thread must be ordered before wait_staged() to be seen.
class AsyncCheckpointer {
 public:
  // A collective (splits the group).
  explicit AsyncCheckpointer(const std::shared_ptr<dist::ProcessGroup>& group, DistributedSaveOptions options = {},
                             Staging staging = Staging::Blocking);
  ~AsyncCheckpointer();  // waits for a save in flight (errors are swallowed: call wait() to see them)
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  // A collective. Waits for the previous save (rethrowing its error), then stages the state
  // (Staging::Blocking) or starts staging it in the background (Staging::Background) and
  // returns. A problem with the state (an undefined tensor, a mismatch between ranks) fails the
  // save on every rank: wait() or the next save() rethrows it.
  void save(const DistributedState& state, const std::string& dir);
  // Blocks until the last save()'s state is copied, then checks that none of its tensors was
  // written since save(); throws core::Error naming the tensor if one was (that save then fails
  // on every rank). Returns at once with Staging::Blocking or when nothing is being staged.
  void wait_staged();
  // Waits for the save in flight (if any) and returns its stats; rethrows its error.
  SaveStats wait();
  // True when wait() would not block: no save in flight, or it has committed or failed (as
  // PyTorch's Future.done(); a loop may skip a save while the previous one still writes).
  bool done() const;
  Staging staging() const;
  // Seconds the last save kept its caller from going on: save() itself (waiting for the previous
  // save, and the copy with Staging::Blocking) plus, with Staging::Background, the time
  // wait_staged() or a state fence waited for its copy.
  double last_blocking_seconds() const;
  // Seconds the last save's copy into staging memory took, on whichever thread ran it.
  double last_staging_seconds() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // the worker thread and the state fence use it until the destructor
};

}  // namespace tb::checkpoint
