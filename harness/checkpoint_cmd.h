// `trainbench checkpoint inspect|consolidate`: what a checkpoint holds (who wrote it, every tensor
// and its chunks, per-file sizes, checksum status with --verify) and a distributed checkpoint
// made into one safetensors file that any reader opens and load_distributed loads again.
// Formats: docs/checkpoint.md (engine/checkpoint/distributed.h, training_state.h, safetensors.h).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace tb::harness {

struct CheckpointOptions {
  std::string path;  // inspect: a root, a step directory or one safetensors file; consolidate: the input
  std::string out;   // consolidate: the safetensors file to write
  bool verify = false;
  bool json = false;
  bool quiet = false;  // consolidate: no progress on stderr
};

// Adds `checkpoint` with its two subcommands to `app`.
CLI::App* add_checkpoint_command(CLI::App& app, CheckpointOptions& o);

// Runs the chosen subcommand. Returns 0; 1 when the checkpoint is unreadable, incomplete or a
// chunk fails its checksum (the reason on stderr); throws UsageError (runner.h) for a path that
// does not exist or is neither a directory nor a regular file, or an output that cannot be written.
int run_checkpoint(const CLI::App& sub, const CheckpointOptions& o);

}  // namespace tb::harness
