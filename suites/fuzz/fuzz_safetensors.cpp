// Fuzz target: tb::checkpoint::load_bytes, the safetensors loader, on hostile files. Every input
// must load or throw core::Error; a loaded file must describe exactly the bytes it holds.
// Each input is also loaded with its header length recomputed (up to the last '}'), so edits
// that change the header's size still reach the JSON parser.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/tensor/factories.h"

extern "C" {
size_t tb_fuzz_accepted = 0;
}

namespace {

void load(std::string_view bytes, bool verify) {
  tb::checkpoint::LoadOptions opt;
  opt.verify_checksums = verify;
  try {
    const tb::checkpoint::LoadedFile f = tb::checkpoint::load_bytes(bytes, opt, "fuzz");
    size_t total = 0;
    for (const auto& [name, t] : f.tensors) total += size_t(t.numel()) * t.itemsize();
    uint64_t n;
    std::memcpy(&n, bytes.data(), 8);
    // The tensors tile the data section: their sizes add up to it exactly.
    if (total != bytes.size() - 8 - n) __builtin_trap();
    ++tb_fuzz_accepted;
  } catch (const tb::core::Error&) {
  }
}

std::string with_length(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string f(8, '\0');
  std::memcpy(f.data(), &n, 8);
  return f + header + data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  load(in, size % 2 == 0);
  if (size > 8) {
    const size_t close = in.find_last_of('}');
    if (close != std::string_view::npos && close >= 8) {
      const std::string header(in.substr(8, close - 7)), rest(in.substr(close + 1));
      const std::string fixed = with_length(header, rest);
      if (fixed != in) load(fixed, true);
    }
  }
  return 0;
}

extern "C" void tb_fuzz_seeds(std::vector<std::string>& out) {
  using namespace tb;
  core::Generator gen(7);
  const checkpoint::NamedTensors ts = {{"w", randn({3, 2}, DType::Float32, &gen)},
                                       {"b", randn({2}, DType::BFloat16, &gen)},
                                       {"h", randn({2, 1}, DType::Float16, &gen)},
                                       {"d", scalar_tensor(0.25, DType::Float64)},
                                       {"ids", randint(0, 9, {4}, DType::Int64, &gen)},
                                       {"i", randint(-3, 3, {2, 2}, DType::Int32, &gen)},
                                       {"mask", randint(0, 2, {3}, DType::Int64, &gen).to(DType::Bool)},
                                       {"empty", empty({0, 3}, DType::Float32)}};
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/tb_fuzz_seed_" + std::to_string(::getpid()) +
                           ".safetensors";
  auto saved = [&](const checkpoint::NamedTensors& t, const std::map<std::string, std::string>& meta) {
    checkpoint::save_file(path, t, meta);
    std::string s = checkpoint::read_small_file(path);
    std::remove(path.c_str());
    return s;
  };
  out.push_back(saved(ts, {{"format", "pt"}, {"note", "seed"}}));
  out.push_back(saved({ts[0]}, {}));
  out.push_back(saved({ts[6], ts[3]}, {{"k", "v"}}));
  out.push_back(saved({}, {}));
  // Files another writer makes: no checksums, no metadata, keys in any order.
  out.push_back(
      with_length("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"x\":\"y\"}}",
                  std::string(4, '\x01')));
  out.push_back(with_length(
      "{\"z\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[2,4]},\"y\":{\"shape\":[0],\"dtype\":\"I64\","
      "\"data_offsets\":[0,0]},\"x\":{\"data_offsets\":[0,2],\"shape\":[1],\"dtype\":\"BOOL\"}}  ",
      std::string("\x01\x00\x00\x3c", 4)));
  // Hostile ones: deep nesting in every field, a duplicate key, bad checksums, absurd sizes.
  const std::string deep = std::string(200, '[') + std::string(200, ']');
  out.push_back(with_length("{\"__metadata__\":{\"a\":" + deep + "}}", ""));
  out.push_back(with_length("{\"t\":{\"dtype\":\"F32\",\"shape\":" + deep + ",\"data_offsets\":[0,0]}}", ""));
  out.push_back(with_length("{\"t\":{\"dtype\":" + deep + ",\"shape\":[],\"data_offsets\":[0,4]}}", "abcd"));
  out.push_back(with_length("{\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":" + deep + "}}", "abcd"));
  out.push_back(with_length("{\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},\"t\":{}}", "abcd"));
  out.push_back(
      with_length("{\"t\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":"
                  "{\"checksum.t\":\"00000000000000zz\",\"checksum.u\":\"0000000000000000\"}}",
                  "abcd"));
  out.push_back(
      with_length("{\"t\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", ""));
}
