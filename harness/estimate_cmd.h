// `trainbench estimate`: the analytic per-rank memory estimate (engine/dist/fsdp/estimate.h) of a
// model config or a parameter count, for DDP or an FSDP strategy, as a table on stdout and,
// with --json, a result file with one `estimate` record (docs/results.md).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tb::harness {

struct EstimateOptions {
  std::string params;                                                                      // "7e9", "1.5B", "125M"
  std::string model;                                                                       // gpt | mlp
  int64_t layers = 0, hidden = 0, heads = 0, vocab = 0, seq = 0, mlp_in = 0, mlp_out = 0;  // 0: the model's default
  int64_t units = 0;                                                                       // --params: FSDP units
  int64_t batch = 0;
  int64_t activation_bytes = 0;
  int world = 1;
  std::string strategy = "full_shard";
  int shard_group = 0;
  std::string param_dtype = "fp32";
  std::string reduce_dtype;  // default: the param dtype
  std::string optimizer = "adamw";
  bool no_prefetch = false;
  bool bucket_view = false;
  bool allocator_blocks = false;
  std::string json;
};

// Adds the subcommand and its options to `app`.
CLI::App* add_estimate_command(CLI::App& app, EstimateOptions& o);

// Runs it: 0, or throws UsageError (runner.h) for input the estimator refuses.
int run_estimate(const CLI::App& sub, const EstimateOptions& o, const std::string& command);

}  // namespace tb::harness
