// Step directories of a checkpoint root (Note [Checkpoint directory] in training_state.h): names,
// staging, the atomic install and `latest`. Shared by the one-process save (training_state.cpp)
// and the sharded one (distributed.cpp), so both keep the same crash guarantees.
#pragma once
#include <cstdint>
#include <string>

namespace tb::checkpoint {

std::string step_name(int64_t step);  // "step-<N>"
// "step-<digits>" -> step, else -1. At most 18 digits, so every name is an int64_t.
int64_t parse_step_name(const std::string& s);
// The steps a save takes: those whose name parse_step_name reads back.
inline constexpr int64_t kMaxStep = 999'999'999'999'999'999;
// "" for a step a save can take, else why not (a negative step, or one whose name a load would refuse).
std::string step_error(int64_t step);
// 16 random hex digits.
std::string new_save_id();
void remove_tree_quietly(const std::string& p);
// Staging directories and temporary `latest` files left behind by a save that was killed: never
// named by `latest`, so removing them is safe (one writer per directory).
void remove_stale_staging(const std::string& dir);
// A new, empty staging directory `<dir>/.<name>.staging-<random>` (0755 less the umask).
std::string make_staging_dir(const std::string& dir, const std::string& name);
// The step directory name `<dir>/latest` holds (validated).
std::string read_latest_name(const std::string& dir);
// Moves the complete staging directory to `final_dir` (= dir/name) in one atomic step (an
// exchange when final_dir exists), then fsyncs `dir`.
void install_step_dir(const std::string& dir, const std::string& staging, const std::string& final_dir,
                      const std::string& name);
// Points `latest` at `name` atomically; keep_last > 0 then removes older step directories.
void commit_latest(const std::string& dir, const std::string& name, int64_t keep_last);

}  // namespace tb::checkpoint
