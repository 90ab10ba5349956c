// The checkpoint suite's correctness cases: bit-exact round trips of every dtype and layout, the
// file read back (and written) by an independent Python reader, training-state round trips,
// and the API's errors. The crash and fuzz cases are in checkpoint_crash.cpp, the benchmark in
// checkpoint_bench.cpp.
#include "suites/checkpoint/checkpoint_suite.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/checkpoint/atomic_file.h"
#include "engine/nn/linear.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"
#include "harness/project_python.h"
#include "harness/subprocess.h"
#include "suites/checkpoint/checkpoint_util.h"

namespace tb::suites {

namespace ckpt {

namespace fs = std::filesystem;
using checkpoint::NamedTensors;

TempDir::TempDir(bool in_memory) {
  const char* env = std::getenv("TMPDIR");
  std::string base = env && *env ? env : "/tmp";
  if (in_memory && ::access("/dev/shm", W_OK) == 0) base = "/dev/shm";
  std::string tmpl = base + "/trainbench-ckpt-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw Failed("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const size_t n = size_t(c.numel()) * c.itemsize();
  return n ? std::string(static_cast<const char*>(c.data()), n) : std::string();
}

std::string bit_diff(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) return std::string("dtype ") + core::name(a.dtype()) + " vs " + core::name(b.dtype());
  if (a.sizes() != b.sizes()) return "shape " + core::to_string(a.sizes()) + " vs " + core::to_string(b.sizes());
  const std::string x = bytes_of(a), y = bytes_of(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) return "bytes differ first at byte " + std::to_string(i);
  return "";
}

std::string named_diff(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return std::to_string(a.size()) + " tensors vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first)
      return "name #" + std::to_string(i) + ": '" + a[i].first + "' vs '" + b[i].first + "'";
    const std::string d = bit_diff(a[i].second, b[i].second);
    if (!d.empty()) return "tensor '" + a[i].first + "': " + d;
  }
  return "";
}

std::string state_diff(const checkpoint::TrainingState& a, const checkpoint::TrainingState& b) {
  if (a.step != b.step || a.epoch != b.epoch) return "step/epoch differ";
  std::string d = named_diff(a.model, b.model);
  if (!d.empty()) return "model: " + d;
  d = named_diff(a.optimizer_tensors, b.optimizer_tensors);
  if (!d.empty()) return "optimizer tensors: " + d;
  if (a.optimizer != b.optimizer) return "optimizer JSON differs";
  if (a.scheduler != b.scheduler || a.scaler != b.scaler || a.rng != b.rng) return "scheduler/scaler/rng JSON differs";
  if (a.config != b.config || a.extra != b.extra) return "config/extra JSON differs";
  return "";
}

namespace {

// Every dtype, 0-dim and zero-size tensors, IEEE specials, and non-contiguous layouts.
NamedTensors sample_tensors(uint64_t seed) {
  core::Generator gen(seed);
  NamedTensors out;
  for (DType t : core::kAllDTypes) {
    Tensor x;
    if (core::is_floating(t)) x = randn({3, 5}, DType::Float32, &gen).to(t);
    else if (t == DType::Bool) x = randint(0, 2, {3, 5}, DType::Int64, &gen).to(DType::Bool);
    else x = randint(-100000, 100000, {3, 5}, t, &gen);
    out.emplace_back(std::string("dense.") + core::name(t), x);
  }
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {std::nan(""), inf, -inf, -0.0, 1e-45, 3.4e38, 1e-300};
  out.emplace_back("specials.f64", from_vector(specials, {7}, DType::Float64));
  out.emplace_back("specials.f32", from_vector(specials, {7}, DType::Float32));
  out.emplace_back("specials.bf16", from_vector(specials, {7}, DType::BFloat16));
  out.emplace_back("specials.f16", from_vector(specials, {7}, DType::Float16));
  out.emplace_back("scalar.f64", scalar_tensor(-2.5, DType::Float64));
  out.emplace_back("scalar.bool", scalar_tensor(1, DType::Bool));
  out.emplace_back("scalar.i32", scalar_tensor(-7, DType::Int32));
  out.emplace_back("empty.f32", empty({0, 4}, DType::Float32));
  out.emplace_back("empty.i64", empty({2, 0, 3}, DType::Int64));
  out.emplace_back("strided.transpose", randn({4, 6}, DType::Float32, &gen).t());
  out.emplace_back("strided.step", randn({10}, DType::Float64, &gen).slice(0, 1, 9, 3));
  out.emplace_back("strided.expand", randn({1, 3}, DType::Float32, &gen).expand({4, 3}));
  out.emplace_back("strided.narrow.i32", randint(-9, 9, {5, 5}, DType::Int32, &gen).narrow(1, 2, 2));
  out.emplace_back("unicode/名前 ✓", randn({2}, DType::BFloat16, &gen));
  return out;
}

void roundtrip_case(harness::Record& r) {
  TempDir dir;
  const std::string path = dir / "a.safetensors";
  const NamedTensors ts = sample_tensors(17);
  const std::map<std::string, std::string> meta = {{"purpose", "round trip"}, {"unicode", "naïve ✓"}};
  checkpoint::save_file(path, ts, meta);
  checkpoint::save_file(path, ts, meta);  // overwriting is the same atomic path

  // The layout itself: header length, 8-byte aligned data, no trailing bytes.
  const std::string raw = checkpoint::read_small_file(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  size_t data_bytes = 0;
  for (const auto& [name, t] : ts) data_bytes += size_t(t.numel()) * t.itemsize();
  expect((8 + n) % 8 == 0, "data section does not start 8-byte aligned");
  expect(raw.size() == 8 + n + data_bytes,
         "file is " + std::to_string(raw.size()) + " bytes, expected " + std::to_string(8 + n + data_bytes));

  const checkpoint::LoadedFile f = checkpoint::load_file(path);
  const std::string d = named_diff(ts, f.tensors);
  expect(d.empty(), "round trip: " + d);
  expect(f.metadata == meta, "metadata differs after the round trip");

  // Cast on load: floating tensors become float64 exactly as Tensor::to gives, others unchanged.
  checkpoint::LoadOptions opt;
  opt.dtype = DType::Float64;
  const checkpoint::LoadedFile g = checkpoint::load_file(path, opt);
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& want = core::is_floating(ts[i].second.dtype()) ? ts[i].second.to(DType::Float64) : ts[i].second;
    const std::string e = bit_diff(want, g.tensors[i].second);
    expect(e.empty(), "cast to float64, '" + ts[i].first + "': " + e);
  }
  // Only the file remains: no temporary left behind by the two saves.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  expect(entries == 1, std::to_string(entries) + " entries in the directory after two saves; temporaries left behind");
  r.metrics["tensors"] = ts.size();
  r.metrics["file_bytes"] = raw.size();
  r.tolerances["bits"] = "exact";
}

// The project's Python (harness/project_python.h), or "" (the case is skipped).
std::string venv_python() {
  const auto py = harness::project_python();
  return py ? py->path : "";
}

std::string script_path() {
  return (fs::path(TB_SOURCE_DIR) / "suites" / "checkpoint" / "read_safetensors.py").string();
}

nlohmann::json run_python(const std::string& py, const std::string& mode, const std::string& file) {
  harness::SubprocessSpec spec;
  spec.argv = {py, script_path(), mode, file};
  spec.output = harness::SubprocessSpec::Output::Merge;  // its error messages beside its output
  const std::string cmd = harness::shell_join(spec.argv);
  const harness::SubprocessResult run = harness::run_subprocess(spec);
  expect(run.started(), "cannot start " + cmd + ": " + run.describe());
  const std::string& out = run.out;
  expect(run.ok(), "the Python reader failed (" + cmd + "): " + out.substr(0, 2000));
  try {
    return nlohmann::json::parse(out);
  } catch (const nlohmann::json::exception& e) {
    throw Failed("the Python reader printed no JSON: " + out.substr(0, 2000));
  }
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) s += digits[c >> 4], s += digits[c & 15];
  return s;
}

void python_read_case(harness::Record& r) {
  const std::string py = venv_python();
  if (py.empty()) {
    r.status = harness::Status::Skip;
    r.message = "no project Python (TRAINBENCH_VENV or TRAINBENCH_PYTHON): the independent Python reader cannot run";
    return;
  }
  TempDir dir;
  const std::string path = dir / "ours.safetensors";
  const NamedTensors ts = sample_tensors(23);
  checkpoint::save_file(path, ts, {{"who", "engine"}});
  const nlohmann::json j = run_python(py, "read", path);
  expect(j["data_start"].get<uint64_t>() % 8 == 0, "the Python reader finds the data section unaligned");
  expect(j["metadata"] == nlohmann::json{{"who", "engine"}}, "metadata seen by Python: " + j["metadata"].dump());
  expect(j["tensors"].size() == ts.size(), "Python sees " + std::to_string(j["tensors"].size()) + " tensors");
  for (const auto& [name, t] : ts) {
    expect(j["tensors"].contains(name), "Python does not see tensor '" + name + "'");
    const nlohmann::json& e = j["tensors"][name];
    expect(e["dtype"] == checkpoint::format_dtype_name(t.dtype()),
           "'" + name + "': Python reads dtype " + e["dtype"].dump());
    expect(e["shape"] == nlohmann::json(t.sizes()), "'" + name + "': Python reads shape " + e["shape"].dump());
    const std::string bytes = bytes_of(t);
    expect(e["hex"] == hex(bytes), "'" + name + "': Python reads different bytes");
    // Three independent computations of XXH64: Python's from the spec, libxxhash's here, the file's.
    const std::string ours = checkpoint::checksum_hex(bytes.data(), bytes.size());
    expect(e["xxh64"] == ours, "'" + name + "': XXH64 from Python " + e["xxh64"].dump() + " vs libxxhash " + ours);
    expect(e["stored_checksum"] == ours,
           "'" + name + "': stored checksum " + e["stored_checksum"].dump() + " vs " + ours);
  }
  r.metrics["tensors_compared"] = ts.size();
  r.tolerances["bits"] = "exact";
}

void python_write_case(harness::Record& r) {
  const std::string py = venv_python();
  if (py.empty()) {
    r.status = harness::Status::Skip;
    r.message = "no project Python (TRAINBENCH_VENV or TRAINBENCH_PYTHON): the independent Python writer cannot run";
    return;
  }
  TempDir dir;
  const std::string path = dir / "numpy.safetensors";
  const nlohmann::json want = run_python(py, "write", path);
  const checkpoint::LoadedFile f = checkpoint::load_file(path);
  expect(f.tensors.size() == want.size(),
         "loaded " + std::to_string(f.tensors.size()) + " tensors, the writer wrote " + std::to_string(want.size()));
  expect(f.metadata == std::map<std::string, std::string>{{"writer", "numpy"}}, "metadata differs");
  for (const auto& [name, t] : f.tensors) {
    expect(want.contains(name), "unexpected tensor '" + name + "'");
    expect(want[name]["dtype"] == checkpoint::format_dtype_name(t.dtype()),
           "'" + name + "': dtype " + core::name(t.dtype()));
    expect(want[name]["shape"] == nlohmann::json(t.sizes()), "'" + name + "': shape " + core::to_string(t.sizes()));
    expect(want[name]["hex"] == hex(bytes_of(t)), "'" + name + "': bytes differ from what numpy wrote");
  }
  r.metrics["tensors_compared"] = f.tensors.size();
  r.tolerances["bits"] = "exact";
}

checkpoint::TrainingState make_state(int64_t step, uint64_t seed) {
  core::Generator gen(seed);
  checkpoint::TrainingState s;
  nn::Linear lin(8, 4);
  for (const auto& [name, t] : lin.state_dict()) s.model.emplace_back(name, randn(t.sizes(), t.dtype(), &gen));
  s.model.emplace_back("buffer.steps", randint(0, 1000, {3}, DType::Int64, &gen));
  for (const auto& [name, t] : s.model)
    if (core::is_floating(t.dtype())) {
      s.optimizer_tensors.emplace_back("state." + name + ".exp_avg", randn(t.sizes(), DType::Float32, &gen));
      s.optimizer_tensors.emplace_back("state." + name + ".exp_avg_sq", rand(t.sizes(), DType::Float32, &gen));
    }
  s.optimizer = {{"param_groups", {{{"lr", 1e-3 * double(seed)}, {"betas", {0.9, 0.999}}, {"params", {0, 1}}}}}};
  s.scheduler = {{"last_epoch", step}, {"base_lrs", {1e-3}}};
  s.scaler = {{"scale", 65536.0}, {"growth_tracker", int64_t(seed % 7)}};
  gen.reserve(step);
  s.rng = {{"default", checkpoint::rng_state(gen)}};
  s.step = step;
  s.epoch = step / 10;
  s.config = {{"model", "linear"}, {"seed", seed}};
  s.extra = {{"note", "ünïcode"}};
  return s;
}

void training_state_case(harness::Record& r) {
  TempDir dir;
  const std::string root = dir / "run";  // created by the first save
  const auto s10 = make_state(10, 1), s20 = make_state(20, 2), s30 = make_state(30, 3);
  checkpoint::save_checkpoint(root, s10, 2);
  checkpoint::save_checkpoint(root, s20, 2);
  checkpoint::save_checkpoint(root, s30, 2);
  expect(!fs::exists(root + "/step-10"), "keep_last=2 left step-10 behind");
  expect(fs::exists(root + "/step-20") && fs::exists(root + "/step-30"), "keep_last=2 removed a step it should keep");
  expect(checkpoint::latest_checkpoint(root) == root + "/step-30",
         "latest names " + checkpoint::latest_checkpoint(root));
  std::string d = state_diff(s30, checkpoint::load_checkpoint(root));
  expect(d.empty(), "load(root) vs the last save: " + d);
  d = state_diff(s20, checkpoint::load_checkpoint(root + "/step-20"));
  expect(d.empty(), "load(step-20): " + d);

  // The same step saved again with other values replaces it whole (the directory exchange).
  const auto s30b = make_state(30, 4);
  checkpoint::save_checkpoint(root, s30b);
  d = state_diff(s30b, checkpoint::load_checkpoint(root));
  expect(d.empty(), "re-saving step 30: " + d);

  // The RNG state restores a generator that continues the same stream.
  core::Generator g(0), h(0);
  checkpoint::set_rng_state(g, checkpoint::load_checkpoint(root).rng["default"]);
  checkpoint::set_rng_state(h, s30b.rng["default"]);
  expect(g.seed() == 4 && g.offset() == h.offset() && h.offset() > 0, "restored generator state differs");
  expect(bit_diff(rand({8}, DType::Float32, &g), rand({8}, DType::Float32, &h)).empty(),
         "restored generator draws differ");

  // Cast on load applies to both tensor files.
  checkpoint::LoadOptions opt;
  opt.dtype = DType::BFloat16;
  const auto cast = checkpoint::load_checkpoint(root, opt);
  expect(cast.model[0].second.dtype() == DType::BFloat16 && cast.model.back().second.dtype() == DType::Int64,
         "LoadOptions.dtype was not applied to floating tensors only");
  r.metrics["saves"] = 4;
}

// Expects f() to throw core::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(const std::string& what, std::initializer_list<std::string> parts, F&& f, int& checked) {
  ++checked;
  try {
    f();
  } catch (const core::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      expect(msg.find(p) != std::string::npos, what + ": message lacks '" + p + "': " + msg);
    return;
  }
  throw Failed(what + ": no core::Error was thrown");
}

void errors_case(harness::Record& r) {
  TempDir dir;
  int n = 0;
  const Tensor x = ones({2, 2});
  const std::string good = dir / "good.safetensors";
  checkpoint::save_file(good, {{"x", x}});
  expect_error(
      "missing file", {dir / "nope.safetensors", "cannot open"},
      [&] { checkpoint::load_file(dir / "nope.safetensors"); }, n);
  expect_error(
      "directory", {"is a directory"}, [&] { checkpoint::load_file(dir.path()); }, n);
  expect_error(
      "empty name", {"empty name"},
      [&] {
        checkpoint::save_file(dir / "e", {{"", x}});
      },
      n);
  expect_error(
      "duplicate", {"two tensors are named 'x'"},
      [&] {
        checkpoint::save_file(dir / "e", {{"x", x}, {"x", x}});
      },
      n);
  expect_error(
      "reserved name", {"__metadata__"},
      [&] {
        checkpoint::save_file(dir / "e", {{"__metadata__", x}});
      },
      n);
  expect_error(
      "reserved metadata", {"checksum."},
      [&] {
        checkpoint::save_file(dir / "e", {{"x", x}}, {{"checksum.x", "0"}});
      },
      n);
  expect_error(
      "undefined tensor", {"'u' is undefined"},
      [&] {
        checkpoint::save_file(dir / "e", {{"u", Tensor()}});
      },
      n);
  expect_error(
      "no such directory", {"cannot create a temporary file", "no/such"},
      [&] {
        checkpoint::save_file(dir / "no/such/f.safetensors", {{"x", x}});
      },
      n);
  expect_error(
      "integer cast", {"floating dtype"},
      [&] {
        checkpoint::LoadOptions o;
        o.dtype = DType::Int64;
        checkpoint::load_file(good, o);
      },
      n);
  expect_error(
      "not a directory", {"is not a directory"}, [&] { checkpoint::load_checkpoint(dir / "missing"); }, n);
  fs::create_directories(dir / "empty");
  expect_error(
      "empty checkpoint dir", {"holds no checkpoint"}, [&] { checkpoint::load_checkpoint(dir / "empty"); }, n);

  const std::string root = dir / "run";
  checkpoint::save_checkpoint(root, make_state(1, 1));
  checkpoint::save_checkpoint(root, make_state(2, 2));
  checkpoint::write_file_atomic(root + "/latest", "../../etc\n");
  expect_error(
      "corrupt latest", {"not a step directory name"}, [&] { checkpoint::load_checkpoint(root); }, n);
  checkpoint::write_file_atomic(root + "/latest", "step-7\n");
  expect_error(
      "latest names a missing step", {"step-7/state.json", "cannot open"}, [&] { checkpoint::load_checkpoint(root); },
      n);
  checkpoint::write_file_atomic(root + "/latest", "step-2\n");
  fs::copy_file(root + "/step-1/model.safetensors", root + "/step-2/model.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error(
      "files of two saves", {"does not belong to the same save"}, [&] { checkpoint::load_checkpoint(root); }, n);
  checkpoint::write_file_atomic(root + "/step-1/state.json", "{\"format\": ");
  expect_error(
      "broken state.json", {"state.json", "not valid JSON"}, [&] { checkpoint::load_checkpoint(root + "/step-1"); }, n);

  // A full disk, simulated by RLIMIT_FSIZE in a child: the write error surfaces as core::Error,
  // the old file is untouched and no temporary is left.
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A forked child has only this thread: an OpenMP team inherited from the parent would wait
    // forever at its barrier (seen under `trainbench all`), so the child computes single-threaded.
    tb::set_num_threads(1);
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {65536, 65536};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      checkpoint::save_file(good, {{"big", zeros({1 << 18})}});
    } catch (const core::Error& e) {
      ::_exit(std::string(e.what()).find("untouched") != std::string::npos ? 0 : 2);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "disk-full child: status " + std::to_string(status) +
             " (1: no error, 2: message lacks 'untouched', 3: not core::Error)");
  ++n;
  expect(named_diff(checkpoint::load_file(good).tensors, {{"x", x}}).empty(),
         "the old file changed after a failed save");
  for (const auto& e : fs::directory_iterator(dir.path()))
    expect(e.path().filename().string().find(".tmp-") == std::string::npos,
           "temporary left behind: " + e.path().string());

  // Malformed files: the message names the file, the tensor and the problem.
  const std::string bad = dir / "bad.safetensors";
  const std::string raw = checkpoint::read_small_file(good);
  uint64_t hl;
  std::memcpy(&hl, raw.data(), 8);
  const std::string header = raw.substr(8, size_t(hl)), data = raw.substr(8 + size_t(hl));
  auto write_bad = [&](const std::string& h, const std::string& d) {
    std::string f(8, '\0');
    const uint64_t len = h.size();
    std::memcpy(f.data(), &len, 8);
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << f << h << d;
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string h = header;
    const size_t at = h.find(from);
    expect(at != std::string::npos, "test setup: '" + from + "' not in the header " + h);
    return h.replace(at, from.size(), to);
  };
  write_bad(header, data.substr(0, 5));
  expect_error(
      "truncated data", {bad, "'x'", "reach past the data section"}, [&] { checkpoint::load_file(bad); }, n);
  write_bad(header.substr(0, 10), "");
  expect_error(
      "truncated header", {bad, "not valid JSON"}, [&] { checkpoint::load_file(bad); }, n);
  write_bad(edit("\"F32\"", "\"F8\""), data);
  expect_error(
      "unknown dtype", {bad, "'x'", "unsupported dtype \"F8\""}, [&] { checkpoint::load_file(bad); }, n);
  write_bad(edit("[2,2]", "[1000000000000,1000000000000]"), data);
  expect_error(
      "absurd shape", {bad, "'x'", "overflows"}, [&] { checkpoint::load_file(bad); }, n);
  write_bad(edit("[2,2]", "[-2,-2]"), data);
  expect_error(
      "negative shape", {bad, "'x'", "not a non-negative integer"}, [&] { checkpoint::load_file(bad); }, n);
  std::string flipped = data;
  flipped[3] ^= 1;
  write_bad(header, flipped);
  expect_error(
      "corrupt data", {bad, "'x'", "checksum mismatch"}, [&] { checkpoint::load_file(bad); }, n);
  write_bad(header, data + "junk");
  expect_error(
      "trailing bytes", {bad, "4 bytes that no tensor describes"}, [&] { checkpoint::load_file(bad); }, n);
  {
    std::string f(8, '\0');
    const uint64_t len = uint64_t(1) << 40;
    std::memcpy(f.data(), &len, 8);
    std::ofstream(bad, std::ios::binary | std::ios::trunc) << f << header;
  }
  expect_error(
      "huge header length", {bad, "exceeds the limit"}, [&] { checkpoint::load_file(bad); }, n);
  // The data is not verified when asked not to be.
  write_bad(header, flipped);
  checkpoint::LoadOptions unchecked;
  unchecked.verify_checksums = false;
  expect(bytes_of(checkpoint::load_file(bad, unchecked).tensors[0].second) == flipped, "verify_checksums=false");
  r.metrics["errors_checked"] = n;
}

}  // namespace
}  // namespace ckpt

std::vector<harness::TestCase> checkpoint_tests() {
  using ckpt::make_case;
  return {
      make_case("safetensors/roundtrip/all_dtypes_layouts", ckpt::roundtrip_case),
      make_case("safetensors/python_reader/reads_engine_file", ckpt::python_read_case),
      make_case("safetensors/python_writer/engine_reads_numpy_file", ckpt::python_write_case),
      make_case("safetensors/errors/api", ckpt::errors_case),
      make_case("training_state/roundtrip/keep_last_resave_rng", ckpt::training_state_case),
      make_case("training_state/crash/kill9_during_save", ckpt::kill9_case),
      make_case("safetensors/fuzz/mutated_files", ckpt::fuzz_case),
      make_case("safetensors/hostile/deep_json_and_long_messages", ckpt::deep_json_case),
      make_case("safetensors/scaling/header_linear_in_tensors", ckpt::header_scaling_case),
      make_case("atomic/crash/killed_save_temporaries_cleaned", ckpt::killed_save_temporaries_case),
      make_case("training_state/permissions/umask_modes", ckpt::permissions_case),
  };
}

}  // namespace tb::suites
