// `trainbench checkpoint inspect|consolidate`. See checkpoint_cmd.h; the formats are in
// docs/checkpoint.md.
#include "harness/checkpoint_cmd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/distributed.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/training_state.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"
#include "harness/output_file.h"
#include "harness/runner.h"

namespace tb::harness {
namespace {

namespace fs = std::filesystem;
using checkpoint::DistributedMetadata;

// The metadata key of a consolidated file that carries the checkpoint's state, step and layout
// (read back by read_distributed_metadata / load_distributed of that file).
constexpr const char* kStateKey = "trainbench.state";

// What inspect shows, the same for the three kinds of input.
struct ChunkRow {
  int64_t row_begin = 0, row_end = 0, bytes = 0;
  std::string file, key;
  int writer = -1;       // -1: one process wrote everything
  std::string checksum;  // empty: none stored
  std::string status;    // after --verify: "ok", else the problem
};
struct TensorRow {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  int64_t bytes = 0;
  std::vector<ChunkRow> chunks;
};
struct FileRow {
  std::string name;
  int64_t bytes = -1;  // -1: missing
  std::string problem;
};
struct Listing {
  std::string kind;  // distributed | single | safetensors
  std::string path, step_dir;
  std::string layout, created, save_id;
  int world_size = 0;
  std::optional<int64_t> step, epoch;
  int64_t block_bytes = 0;
  std::vector<TensorRow> tensors;
  std::vector<FileRow> files;
  std::vector<std::string> problems;  // anything that makes the checkpoint unloadable
};

int64_t tensor_bytes(DType dtype, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n * int64_t(core::itemsize(dtype));
}

// Bytes of rows [b, e) of a tensor (a 0-dim tensor is one whole chunk).
int64_t rows_bytes(const TensorRow& t, int64_t b, int64_t e) {
  if (t.shape.empty() || t.shape[0] == 0) return t.bytes;
  return t.bytes / t.shape[0] * (e - b);
}

void add_file(Listing& l, const std::string& dir, const std::string& name) {
  for (const FileRow& f : l.files)
    if (f.name == name) return;
  FileRow f{name};
  std::error_code ec;
  const fs::path path = fs::path(dir) / name;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) f.problem = "missing";
  else if (ec) f.problem = ec.message();
  else if (!fs::is_regular_file(st)) f.problem = "not a regular file";  // a FIFO would block its reader
  else {
    const auto size = fs::file_size(path, ec);
    if (ec) f.problem = ec.message();
    else f.bytes = int64_t(size);
  }
  if (!f.problem.empty()) l.problems.push_back(name + ": " + f.problem);
  l.files.push_back(std::move(f));
}

// Integer `key` of checkpoint JSON, which must lie in [lo, hi]. nlohmann's get<> does not check:
// get<int64_t>() makes 18446744073709551615 -1 and get<int>() makes 4294967298 2. Absent or not an
// integer: nullopt (these fields are informative: shown as absent). Out of range: nullopt and a
// problem naming `where`, the field and its value (so exit 1), never a wrapped number.
std::optional<int64_t> int_field(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                                 const std::string& where, Listing& l) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  // nlohmann stores every non-negative integer as unsigned: compare in that type when it is one.
  const bool fits = it->is_number_unsigned()
                        ? it->get<uint64_t>() <= uint64_t(hi) && (lo <= 0 || it->get<uint64_t>() >= uint64_t(lo))
                        : it->get<int64_t>() >= lo && it->get<int64_t>() <= hi;
  if (fits) return it->get<int64_t>();
  l.problems.push_back(where + ": \"" + key + "\" is " + it->dump() + ", " +
                       (lo == INT64_MIN && hi == INT64_MAX
                            ? std::string("too large for a 64-bit signed integer")
                            : "outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
  return std::nullopt;
}

Listing from_distributed(const DistributedMetadata& meta) {
  Listing l;
  l.kind = "distributed";
  l.step_dir = meta.step_dir;
  l.layout = meta.layout;
  l.created = meta.created;
  l.save_id = meta.save_id;
  l.world_size = meta.world_size;
  l.step = meta.step;
  l.block_bytes = meta.block_bytes;
  for (const checkpoint::SavedTensor& s : meta.tensors) {
    TensorRow t{s.name, s.dtype, s.shape, tensor_bytes(s.dtype, s.shape), {}};
    for (const checkpoint::SavedChunk& c : s.chunks) {
      ChunkRow r{c.row_begin, c.row_end, rows_bytes(t, c.row_begin, c.row_end), c.file, c.key, c.writer,
                 c.checksum,  ""};
      t.chunks.push_back(std::move(r));
    }
    l.tensors.push_back(std::move(t));
  }
  for (const TensorRow& t : l.tensors)
    for (const ChunkRow& c : t.chunks) add_file(l, l.step_dir, c.file);
  add_file(l, l.step_dir, "metadata.json");
  return l;
}

// Each tensor of a safetensors file as one whole chunk.
void add_safetensors(Listing& l, const checkpoint::FileIndex& index, const std::string& file) {
  for (const checkpoint::IndexEntry& e : index.tensors) {
    TensorRow t{e.name, e.dtype, e.shape, int64_t(e.nbytes), {}};
    const int64_t rows = e.shape.empty() ? 1 : e.shape[0];
    t.chunks.push_back({0, rows, int64_t(e.nbytes), file, e.name, -1, e.checksum.value_or(""), ""});
    l.tensors.push_back(std::move(t));
  }
}

// A one-process checkpoint (Note [Checkpoint directory] in training_state.h).
Listing from_single(const std::string& step_dir) {
  const char* op = "checkpoint inspect";
  Listing l;
  l.kind = "single";
  l.step_dir = step_dir;
  l.world_size = 1;
  const std::string state_path = step_dir + "/state.json";
  const nlohmann::json j = checkpoint::parse_untrusted_json(checkpoint::read_small_file(state_path, size_t(1) << 30),
                                                            op, state_path);
  TB_CHECK(j.is_object(), op, "'", state_path, "' is not a JSON object");
  if (j.contains("save_id") && j["save_id"].is_string()) l.save_id = j["save_id"].get<std::string>();
  l.step = int_field(j, "step", INT64_MIN, INT64_MAX, "state.json", l);
  l.epoch = int_field(j, "epoch", INT64_MIN, INT64_MAX, "state.json", l);
  l.layout = "single";
  for (const char* name : {"model.safetensors", "optimizer.safetensors"}) {
    add_file(l, step_dir, name);
    if (!l.files.back().problem.empty()) continue;
    const checkpoint::FileIndex index = checkpoint::read_index(step_dir + "/" + name);
    auto id = index.metadata.find("save_id");
    if (id == index.metadata.end() || id->second != l.save_id)
      l.problems.push_back(std::string(name) + ": belongs to another save than state.json (save_id " +
                           (id == index.metadata.end() ? "missing" : checkpoint::text_excerpt(id->second, 20)) +
                           " vs " + l.save_id + ")");
    add_safetensors(l, index, name);
  }
  add_file(l, step_dir, "state.json");
  return l;
}

// One safetensors file (e.g. `checkpoint consolidate`'s output).
Listing from_file(const std::string& path) {
  Listing l;
  l.kind = "safetensors";
  l.step_dir = fs::path(path).parent_path().string();
  const checkpoint::FileIndex index = checkpoint::read_index(path);
  if (auto it = index.metadata.find(kStateKey); it != index.metadata.end()) {
    // Informative only: a malformed value is shown as absent, the tensors still are.
    const nlohmann::json s = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (s.is_object()) {
      if (s.contains("layout") && s["layout"].is_string()) l.layout = s["layout"].get<std::string>();
      if (s.contains("save_id") && s["save_id"].is_string()) l.save_id = s["save_id"].get<std::string>();
      // Out of range: a problem (exit 1), not a wrapped number.
      const std::string where = fs::path(path).filename().string() + ": __metadata__ \"" + kStateKey + "\"";
      l.step = int_field(s, "step", INT64_MIN, INT64_MAX, where, l);
      l.world_size = int(int_field(s, "world_size", 0, INT_MAX, where, l).value_or(0));  // 0: not shown
    }
  }
  const std::string name = fs::path(path).filename().string();
  add_safetensors(l, index, name);
  add_file(l, l.step_dir.empty() ? "." : l.step_dir, name);
  return l;
}

// Reads every byte of each chunk of a listing built from safetensors files and compares its
// XXH64 with the stored one (the distributed kind goes through verify_distributed).
void verify_files(Listing& l) {
  struct Fds : std::map<std::string, int> {
    ~Fds() {
      for (auto& [path, fd] : *this)
        if (fd >= 0) ::close(fd);
    }
  } fds;  // closed however the loop ends
  std::map<std::string, checkpoint::FileIndex> indexes;
  std::map<std::string, std::string> unopened;  // why a file could not be opened
  for (TensorRow& t : l.tensors)
    for (ChunkRow& c : t.chunks) {
      const std::string path = (fs::path(l.step_dir.empty() ? "." : l.step_dir) / c.file).string();
      if (!fds.count(path)) fds[path] = checkpoint::open_regular_file(path, unopened[path]);  // a FIFO: no hang
      const int fd = fds[path];
      if (fd < 0) {
        c.status = c.file + ": " + unopened[path];
        continue;
      }
      auto idx = indexes.find(path);  // one header parse per file, not per tensor
      if (idx == indexes.end()) idx = indexes.emplace(path, checkpoint::read_index(path)).first;
      const checkpoint::IndexEntry* e = idx->second.find(c.key);
      if (!e) {
        c.status = "not in " + c.file;
        continue;
      }
      std::vector<char> buf(e->nbytes);
      try {
        checkpoint::pread_exact(fd, e->offset, buf.data(), buf.size(), path);
      } catch (const core::Error& err) {
        c.status = err.detail();
        continue;
      }
      if (c.checksum.empty()) c.status = "unchecked (no checksum stored)";
      else {
        const std::string got = checkpoint::checksum_hex(buf.data(), buf.size());
        c.status = got == c.checksum ? "ok" : "checksum mismatch (stored " + c.checksum + ", read " + got + ")";
      }
    }
}

void verify_distributed(Listing& l, const DistributedMetadata& meta) {
  std::map<std::string, TensorRow*> by_name;
  for (TensorRow& t : l.tensors) by_name[t.name] = &t;
  for (const checkpoint::ChunkCheck& c : checkpoint::verify_distributed(meta))
    if (auto it = by_name.find(c.tensor); it != by_name.end())
      for (ChunkRow& r : it->second->chunks)
        if (r.row_begin == c.row_begin && r.row_end == c.row_end) r.status = c.ok ? "ok" : c.problem;
  for (TensorRow& t : l.tensors)
    for (ChunkRow& r : t.chunks)
      if (r.status.empty()) r.status = "not checked (the verifier did not report this chunk)";
}

bool chunk_unchecked(const ChunkRow& c) { return c.status.rfind("unchecked", 0) == 0; }
bool chunk_ok(const ChunkRow& c) { return c.status == "ok" || chunk_unchecked(c); }

std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string shape_text(const Shape& s) { return core::to_string(s); }

nlohmann::json to_json(const Listing& l, bool verified) {
  nlohmann::json j = {{"path", l.path},       {"kind", l.kind},       {"step_dir", l.step_dir},    {"layout", l.layout},
                      {"created", l.created}, {"save_id", l.save_id}, {"world_size", l.world_size}};
  j["step"] = l.step ? nlohmann::json(*l.step) : nlohmann::json();
  if (l.epoch) j["epoch"] = *l.epoch;
  if (l.block_bytes) j["block_bytes"] = l.block_bytes;
  int64_t data = 0, chunks = 0, bad = 0, unchecked = 0, file_bytes = 0;
  j["tensors"] = nlohmann::json::array();
  for (const TensorRow& t : l.tensors) {
    nlohmann::json jt = {{"name", t.name},
                         {"dtype", checkpoint::format_dtype_name(t.dtype)},
                         {"shape", t.shape},
                         {"bytes", t.bytes},
                         {"chunks", nlohmann::json::array()}};
    for (const ChunkRow& c : t.chunks) {
      nlohmann::json jc = {{"rows", {c.row_begin, c.row_end}},
                           {"bytes", c.bytes},
                           {"file", c.file},
                           {"key", c.key},
                           {"checksum", c.checksum}};
      jc["writer"] = c.writer >= 0 ? nlohmann::json(c.writer) : nlohmann::json();
      if (verified) jc["status"] = c.status;
      bad += verified && !chunk_ok(c);
      unchecked += verified && chunk_unchecked(c);
      jt["chunks"].push_back(std::move(jc));
      ++chunks;
    }
    data += t.bytes;
    j["tensors"].push_back(std::move(jt));
  }
  j["files"] = nlohmann::json::array();
  for (const FileRow& f : l.files) {
    j["files"].push_back({{"name", f.name}, {"bytes", f.bytes >= 0 ? nlohmann::json(f.bytes) : nlohmann::json()}});
    if (!f.problem.empty()) j["files"].back()["problem"] = f.problem;
    file_bytes += std::max<int64_t>(f.bytes, 0);
  }
  j["totals"] = {{"tensors", l.tensors.size()}, {"chunks", chunks}, {"data_bytes", data}, {"file_bytes", file_bytes}};
  if (verified) {
    j["totals"]["bad_chunks"] = bad;
    j["totals"]["unchecked_chunks"] = unchecked;  // files without stored checksums
  }
  j["problems"] = l.problems;
  return j;
}

void print_table(std::ostream& os, const Listing& l, bool verified) {
  const char* what = l.kind == "distributed" ? "distributed checkpoint"
                     : l.kind == "single"    ? "one-process checkpoint"
                                             : "safetensors file";
  os << what << ' ' << (l.kind == "safetensors" ? l.path : l.step_dir) << '\n';
  std::vector<std::string> who;
  if (!l.layout.empty()) who.push_back("layout " + l.layout);
  if (l.world_size) who.push_back("world size " + std::to_string(l.world_size));
  if (l.step) who.push_back("step " + std::to_string(*l.step));
  if (l.epoch) who.push_back("epoch " + std::to_string(*l.epoch));
  if (!l.created.empty()) who.push_back("created " + l.created);
  if (!l.save_id.empty()) who.push_back("save id " + l.save_id);
  if (l.block_bytes) who.push_back("checksum blocks of " + human_bytes(l.block_bytes));
  for (size_t i = 0; i < who.size(); ++i) os << (i ? ", " : "  ") << who[i] << (i + 1 == who.size() ? "\n" : "");
  size_t width = 6;
  for (const TensorRow& t : l.tensors) width = std::max(width, t.name.size());
  os << '\n'
     << std::left << std::setw(int(width)) << "tensor"
     << "  " << std::setw(5) << "dtype"
     << "  " << std::setw(18) << "shape" << std::right << std::setw(11) << "bytes"
     << "  chunks: rows, file (writer)" << (verified ? ", checksum" : "") << '\n';
  int64_t data = 0, chunks = 0, bad = 0, unchecked = 0;
  for (const TensorRow& t : l.tensors) {
    os << std::left << std::setw(int(width)) << t.name << "  " << std::setw(5) << checkpoint::format_dtype_name(t.dtype)
       << "  " << std::setw(18) << shape_text(t.shape) << std::right << std::setw(11) << human_bytes(t.bytes) << "  "
       << t.chunks.size() << '\n';
    for (const ChunkRow& c : t.chunks) {
      os << "    rows [" << c.row_begin << ", " << c.row_end << ")  " << c.file;
      if (c.writer >= 0) os << " (rank " << c.writer << ')';
      os << "  " << human_bytes(c.bytes);
      if (verified) os << "  " << (chunk_ok(c) ? c.status : "BAD: " + c.status);
      os << '\n';
      bad += verified && !chunk_ok(c);
      unchecked += verified && chunk_unchecked(c);
      ++chunks;
    }
    data += t.bytes;
  }
  os << "\nfiles\n";
  int64_t file_bytes = 0;
  for (const FileRow& f : l.files) {
    os << "  " << std::left << std::setw(24) << f.name << std::right
       << (f.bytes >= 0 ? std::to_string(f.bytes) + " bytes (" + human_bytes(f.bytes) + ")" : f.problem) << '\n';
    file_bytes += std::max<int64_t>(f.bytes, 0);
  }
  os << "\ntotal: " << l.tensors.size() << " tensors, " << chunks << " chunks, " << data << " bytes of data ("
     << human_bytes(data) << ") in " << l.files.size() << " files of " << file_bytes << " bytes\n";
  if (verified) {
    os << "checksums: " << chunks - bad - unchecked << " of " << chunks << " chunks ok";
    if (unchecked) os << ", " << unchecked << " unchecked (no checksum stored)";
    if (bad) os << ", " << bad << " BAD";
    os << '\n';
  }
}

// The input must exist and be a directory or a file; a typo (or a FIFO, a device) is a usage
// error, not a broken checkpoint.
void check_exists(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw UsageError("no such file or directory: '" + path + "'");
  if (!fs::is_directory(st) && !fs::is_regular_file(st))
    throw UsageError("'" + path + "' is not a regular file or a directory (a checkpoint is one or the other)");
}

int inspect(const CheckpointOptions& o) {
  check_exists(o.path);
  std::error_code ec;
  Listing l;
  std::optional<DistributedMetadata> meta;
  if (fs::is_regular_file(o.path, ec)) {
    l = from_file(o.path);
  } else if (checkpoint::is_distributed_checkpoint(o.path)) {
    meta = checkpoint::read_distributed_metadata(o.path);
    l = from_distributed(*meta);
  } else {
    // A one-process checkpoint: its root (with `latest`) or a step directory (with state.json).
    std::string step_dir = o.path;
    if (fs::exists(o.path + "/latest", ec)) step_dir = checkpoint::latest_checkpoint(o.path);
    TB_CHECK(fs::exists(step_dir + "/state.json", ec), "checkpoint inspect", "'", o.path,
             "' holds no checkpoint: no metadata.json (distributed), no state.json (one process) and no `latest`");
    l = from_single(step_dir);
  }
  l.path = o.path;
  if (o.verify) {
    if (meta) verify_distributed(l, *meta);
    else verify_files(l);
  }
  if (o.json) std::cout << to_json(l, o.verify).dump(1) << '\n';
  else print_table(std::cout, l, o.verify);
  int bad = 0;
  for (const TensorRow& t : l.tensors)
    for (const ChunkRow& c : t.chunks) bad += o.verify && !chunk_ok(c);
  for (const std::string& p : l.problems) std::cerr << "trainbench: checkpoint inspect: " << p << '\n';
  if (bad) std::cerr << "trainbench: checkpoint inspect: " << bad << " chunks failed verification\n";
  return bad || !l.problems.empty() ? 1 : 0;
}

int consolidate(const CheckpointOptions& o) {
  const char* op = "checkpoint consolidate";
  check_exists(o.path);
  try {
    check_output_path(o.out);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("OUT: ") + e.what());
  }
  std::error_code ec;
  TB_CHECK(!fs::is_regular_file(o.path, ec), op, "'", o.path, "' already is one safetensors file");
  if (!checkpoint::is_distributed_checkpoint(o.path)) {
    // A `latest` that cannot be read (a FIFO, garbage) says so, rather than "one-process".
    if (fs::exists(o.path + "/latest", ec)) checkpoint::latest_checkpoint(o.path);
    const bool single = fs::exists(o.path + "/latest", ec) || fs::exists(o.path + "/state.json", ec);
    TB_CHECK(false, op, "'", o.path, "' ",
             single ? "is a one-process checkpoint: its model.safetensors already is one safetensors file"
                    : "holds no distributed checkpoint (no metadata.json, no `latest`)");
  }
  const DistributedMetadata meta = checkpoint::read_distributed_metadata(o.path);
  int64_t total = 0;
  for (const checkpoint::SavedTensor& t : meta.tensors) total += tensor_bytes(t.dtype, t.shape);
  // Progress for checkpoints that take more than a moment: one line a second at most.
  const bool progress = !o.quiet && total >= (int64_t(64) << 20);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto last = start;
  checkpoint::NamedTensors all;
  all.reserve(meta.tensors.size());
  int64_t done = 0;
  DistributedMetadata one = meta;  // one tensor at a time, for the progress lines
  for (size_t i = 0; i < meta.tensors.size(); ++i) {
    one.tensors = {meta.tensors[i]};
    checkpoint::NamedTensors got = checkpoint::read_distributed_full(one);
    TB_CHECK(got.size() == 1, op, "read_distributed_full returned ", got.size(), " tensors for '", meta.tensors[i].name,
             "'");
    all.push_back(std::move(got[0]));
    done += tensor_bytes(meta.tensors[i].dtype, meta.tensors[i].shape);
    const auto now = Clock::now();
    if (progress && (now - last > std::chrono::seconds(1) || i + 1 == meta.tensors.size())) {
      last = now;
      std::fprintf(stderr, "consolidate: read %zu/%zu tensors, %s of %s (%.1f s)\n", i + 1, meta.tensors.size(),
                   human_bytes(done).c_str(), human_bytes(total).c_str(),
                   std::chrono::duration<double>(now - start).count());
    }
  }
  const nlohmann::json state = {{"step", meta.step},       {"layout", meta.layout},   {"world_size", meta.world_size},
                                {"save_id", meta.save_id}, {"created", meta.created}, {"state", meta.state}};
  if (progress) std::fprintf(stderr, "consolidate: writing %s\n", o.out.c_str());
  checkpoint::save_file(o.out, all, {{kStateKey, state.dump()}});
  std::cout << "consolidated " << all.size() << " tensors (" << total << " bytes) of step " << meta.step << " from "
            << meta.step_dir << " into " << o.out << '\n';
  return 0;
}

}  // namespace

CLI::App* add_checkpoint_command(CLI::App& app, CheckpointOptions& o) {
  CLI::App* cmd = app.add_subcommand("checkpoint",
                                     "Inspect a checkpoint or consolidate a distributed one into one file");
  cmd->require_subcommand(1);
  CLI::App* inspect = cmd->add_subcommand(
      "inspect",
      "Who wrote a checkpoint (layout, world size, step, time, save id), every tensor with its chunks (rows, file, "
      "writer rank), file sizes and totals; PATH is a distributed or one-process checkpoint (root or step "
      "directory) or a safetensors file. Exit 1 when it is incomplete or, with --verify, a chunk is corrupt");
  inspect->add_option("path", o.path, "Checkpoint root, step directory or safetensors file")
      ->required()
      ->type_name("PATH");
  inspect->add_flag("--verify", o.verify, "Read every byte and check each chunk's checksum");
  inspect->add_flag("--json", o.json, "Print JSON instead of the table");
  CLI::App* consolidate = cmd->add_subcommand(
      "consolidate",
      "Write a distributed checkpoint as one safetensors file: every tensor whole, the training state in the "
      "\"trainbench.state\" metadata; load_distributed (any world size) and any safetensors reader open it. "
      "Holds the whole checkpoint in memory");
  consolidate->add_option("path", o.path, "Checkpoint root (follows `latest`) or step directory")
      ->required()
      ->type_name("DIR");
  consolidate->add_option("out", o.out, "The safetensors file to write (atomically)")->required()->type_name("OUT");
  consolidate->add_flag("--quiet", o.quiet, "No progress lines on stderr");
  return cmd;
}

int run_checkpoint(const CLI::App& sub, const CheckpointOptions& o) {
  const bool is_inspect = sub.got_subcommand("inspect");
  try {
    return is_inspect ? inspect(o) : consolidate(o);
  } catch (const core::Error& e) {
    // A broken, incomplete or hostile checkpoint: the reason, not a crash. The command's name
    // once: errors raised by the command itself already start with it.
    const std::string cmd = std::string("checkpoint ") + (is_inspect ? "inspect" : "consolidate") + ": ";
    const std::string what = e.what();
    std::cerr << "trainbench: " << (what.starts_with(cmd) ? "" : cmd) << what << '\n';
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "trainbench: checkpoint: out of memory reading '" << o.path << "'\n";
    return 1;
  }
}

}  // namespace tb::harness
