// `trainbench profile --model mlp|gpt [--steps N] [--world W] [--autocast bfloat16] [--out DIR]`: N
// training steps of a reference model (the training suite's train_step/mlp and train_step/gpt, or
// with --autocast their /bfloat16 forms: same sizes, AdamW, batches from a DataLoader) under tb::profiler, after warm-up steps that are not recorded; at
// world W > 1 on W ranks through the launcher, with DDP. Writes DIR/trace.json (Chrome
// trace-event JSON: a process lane per rank, a thread lane per thread), DIR/profile.json (a
// result file: one record per model with the step breakdown) and prints the top ops by self time
// and by calls. docs/profiling.md.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tb::harness {

struct ProfileOptions {
  std::string model = "mlp";  // mlp | gpt
  int steps = 5;              // recorded steps
  int warmup = 2;             // steps before recording (oneDNN primitives, caches, DDP buckets)
  int world = 1;
  int workers = 0;                // DataLoader workers per rank
  int threads = 0;                // engine threads per rank; 0: the cores / ranks
  std::string autocast = "none";  // none | bfloat16: forward and loss under autocast (train_step/<model>/bfloat16)
  std::string backend = "mpi";
  std::string out = "profile";
  std::string json;  // default: <out>/profile.json
  int rows = 25;     // rows of the table by self time
  int timeout = 600;
  bool as_rank = false;  // hidden: the body of one launched rank
};

CLI::App* add_profile_command(CLI::App& app, ProfileOptions& o);

// Runs it (or, with as_rank, one rank's part): 0, or 1 when the ranks failed; UsageError for bad input.
int run_profile(const ProfileOptions& o, const std::string& command);

}  // namespace tb::harness
