// read_distributed_metadata: the validating reader of a distributed checkpoint's metadata.json
// (untrusted input: every field is checked; fuzzed by suites/fuzz/fuzz_dcp_metadata.cpp), and of
// a single safetensors file as one. Kept apart from distributed.cpp so that it needs no dist/.
#include <algorithm>
#include <filesystem>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/distributed.h"
#include "engine/checkpoint/distributed_format.h"
#include "engine/checkpoint/training_state.h"
#include "engine/checkpoint/untrusted_json.h"

namespace tb::checkpoint {

using namespace detail;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- metadata

int64_t get_int(const json& j, const char* key, const std::string& file, const std::string& where, int64_t lo = 0) {
  auto it = j.find(key);
  if (it == j.end() || !(it->is_number_integer() || it->is_number_unsigned()))
    bad_meta(file,
             where + "\"" + key + "\" must be an integer, got " + (it == j.end() ? "nothing" : json_excerpt(*it)));
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : it->get<int64_t>();
  if (v < lo) bad_meta(file, where + "\"" + key + "\" must be >= " + std::to_string(lo) + ", got " + json_excerpt(*it));
  return v;
}
std::string get_str(const json& j, const char* key, const std::string& file, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    bad_meta(file, where + "\"" + key + "\" must be a string, got " + (it == j.end() ? "nothing" : json_excerpt(*it)));
  return it->get<std::string>();
}
bool is_hex16(const std::string& s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
// "rank-<digits>.safetensors": nothing else may name a file (no path traversal from metadata).
bool is_rank_file(const std::string& f) {
  const std::string pre = "rank-", post = ".safetensors";
  if (f.size() <= pre.size() + post.size() || f.size() > 40 || f.rfind(pre, 0) != 0 ||
      f.compare(f.size() - post.size(), post.size(), post) != 0)
    return false;
  for (size_t i = pre.size(); i < f.size() - post.size(); ++i)
    if (f[i] < '0' || f[i] > '9') return false;
  return true;
}

int64_t checked_bytes(const Shape& shape, DType dt, const std::string& file, const std::string& name) {
  uint64_t n = core::itemsize(dt);
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > uint64_t(INT64_MAX) / uint64_t(d)))
      bad_meta(file, "tensor '" + text_excerpt(name) + "': shape " + shape_text(shape) + " overflows");
    n *= uint64_t(d);
  }
  // A row's bytes too (dims after 0): with a 0 in dim 0 the total is 0 but a row can overflow.
  uint64_t row = core::itemsize(dt);
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] > 0 && row > uint64_t(INT64_MAX) / uint64_t(shape[i]))
      bad_meta(file, "tensor '" + text_excerpt(name) + "': shape " + shape_text(shape) + " overflows");
    row *= uint64_t(shape[i]);
  }
  return int64_t(n);
}

DistributedMetadata parse_metadata(const std::string& text, const std::string& file, const std::string& step_dir) {
  const json j = parse_untrusted_json(text, "checkpoint.load", file);
  if (!j.is_object()) bad_meta(file, "metadata must be a JSON object");
  if (get_str(j, "format", file, "") != kFormat)
    bad_meta(file, "\"format\" is not \"" + std::string(kFormat) + "\": not a trainbench distributed checkpoint");
  const int64_t version = get_int(j, "version", file, "", 1);
  if (version > kVersion)
    bad_meta(file, "version " + std::to_string(version) + " is newer than this build reads (" +
                       std::to_string(kVersion) + "): update trainbench");
  DistributedMetadata m;
  m.step_dir = step_dir;
  m.save_id = get_str(j, "save_id", file, "");
  m.step = get_int(j, "step", file, "");
  m.world_size = int(std::min<int64_t>(get_int(j, "world_size", file, "", 1), 1 << 24));
  m.layout = get_str(j, "layout", file, "");
  m.created = get_str(j, "created", file, "");
  m.block_bytes = get_int(j, "block_bytes", file, "", 1);
  if (auto it = j.find("state"); it != j.end()) m.state = *it;
  auto ts = j.find("tensors");
  if (ts == j.end() || !ts->is_object()) bad_meta(file, "\"tensors\" must be an object");
  for (auto it = ts->begin(); it != ts->end(); ++it) {
    const std::string& name = it.key();
    const std::string where = "tensor '" + text_excerpt(name) + "': ";
    const json& t = it.value();
    if (!t.is_object()) bad_meta(file, where + "must be an object");
    SavedTensor st;
    st.name = name;
    const std::string dt = get_str(t, "dtype", file, where);
    auto d = dtype_from_format_name(dt);
    if (!d) bad_meta(file, where + "unknown dtype \"" + text_excerpt(dt) + "\"");
    st.dtype = *d;
    auto sh = t.find("shape");
    if (sh == t.end() || !sh->is_array() || sh->size() > kMaxDims)
      bad_meta(file, where + "\"shape\" must be an array of at most 64 sizes");
    for (const json& x : *sh) {
      if (!x.is_number_integer() && !x.is_number_unsigned())
        bad_meta(file, where + "\"shape\" holds " + json_excerpt(x));
      const int64_t v = x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : x.get<int64_t>();
      if (v < 0) bad_meta(file, where + "\"shape\" holds " + json_excerpt(x));
      st.shape.push_back(v);
    }
    checked_bytes(st.shape, st.dtype, file, name);
    const int64_t R = rows_of(st.shape), rb = row_bytes_of(st.shape, st.dtype);
    auto cs = t.find("chunks");
    if (cs == t.end() || !cs->is_array()) bad_meta(file, where + "\"chunks\" must be an array");
    for (const json& c : *cs) {
      if (!c.is_object()) bad_meta(file, where + "a chunk must be an object");
      SavedChunk ch;
      ch.row_begin = get_int(c, "row_begin", file, where);
      ch.row_end = get_int(c, "row_end", file, where);
      ch.writer = int(std::min<int64_t>(get_int(c, "writer", file, where), 1 << 24));
      ch.file = get_str(c, "file", file, where);
      ch.key = get_str(c, "key", file, where);
      ch.checksum = get_str(c, "checksum", file, where);
      if (!is_rank_file(ch.file))
        bad_meta(file, where + "chunk file \"" + text_excerpt(ch.file) + "\" is not rank-<N>.safetensors");
      if (!is_hex16(ch.checksum))
        bad_meta(file, where + "checksum \"" + text_excerpt(ch.checksum) + "\" is not 16 hex digits");
      if (ch.row_end <= ch.row_begin || ch.row_end > R)
        bad_meta(file, where + "chunk rows [" + std::to_string(ch.row_begin) + ", " + std::to_string(ch.row_end) +
                           ") do not lie inside [0, " + std::to_string(R) + ")");
      auto bl = c.find("blocks");
      if (bl == c.end() || !bl->is_array()) bad_meta(file, where + "a chunk's \"blocks\" must be an array");
      const int64_t bytes = (ch.row_end - ch.row_begin) * rb;
      const int64_t nblocks = bytes / m.block_bytes + (bytes % m.block_bytes != 0);  // no overflow
      if (int64_t(bl->size()) != nblocks)
        bad_meta(file, where + "a chunk of " + std::to_string(bytes) + " bytes needs " + std::to_string(nblocks) +
                           " block checksums, has " + std::to_string(bl->size()));
      for (const json& b : *bl) {
        if (!b.is_string() || !is_hex16(b.get<std::string>()))
          bad_meta(file, where + "block checksum " + json_excerpt(b) + " is not 16 hex digits");
        ch.block_checksums.push_back(b.get<std::string>());
      }
      st.chunks.push_back(std::move(ch));
    }
    std::sort(st.chunks.begin(), st.chunks.end(),
              [](const SavedChunk& a, const SavedChunk& b) { return a.row_begin < b.row_begin; });
    int64_t next = 0;
    for (const SavedChunk& c : st.chunks) {
      if (c.row_begin != next)
        bad_meta(file, where + (c.row_begin < next ? "chunks overlap at row " : "no chunk holds row ") +
                           std::to_string(std::min(next, c.row_begin)));
      next = c.row_end;
    }
    if (next != R && R > 0)
      bad_meta(file, where + "no chunk holds rows from " + std::to_string(next) + " to " + std::to_string(R));
    m.tensors.push_back(std::move(st));
  }
  std::sort(m.tensors.begin(), m.tensors.end(),
            [](const SavedTensor& a, const SavedTensor& b) { return a.name < b.name; });
  return m;
}

// A plain safetensors file as metadata: each tensor one whole chunk, no block checksums (the
// file's own per-tensor checksum is verified when a chunk is read whole).
DistributedMetadata file_metadata(const std::string& path) {
  const FileIndex idx = read_index(path);
  DistributedMetadata m;
  m.step_dir = path;
  m.world_size = 1;
  m.layout = "file";
  m.block_bytes = 0;
  if (auto it = idx.metadata.find(kStateKey); it != idx.metadata.end()) {
    const json s = parse_untrusted_json(it->second, "checkpoint.load", path);
    if (!s.is_object()) bad_meta(path, std::string("__metadata__ \"") + kStateKey + "\" must be a JSON object");
    if (s.contains("state")) m.state = s["state"];
    if (s.contains("step") && s["step"].is_number_integer()) {
      // get<int64_t>() would make 18446744073709551615 step -1.
      if (s["step"].is_number_unsigned() && s["step"].get<uint64_t>() > uint64_t(INT64_MAX))
        bad_meta(path, std::string("__metadata__ \"") + kStateKey + "\": \"step\" " + json_excerpt(s["step"]) +
                           " is too large for a 64-bit signed integer");
      m.step = s["step"].get<int64_t>();
    }
    if (s.contains("layout") && s["layout"].is_string()) m.layout = s["layout"].get<std::string>();
  }
  for (const IndexEntry& e : idx.tensors) {
    SavedTensor st;
    st.name = e.name;
    st.dtype = e.dtype;
    st.shape = e.shape;
    if (rows_of(e.shape) > 0) {
      SavedChunk c;
      c.row_end = rows_of(e.shape);
      c.file = path;
      c.key = e.name;
      c.checksum = e.checksum.value_or("");
      st.chunks.push_back(std::move(c));
    }
    m.tensors.push_back(std::move(st));
  }
  std::sort(m.tensors.begin(), m.tensors.end(),
            [](const SavedTensor& a, const SavedTensor& b) { return a.name < b.name; });
  return m;
}

}  // namespace

const SavedTensor* DistributedMetadata::find(const std::string& name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const SavedTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

std::string resolve_step_dir(const std::string& path) {
  std::error_code ec;
  TB_CHECK(fs::is_directory(path, ec), "checkpoint.load", "'", path, "' is not a directory");
  if (fs::exists(path + "/latest", ec)) return latest_checkpoint(path);
  return path;
}

bool is_distributed_checkpoint(const std::string& path) {
  try {
    return is_regular_file(resolve_step_dir(path) + "/" + kMetadataFile);
  } catch (const core::Error&) {
    return false;
  }
}

DistributedMetadata read_distributed_metadata(const std::string& path) {
  if (is_regular_file(path)) return file_metadata(path);
  const std::string step_dir = resolve_step_dir(path);
  const std::string file = step_dir + "/" + kMetadataFile;
  TB_CHECK(is_regular_file(file), "checkpoint.load", "'", step_dir, "' has no ", kMetadataFile,
           ": not a distributed checkpoint (a one-process checkpoint has state.json), or its save never completed");
  return parse_metadata(read_small_file(file, size_t(1) << 30), file, step_dir);
}

}  // namespace tb::checkpoint
