// Fuzz target: tb::checkpoint::load_checkpoint's state.json parser. The input is written as
// the state.json of a step directory whose two tensor files are valid; loading must succeed or
// throw core::Error, and the restored RNG state must be accepted or refused with core::Error.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/training_state.h"
#include "engine/core/error.h"
#include "engine/tensor/factories.h"
#include "suites/fuzz/fuzz_scratch.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

tb::checkpoint::TrainingState sample_state() {
  using namespace tb;
  core::Generator gen(3);
  checkpoint::TrainingState s;
  s.model = {{"w", randn({2, 2}, DType::Float32, &gen)}, {"b", zeros({2}, DType::BFloat16)}};
  s.optimizer_tensors = {{"state.w.momentum", randn({2, 2}, DType::Float32, &gen)}};
  s.optimizer = {{"param_groups", {{{"lr", 0.1}, {"betas", {0.9, 0.999}}, {"params", {0, 1}}}}}};
  s.scheduler = {{"last_epoch", 3}, {"base_lrs", {0.1}}};
  s.scaler = {{"scale", 65536.0}, {"growth_tracker", 0}};
  s.rng = {{"default", checkpoint::rng_state(gen)}};
  s.step = 3;
  s.epoch = 1;
  s.config = {{"model", "mlp"}, {"nested", {{"a", {1, 2, {{"b", nullptr}}}}}}};
  s.extra = {{"note", "ünïcode"}, {"list", {true, false, 1.5e300, -7}}};
  return s;
}

// A step directory made once per process: its state.json is replaced by each input.
const std::string& step_dir() {
  static const std::string dir = [] {
    const std::string root = tb::fuzz::scratch_dir("tb_fuzz_state_");
    tb::checkpoint::save_checkpoint(root, sample_state());
    return tb::checkpoint::latest_checkpoint(root);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = step_dir();
  {
    FILE* f = std::fopen((dir + "/state.json").c_str(), "wb");
    if (!f) __builtin_trap();
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const tb::checkpoint::TrainingState s = tb::checkpoint::load_checkpoint(dir);
    ++tb_fuzz_accepted;
    if (s.rng.is_object() && s.rng.contains("default")) {
      tb::core::Generator g(0);
      tb::checkpoint::set_rng_state(g, s.rng["default"]);
    }
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  const std::string good = tb::checkpoint::read_small_file(step_dir() + "/state.json");
  out.push_back(good);
  // The same state with every field at an edge: deep (but legal) nesting, big numbers.
  nlohmann::json j = nlohmann::json::parse(good);
  nlohmann::json nest = 0;
  for (int i = 0; i < 100; ++i) nest = nlohmann::json::array({nest});
  j["extra"] = nest;
  j["config"] = {{"big", 18446744073709551615ull}, {"neg", -9223372036854775807LL}, {"f", 1e308}};
  out.push_back(j.dump());
  j["rng"] = {{"default", {{"seed", -1}, {"offset", "x"}}}};
  out.push_back(j.dump());
  // Hostile ones: nesting past any limit in `extra` and in `format`, a wrong save_id.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string h = good;
  h.replace(h.find("\"extra\":") + 8, 0, deep + ",\"extra2\":");
  out.push_back(h);
  out.push_back("{\"format\":" + deep + "}");
  j = nlohmann::json::parse(good);
  j["save_id"] = "0000000000000000";
  out.push_back(j.dump());
}
