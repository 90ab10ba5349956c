// The checkpoint suite's adversarial cases: a saver killed with SIGKILL at random moments (the
// checkpoint on disk must always load and equal a state that was saved), and the loader fed
// thousands of mutated and hostile files (each must load correctly or throw core::Error).
// Seeds: TB_CHECKPOINT_SEED overrides the fixed default; the seed is in the record's metrics.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "engine/core/env.h"
#include "engine/checkpoint/atomic_file.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "suites/checkpoint/checkpoint_util.h"

namespace tb::suites::ckpt {

namespace {

namespace fs = std::filesystem;
using checkpoint::NamedTensors;

uint64_t suite_seed() { return core::env_uint64("TB_CHECKPOINT_SEED", 20240601ull); }

checkpoint::TrainingState crash_state(int64_t step, uint64_t seed) {
  core::Generator gen(seed);
  checkpoint::TrainingState s;
  for (int i = 0; i < 4; ++i)
    s.model.emplace_back("layer" + std::to_string(i) + ".weight", randn({128, 128}, DType::Float32, &gen));
  s.model.emplace_back("layer0.bias", randn({128}, DType::BFloat16, &gen));
  s.optimizer_tensors.emplace_back("momentum.0", randn({128, 128}, DType::Float32, &gen));
  s.optimizer = {{"lr", 0.1 * double(seed)}};
  s.rng = {{"default", {{"seed", seed}, {"offset", uint64_t(step)}}}};
  s.step = step;
  s.epoch = int64_t(seed);
  s.config = {{"seed", seed}};
  return s;
}

void kill9_phase(const std::string& root, const checkpoint::TrainingState& a, const checkpoint::TrainingState& b,
                 int64_t keep, int kills, std::mt19937_64& rng, nlohmann::json& counts) {
  checkpoint::save_checkpoint(root, a, keep);  // a checkpoint exists before the first kill
  // The length of one save sets the range of kill moments: up to two saves in.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) checkpoint::save_checkpoint(root, i % 2 ? a : b, keep);
  const double save_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 4;
  int seen_a = 0, seen_b = 0;
  // `kills` kills, and more (up to 4 times as many, over a widening range) while they have all
  // left the same state: on a loaded machine a save can take longer than the whole delay range
  // measured above (ci/main once saw every kill land before the child's first commit).
  int k = 0;
  for (; k < kills || ((seen_a == 0 || seen_b == 0) && k < 4 * kills); ++k) {
    int ready[2];
    expect(::pipe(ready) == 0, std::string("pipe failed: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid == 0) {
      // A forked child has only this thread: an OpenMP team inherited from the parent would wait
      // forever at its barrier (seen under `trainbench all`), so the child computes single-threaded.
      tb::set_num_threads(1);
      ::close(ready[0]);
      const char go = 1;
      if (::write(ready[1], &go, 1) != 1) ::_exit(4);  // the delay below counts from here
      try {
        for (uint64_t i = uint64_t(k);; ++i) checkpoint::save_checkpoint(root, i % 2 ? b : a, keep);
      } catch (...) {
        ::_exit(3);
      }
    }
    expect(pid > 0, std::string("fork failed: ") + std::strerror(errno));
    ::close(ready[1]);
    char go = 0;
    const bool started = ::read(ready[0], &go, 1) == 1;
    ::close(ready[0]);
    expect(started, "the saving child did not start");
    // Past `kills`, the range doubles every 8 kills (to 32 saves): the saves are slower than measured.
    const double span = 2 * save_us * (k < kills ? 1 : double(1 << std::min(4, 1 + (k - kills) / 8)));
    std::uniform_real_distribution<double> delay(0, span);
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(delay(rng))));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "the saving child ended on its own (status " + std::to_string(status) + "): a save threw");
    checkpoint::TrainingState got;
    try {
      got = checkpoint::load_checkpoint(root);
    } catch (const core::Error& e) {
      throw Failed("after kill " + std::to_string(k) + ": the checkpoint does not load: " + e.what());
    }
    const std::string da = state_diff(a, got), db = state_diff(b, got);
    expect(da.empty() || db.empty(),
           "after kill " + std::to_string(k) + ": the loaded state is neither saved state (" + da + "; " + db + ")");
    (da.empty() ? seen_a : seen_b)++;
  }
  counts["kills"] = k;
  counts["loaded_state_a"] = seen_a;
  counts["loaded_state_b"] = seen_b;
  counts["save_us"] = save_us;
}

}  // namespace

void kill9_case(harness::Record& r) {
  const uint64_t seed = suite_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  nlohmann::json same, diff;
  // Same step twice (the step directory is exchanged in place), then two steps with pruning.
  kill9_phase(dir / "same_step", crash_state(5, 11), crash_state(5, 12), 0, 16, rng, same);
  kill9_phase(dir / "two_steps", crash_state(5, 11), crash_state(6, 12), 1, 16, rng, diff);
  const int a = same["loaded_state_a"].get<int>() + diff["loaded_state_a"].get<int>();
  const int b = same["loaded_state_b"].get<int>() + diff["loaded_state_b"].get<int>();
  // Not a property of correctness but of the test: kills must land at different points.
  expect(a > 0 && b > 0, "every kill left the same state; the kill moments do not cover the saves");
  // The next save after all those kills cleans what the killed ones left behind.
  checkpoint::save_checkpoint(dir / "two_steps", crash_state(7, 13), 1);
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir / "two_steps"))
    if (e.path().filename().string()[0] == '.') ++leftovers;
  expect(leftovers == 0, std::to_string(leftovers) + " staging or temporary entries survive the next save");
  r.metrics["seed"] = seed;
  r.metrics["same_step"] = same;
  r.metrics["two_steps_keep_last_1"] = diff;
}

namespace {

std::string make_file(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

struct Parsed {
  nlohmann::json header;
  std::string data;
};

// The hostile edits of the header's JSON; each returns the new header.
nlohmann::json json_edit(nlohmann::json h, std::mt19937_64& rng, uint64_t data_size) {
  std::vector<std::string> names;
  for (auto& [k, v] : h.items())
    if (k != "__metadata__") names.push_back(k);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  const std::string& t = names[pick(names.size())];
  const std::string& u = names[pick(names.size())];
  const nlohmann::json absurd[] = {{1000000000000LL, 1000000000000LL},
                                   {4294967296LL, 4294967296LL},
                                   {-1, 3},
                                   {1.5},
                                   "abc",
                                   nullptr,
                                   {uint64_t(1) << 62, 8},
                                   std::vector<int>(65, 1),
                                   {0},
                                   {1},
                                   {2, 2},
                                   {uint64_t(-1)},
                                   {1e12, 1e12}};
  const nlohmann::json dtypes[] = {"F8",   "f32", "",     "U8",  "F32 ", 3,    nullptr,
                                   "BF16", "I64", "BOOL", "F32", "I32",  "F16"};
  switch (rng() % 14) {
    case 0: h[t]["data_offsets"][1] = data_size + 1 + rng() % 64; break;             // out of range
    case 1: h[t]["data_offsets"] = {uint64_t(-1) - rng() % 4, uint64_t(-1)}; break;  // huge
    case 2: h[t]["data_offsets"] = h[u]["data_offsets"]; break;                      // overlap or dup
    case 3: h[t]["data_offsets"][0] = -int64_t(rng() % 100) - 1; break;              // negative
    case 4: h[t]["shape"] = absurd[pick(std::size(absurd))]; break;
    case 5: h[t]["dtype"] = dtypes[pick(std::size(dtypes))]; break;
    case 6: h[t].erase(std::vector<std::string>{"dtype", "shape", "data_offsets"}[pick(3)]); break;
    case 7: h.erase(t); break;                                                                 // a gap
    case 8: h["extra"] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}; break;  // overlap
    case 9:
      h["__metadata__"]["checksum." + t] = std::vector<std::string>{"zz", "0123456789abcdef", "", "1"}[pick(4)];
      break;
    case 10: h["__metadata__"]["checksum.ghost"] = "0000000000000000"; break;
    case 11: h["__metadata__"][std::vector<std::string>{"k", "checksum." + t}[pick(2)]] = 17; break;
    case 12: h["__metadata__"].erase("checksum." + t); break;  // unchecked but valid
    case 13: h[t]["data_offsets"] = {h[t]["data_offsets"][0], h[t]["data_offsets"][1], 0}; break;
  }
  return h;
}

// One mutation of `base` (a valid file); `kind` is its category for the record.
std::string mutate(const std::string& base, const Parsed& p, std::mt19937_64& rng, std::string& kind) {
  std::string f = base;
  auto pos = [&](size_t n) { return size_t(rng() % std::max<size_t>(n, 1)); };
  const uint64_t hlen = base.size() - 8 - p.data.size();
  switch (rng() % 10) {
    case 0: {
      kind = "bit_flips";
      for (int i = 0, n = 1 + int(rng() % 4); i < n; ++i) f[pos(f.size())] ^= char(1 << (rng() % 8));
      break;
    }
    case 1: {
      kind = "byte_overwrites";
      for (int i = 0, n = 1 + int(rng() % 8); i < n; ++i) f[pos(f.size())] = char(rng());
      break;
    }
    case 2: {
      kind = "truncations";
      f.resize(pos(f.size()));
      break;
    }
    case 3: {
      kind = "header_length_edits";
      const uint64_t choices[] = {
          0,           1,     hlen - 1, hlen + 1, f.size() - 8, f.size() - 7, uint64_t(1) << 63, ~uint64_t(0),
          100'000'001, rng(), hlen + 8, hlen - 8};
      const uint64_t n = choices[pos(std::size(choices))];
      std::memcpy(f.data(), &n, 8);
      break;
    }
    case 4:
    case 5:
    case 6: {
      kind = "json_edits";
      std::string h = json_edit(p.header, rng, p.data.size()).dump();
      f = make_file(h, p.data);
      break;
    }
    case 7: {
      kind = "hostile_headers";
      const std::string deep = std::string(200000, '[') + std::string(200000, ']');
      const std::string texts[] = {"",
                                   "{",
                                   "{}",
                                   "[]",
                                   "null",
                                   "\"x\"",
                                   "{\"a\":1}",
                                   "{\"a\":{}}",
                                   deep,
                                   "{\"__metadata__\":{},\"__metadata__\":{}}",
                                   std::string("{\"\xff\xfe\":{}}"),
                                   "{\"__metadata__\":[]}",
                                   "{\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
                                   std::string("{\0}", 3)};
      const std::string& h = texts[pos(std::size(texts))];
      f = make_file(h, rng() % 2 ? p.data : std::string());
      break;
    }
    case 8: {
      kind = "data_edits";
      if (!p.data.empty()) f[base.size() - p.data.size() + pos(p.data.size())] ^= char(1 + rng() % 255);
      if (rng() % 2) f.append(1 + pos(16), '\0');  // or trailing garbage
      break;
    }
    case 9: {
      kind = "data_edit_without_checksum";
      nlohmann::json h = p.header;
      h["__metadata__"] = nlohmann::json::object();
      std::string d = p.data;
      if (!d.empty()) d[pos(d.size())] ^= char(1 + rng() % 255);
      f = make_file(h.dump(), d);
      break;
    }
  }
  return f;
}

// After a successful load: every tensor must be exactly the bytes its header entry describes,
// and match the stored checksum when there is one (checked here, independently of the loader).
std::string verify_loaded(const std::string& file, const checkpoint::LoadedFile& got, bool& all_checksummed) {
  uint64_t n;
  std::memcpy(&n, file.data(), 8);
  const nlohmann::json h = nlohmann::json::parse(file.substr(8, size_t(n)));
  const size_t data_start = 8 + size_t(n);
  size_t entries = 0;
  for (auto& [k, v] : h.items()) entries += k != "__metadata__";
  if (got.tensors.size() != entries)
    return "loaded " + std::to_string(got.tensors.size()) + " tensors of " + std::to_string(entries);
  all_checksummed = true;
  for (const auto& [name, t] : got.tensors) {
    if (!h.contains(name)) return "loaded a tensor '" + name + "' the header does not have";
    const nlohmann::json& e = h[name];
    if (e["dtype"] != checkpoint::format_dtype_name(t.dtype())) return "'" + name + "': dtype differs from the header";
    if (e["shape"] != nlohmann::json(t.sizes())) return "'" + name + "': shape differs from the header";
    const uint64_t b = e["data_offsets"][0], en = e["data_offsets"][1];
    const std::string bytes = bytes_of(t);
    if (bytes != file.substr(data_start + b, en - b)) return "'" + name + "': bytes differ from the file's range";
    const nlohmann::json meta = h.value("__metadata__", nlohmann::json::object());
    if (meta.contains("checksum." + name)) {
      std::string stored = meta["checksum." + name].get<std::string>();  // hex digits in either case
      for (char& c : stored) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (stored != checkpoint::checksum_hex(bytes.data(), bytes.size()))
        return "'" + name + "': checksum mismatch accepted";
    } else {
      all_checksummed = false;
    }
  }
  return "";
}

}  // namespace

void fuzz_case(harness::Record& r) {
  const uint64_t seed = suite_seed();
  std::mt19937_64 rng(seed);
  TempDir dir(/*in_memory=*/true);
  core::Generator gen(seed);
  const NamedTensors base_tensors = {{"w", randn({4, 3}, DType::Float32, &gen)},
                                     {"b", randn({3}, DType::BFloat16, &gen)},
                                     {"ids", randint(0, 50, {5}, DType::Int64, &gen)},
                                     {"mask", randint(0, 2, {6}, DType::Int64, &gen).to(DType::Bool)},
                                     {"s", scalar_tensor(0.5, DType::Float64)},
                                     {"z", empty({0, 2}, DType::Float16)},
                                     {"i", randint(-5, 5, {2, 2}, DType::Int32, &gen)}};
  const std::string base_path = dir / "base.safetensors";
  checkpoint::save_file(base_path, base_tensors, {{"k", "v"}});
  const std::string base = checkpoint::read_small_file(base_path);
  uint64_t hlen;
  std::memcpy(&hlen, base.data(), 8);
  const Parsed parsed{nlohmann::json::parse(base.substr(8, size_t(hlen))), base.substr(8 + size_t(hlen))};

  const int kMutations = 10000;
  const std::string path = dir / "mutant.safetensors";
  nlohmann::json by_kind = nlohmann::json::object();
  int loaded_checked = 0, loaded_unchecked = 0, rejected = 0;
  for (int i = 0; i < kMutations; ++i) {
    std::string kind;
    const std::string f = mutate(base, parsed, rng, kind);
    {
      // A new inode each time: ext4 flushes a file truncated and rewritten in place on close
      // (auto_da_alloc), which would make this loop wait on the disk.
      fs::remove(path);
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(f.data(), std::streamsize(f.size()));
      expect(bool(out), "cannot write " + path);
    }
    // Both entry points see the same bytes and must agree.
    std::string outcome, outcome_mem;
    try {
      const checkpoint::LoadedFile got = checkpoint::load_file(path);
      bool all = false;
      const std::string bad = verify_loaded(f, got, all);
      expect(bad.empty(), "mutation " + std::to_string(i) + " (" + kind + ") loaded wrongly: " + bad);
      outcome = all ? "loaded_checksum_verified" : "loaded_without_checksum";
      (all ? loaded_checked : loaded_unchecked)++;
    } catch (const core::Error&) {
      outcome = "rejected";
      ++rejected;
    }
    try {
      checkpoint::load_bytes(f);
      outcome_mem = outcome == "rejected" ? "loaded" : outcome;
    } catch (const core::Error&) {
      outcome_mem = "rejected";
    }
    expect(outcome == outcome_mem,
           "mutation " + std::to_string(i) + " (" + kind + "): load_file " + outcome + ", load_bytes " + outcome_mem);
    nlohmann::json& slot = by_kind[kind][outcome];
    slot = slot.is_null() ? 1 : slot.get<int>() + 1;
  }
  // A fuzz that never loads or never rejects tests nothing.
  expect(rejected > 0 && loaded_checked + loaded_unchecked > 0, "the mutations all had the same outcome");
  r.metrics["seed"] = seed;
  r.metrics["mutations"] = kMutations;
  r.metrics["rejected_with_error"] = rejected;
  r.metrics["loaded_checksum_verified"] = loaded_checked;
  r.metrics["loaded_without_checksum"] = loaded_unchecked;
  r.metrics["by_kind"] = by_kind;
}

}  // namespace tb::suites::ckpt
