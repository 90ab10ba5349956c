// save_checkpoint / load_checkpoint: see Note [Checkpoint directory] in training_state.h.
#include "engine/checkpoint/training_state.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/step_dir.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"

namespace tb::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "trainbench.training_state";
constexpr int kVersion = 1;
NamedTensors load_tensors(const std::string& path, const std::string& save_id, const LoadOptions& options) {
  LoadedFile f = load_file(path, options);
  auto it = f.metadata.find("save_id");
  TB_CHECK(it != f.metadata.end() && it->second == save_id, "checkpoint.load", "'", path,
           "' does not belong to the same save as state.json (save_id ",
           it == f.metadata.end() ? "missing" : it->second, " vs ", save_id,
           "); the step directory was assembled from different saves");
  return std::move(f.tensors);
}

}  // namespace

nlohmann::json rng_state(const core::Generator& gen) { return {{"seed", gen.seed()}, {"offset", gen.offset()}}; }

void set_rng_state(core::Generator& gen, const nlohmann::json& state) {
  TB_CHECK(state.is_object() && state.contains("seed") && state.contains("offset") &&
               state["seed"].is_number_unsigned() && state["offset"].is_number_unsigned(),
           "checkpoint.rng", "expected {\"seed\": <uint64>, \"offset\": <uint64>}, got ", json_excerpt(state));
  gen.set_state(state["seed"].get<uint64_t>(), state["offset"].get<uint64_t>());
}

std::string latest_checkpoint(const std::string& dir) { return dir + "/" + read_latest_name(dir); }

void save_checkpoint(const std::string& dir, const TrainingState& state, int64_t keep_last) {
  const std::string bad_step = step_error(state.step);
  TB_CHECK(bad_step.empty(), "checkpoint.save", bad_step);
  TB_CHECK(keep_last >= 0, "checkpoint.save", "keep_last must be >= 0 (0 keeps all), got ", keep_last);
  make_dirs(dir);
  remove_stale_staging(dir);
  const std::string name = step_name(state.step);
  const std::string staging = make_staging_dir(dir, name);
  const std::string save_id = new_save_id();
  try {
    const std::map<std::string, std::string> meta = {{"save_id", save_id}, {"step", std::to_string(state.step)}};
    save_file(staging + "/model.safetensors", state.model, meta);
    save_file(staging + "/optimizer.safetensors", state.optimizer_tensors, meta);
    nlohmann::json j = {{"format", kFormat},
                        {"version", kVersion},
                        {"save_id", save_id},
                        {"step", state.step},
                        {"epoch", state.epoch},
                        {"optimizer", state.optimizer},
                        {"scheduler", state.scheduler},
                        {"scaler", state.scaler},
                        {"rng", state.rng},
                        {"config", state.config},
                        {"extra", state.extra}};
    const std::string non_finite = non_finite_number_path(j, "state");
    TB_CHECK(
        non_finite.empty(), "checkpoint.save", "the training state's ", non_finite.substr(6),
        " is NaN or infinite, which JSON cannot hold (it would load as null); store it as a string, e.g. \"inf\", ",
        "as the LR schedulers' state dicts do");
    std::string text;
    try {
      text = j.dump(1);
    } catch (const nlohmann::json::exception& e) {
      throw core::Error("checkpoint.save",
                        "the training state's JSON cannot be written (invalid UTF-8?): " + std::string(e.what()));
    }
    // The loader refuses deeper JSON: never write a checkpoint that cannot be loaded.
    TB_CHECK(json_depth(text) <= kMaxJsonDepth, "checkpoint.save", "the training state's JSON (optimizer, scheduler, ",
             "scaler, rng, config or extra) nests deeper than ", kMaxJsonDepth - 1, " levels; flatten it");
    write_file_atomic(staging + "/state.json", text);
    install_step_dir(dir, staging, dir + "/" + name, name);
  } catch (...) {
    remove_tree_quietly(staging);
    throw;
  }
  // Only now, with step-<N> complete and durable, does `latest` move.
  commit_latest(dir, name, keep_last);
}

TrainingState load_checkpoint(const std::string& dir_or_step_dir, const LoadOptions& options) {
  const char* op = "checkpoint.load";
  std::error_code ec;
  TB_CHECK(fs::is_directory(dir_or_step_dir, ec), op, "'", dir_or_step_dir,
           "' is not a directory (pass the checkpoint root or a step directory)");
  std::string step_dir = dir_or_step_dir;
  if (fs::exists(dir_or_step_dir + "/latest", ec)) step_dir = latest_checkpoint(dir_or_step_dir);
  else
    TB_CHECK(fs::exists(dir_or_step_dir + "/state.json", ec), op, "'", dir_or_step_dir,
             "' holds no checkpoint: neither a 'latest' file nor a 'state.json' (no save has completed there)");

  const std::string state_path = step_dir + "/state.json";
  const nlohmann::json j = parse_untrusted_json(read_small_file(state_path, size_t(1) << 30), op, state_path);
  auto need = [&](const char* key) -> const nlohmann::json& {
    TB_CHECK(j.is_object() && j.contains(key), op, "'", state_path, "' lacks \"", key, "\"");
    return j.at(key);
  };
  TB_CHECK(need("format") == kFormat, op, "'", state_path, "' is not a trainbench training state (format ",
           json_excerpt(need("format")), ")");
  TB_CHECK(need("version") == kVersion, op, "'", state_path, "' has version ", json_excerpt(need("version")),
           "; this build reads version ", kVersion);
  // An unsigned value past INT64_MAX would wrap to a negative step.
  auto int64_field = [&](const char* key) {
    const nlohmann::json& v = need(key);
    return v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(INT64_MAX));
  };
  TB_CHECK(need("save_id").is_string() && int64_field("step") && int64_field("epoch"), op, "'", state_path,
           "': save_id must be a string, step and epoch 64-bit integers");

  TrainingState s;
  const std::string save_id = need("save_id").get<std::string>();
  s.step = need("step").get<int64_t>();
  s.epoch = need("epoch").get<int64_t>();
  s.optimizer = need("optimizer");
  s.scheduler = need("scheduler");
  s.scaler = need("scaler");
  s.rng = need("rng");
  s.config = need("config");
  s.extra = need("extra");
  s.model = load_tensors(step_dir + "/model.safetensors", save_id, options);
  s.optimizer_tensors = load_tensors(step_dir + "/optimizer.safetensors", save_id, options);
  return s;
}

}  // namespace tb::checkpoint
