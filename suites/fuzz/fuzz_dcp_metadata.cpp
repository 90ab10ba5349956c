// Fuzz target: tb::checkpoint::read_distributed_metadata, the reader of a distributed checkpoint's
// metadata.json (engine/checkpoint/distributed_metadata.cpp). The input replaces metadata.json of
// a step directory; reading must succeed or throw core::Error, and an accepted metadata's lookups
// must hold (every tensor found by its name, chunks tiling its rows).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/distributed.h"
#include "engine/core/error.h"
#include "suites/fuzz/fuzz_scratch.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

using nlohmann::json;

const std::string& step_dir() {
  static const std::string dir = [] {
    const std::string d = tb::fuzz::scratch_dir("tb_fuzz_dcp_");
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

json chunk(int64_t b, int64_t e, int writer, int blocks) {
  json bl = json::array();
  for (int i = 0; i < blocks; ++i) bl.push_back("0123456789abcdef");
  return {{"row_begin", b},
          {"row_end", e},
          {"writer", writer},
          {"file", "rank-" + std::to_string(writer) + ".safetensors"},
          {"key", "x@" + std::to_string(b)},
          {"checksum", "fedcba9876543210"},
          {"blocks", bl}};
}

// A valid metadata: a [5, 3] float32 tensor in two chunks, a 0-dim int64, an empty tensor.
json sample() {
  json groups = json::array();
  groups.push_back({{"lr", 0.1}, {"params", {0}}});
  const json state = {{"optimizer", {{"param_groups", groups}}}, {"extra", nullptr}};
  return {{"format", "trainbench.distributed_checkpoint"},
          {"version", 1},
          {"save_id", "00000000deadbeef"},
          {"step", 7},
          {"world_size", 2},
          {"layout", "fsdp/full_shard"},
          {"created", "2026-12-03T08:00:00Z"},
          {"block_bytes", 32},
          {"tensors",
           {{"model.w", {{"dtype", "F32"}, {"shape", {5, 3}}, {"chunks", {chunk(0, 3, 0, 2), chunk(3, 5, 1, 1)}}}},
            {"optim.w.step", {{"dtype", "I64"}, {"shape", json::array()}, {"chunks", {chunk(0, 1, 0, 1)}}}},
            {"model.e", {{"dtype", "BF16"}, {"shape", {0, 4}}, {"chunks", json::array()}}}}},
          {"state", state}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = step_dir();
  {
    FILE* f = std::fopen((dir + "/metadata.json").c_str(), "wb");
    if (!f) __builtin_trap();
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const tb::checkpoint::DistributedMetadata m = tb::checkpoint::read_distributed_metadata(dir);
    ++tb_fuzz_accepted;
    for (const tb::checkpoint::SavedTensor& t : m.tensors) {
      if (m.find(t.name) != &t) __builtin_trap();
      int64_t next = 0;
      for (const tb::checkpoint::SavedChunk& c : t.chunks) {
        if (c.row_begin != next || c.row_end <= c.row_begin) __builtin_trap();
        next = c.row_end;
      }
    }
  } catch (const tb::core::Error&) {
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  const json good = sample();
  out.push_back(good.dump(1));
  json j = good;
  j["tensors"]["model.w"]["chunks"][1]["row_begin"] = 2;  // overlapping chunks
  out.push_back(j.dump());
  j = good;
  j["tensors"]["model.w"]["chunks"][0]["file"] = "../../etc/passwd";
  out.push_back(j.dump());
  j = good;
  j["tensors"]["model.w"]["shape"] = {9223372036854775807LL, 9223372036854775807LL};
  out.push_back(j.dump());
  j = good;
  j["block_bytes"] = 1;  // block counts no longer match
  out.push_back(j.dump());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  out.push_back("{\"format\":\"trainbench.distributed_checkpoint\",\"state\":" + deep + "}");
}
