// The training runs the OOM scenarios (oom_scenarios.cpp) make inside their ranks: a GPT trained
// with AdamW for a few steps under a memory cap, plainly or with one remedy (micro-batches with
// gradient accumulation, activation checkpointing, bf16 autocast, FSDP), which either fits or ends
// in a caught OutOfMemoryError whose step, phase, tag and op are kept for the diagnosis.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/dist/process_group.h"

namespace tb::suites::oom {

struct GptShape {
  int64_t vocab = 256, d_model = 64, layers = 4, heads = 4, seq = 64;
  int64_t batch = 32;  // sequences per step (the global batch: FSDP and DDP ranks take batch / world)
};

// How a run is changed to fit under the cap (the remedies of issue 18).
struct Remedy {
  std::string name = "baseline";
  int micro_batches = 1;    // the batch split into this many, gradients accumulated
  bool checkpoint = false;  // each TransformerBlock checkpointed (nn::checkpoint_blocks)
  bool autocast = false;    // forward and loss under bf16 autocast
  bool fsdp = false;        // fully_shard per TransformerBlock over the run's group
};
std::vector<Remedy> capacity_remedies();  // the four, in the order the tables list them

struct RunSpec {
  GptShape shape;
  Remedy remedy;
  int steps = 3;                 // step 0 warms up; the others are timed
  int64_t cap = 0;               // bytes; 0 = no cap
  bool keep_logits = false;      // the leak: every step's logits appended to a list
  bool sites_each_step = false;  // RunResult::sites_after_step (a memory snapshot per step)
  // Fragmentation: the sequence length of each step (empty: shape.seq every step; each <=
  // shape.seq), and whether a request over the cap may first return the cache to the system
  // (memory::set_release_cache; off models memory the allocator cannot give back).
  std::vector<int64_t> seq_per_step;
  bool release_cache = true;
  std::string snapshot_dir;                   // where an OOM writes its memory snapshot ("" = nowhere)
  bool ddp = false;                           // DistributedDataParallel over the group
  std::shared_ptr<dist::ProcessGroup> group;  // FSDP and DDP
  uint64_t seed = 0;
};

struct RunResult {
  std::string remedy;
  bool oom = false;
  int step = -1;       // the step (from 0) the OOM happened in
  std::string phase;   // forward | backward | optimizer.step (where in that step)
  std::string tag;     // the tag of the failed request
  std::string op;      // the op that asked ("" when none was running)
  std::string module;  // the module whose forward was running ("" when none)
  std::string reason;  // the allocator's: limit | fail_at | system | too_large
  int64_t requested = 0;
  int64_t limit = 0, allocated = 0, cached_free = 0, largest_free_block = 0;  // at the refusal
  nlohmann::json largest_live = nlohmann::json::array();  // [{bytes, tag, op, module}], largest first
  std::string snapshot_path;                              // the OOM's memory snapshot, if written
  std::string error;                                      // the OutOfMemoryError's text
  int64_t peak_bytes = 0;                      // the allocator's peak over the run (at the failure: before it)
  int64_t peak_before_first_step = 0;          // the peak up to step 0's optimizer.step
  double samples_per_s = 0;                    // over the timed steps (0 after an OOM)
  std::vector<int64_t> allocated_after_step;   // bytes held by live tensors after each step
  std::vector<int64_t> activation_after_step;  // of which tagged activation
  // With RunSpec::sites_each_step: after each step, live bytes by the site that made them
  // ("<op> in <module>"), from a memory snapshot.
  std::vector<std::map<std::string, int64_t>> sites_after_step;
  double seconds_to_oom = 0;  // from the run's start to the caught error
  nlohmann::json to_json() const;
  static RunResult from_json(const nlohmann::json& j);
};

// One training run (collective when the spec has a group: every rank calls it). Sets the cap on
// this process's CPU allocator for the run and removes it after; empties the cache first, so a
// run starts from the same allocator state whatever ran before it in the process.
RunResult train_run(const RunSpec& spec);

// The scenario's run folder files: the parent's config for its ranks, each rank's result.
nlohmann::json read_json(const std::string& path);
void write_json(const std::string& path, const nlohmann::json& j);

// Leaves this process's pid in <dir>/rank<R>.pid (the launcher's kill list, the orphan check).
void write_pid_file(const std::string& dir, int rank);

}  // namespace tb::suites::oom
