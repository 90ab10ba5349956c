// Sharded checkpoints: see Note [Distributed checkpoint directory] in distributed.h.
#include "engine/checkpoint/distributed.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/distributed_format.h"
#include "engine/checkpoint/step_dir.h"
#include "engine/checkpoint/training_state.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"
#include "engine/tensor/factories.h"
#include "engine/tensor/iterator.h"  // ThreadLimit
#include "engine/tensor/state_fence.h"

namespace tb::checkpoint {

using namespace detail;

namespace {

// Note [Staging copy]
// An asynchronous save blocks training for one copy of the rank's state into staging buffers.
// glibc's memcpy switches to non-temporal stores only above a share of the L3 cache, so most
// tensors (a few MiB each) are copied through the cache: every destination line is read before it
// is overwritten, and the copy evicts training's working set. Streaming stores do neither: for a
// GPT rank's 356 MB (the dcp bench's shapes) 43-46 ms against memcpy's 53-61 ms on one core here.
// The background writer reads the staged bytes from memory either way.
void staging_copy(void* dst, const void* src, size_t n) {
  if (n == 0) return;  // an empty tensor's data() may be null: no pointer arithmetic on it
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#ifdef __AVX512F__
  constexpr size_t kLine = 64;
  const size_t head = std::min(n, (kLine - reinterpret_cast<uintptr_t>(d) % kLine) % kLine);
  std::memcpy(d, s, head);  // up to the destination's first cache-line boundary
  size_t i = head;
  for (; i + 4 * kLine <= n; i += 4 * kLine)
    for (size_t k = 0; k < 4 * kLine; k += kLine)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + k), _mm512_loadu_si512(s + i + k));
  _mm_sfence();  // the streamed lines are visible before the writer thread starts
  std::memcpy(d + i, s + i, n - i);
#else
  std::memcpy(d, s, n);
#endif
}

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string key_of(const std::string& name, int64_t row_begin) { return name + "@" + std::to_string(row_begin); }
std::string file_of(int rank) { return "rank-" + std::to_string(rank) + ".safetensors"; }

// ---------------------------------------------------------------- byte exchange over a group

// Every rank's string, in rank order (two all-gathers: the lengths, then the padded bytes).
std::vector<std::string> all_gather_strings(dist::ProcessGroup& g, const std::string& mine,
                                            std::chrono::milliseconds timeout) {
  const int W = g.size();
  Tensor len = full({1}, double(mine.size()), DType::Int64);
  Tensor lens = empty({W}, DType::Int64);
  g.all_gather(lens, len)->wait(timeout);
  const int64_t* l = lens.data_ptr<int64_t>();
  int64_t most = 0;
  for (int r = 0; r < W; ++r) most = std::max(most, l[r]);
  const int64_t words = std::max<int64_t>(1, (most + 7) / 8);
  Tensor in = zeros({words}, DType::Int64);
  std::memcpy(in.data(), mine.data(), mine.size());
  Tensor out = empty({int64_t(W) * words}, DType::Int64);
  g.all_gather(out, in)->wait(timeout);
  std::vector<std::string> all(static_cast<size_t>(W));
  const char* base = static_cast<const char*>(out.data());
  for (int r = 0; r < W; ++r) all[size_t(r)].assign(base + size_t(r) * size_t(words) * 8, size_t(l[r]));
  return all;
}

// Raises on every rank when any rank reported an error (the same message everywhere).
void raise_if_any(const std::string& op, const std::vector<std::string>& errors, const std::string& tail) {
  std::string msg;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    std::string_view e = errors[r];
    if (e.rfind(op + ": ", 0) == 0) e.remove_prefix(op.size() + 2);  // said once, in front
    msg += (msg.empty() ? "" : "; ") + ("rank " + std::to_string(r) + ": ") + std::string(e);
  }
  if (!msg.empty()) throw core::Error(op, "failed on " + msg + tail);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---------------------------------------------------------------- reading chunk rows

struct OpenFile {
  int fd = -1;
  FileIndex index;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads rows of saved chunks, verifying the checksum blocks it touches; files opened once each.
class ChunkReader {
 public:
  ChunkReader(const DistributedMetadata& m, bool verify) : meta_(m), verify_(verify) {}
  int64_t bytes_read = 0;

  // Checks chunk `c` of tensor `t` against its file's header: the key is there with the dtype and
  // shape the metadata claims, so the chunk's bytes lie inside the file. Callers check before
  // they allocate for a chunk: the metadata's shapes are only claims until then.
  void check_chunk(const SavedTensor& t, const SavedChunk& c) { entry(t, c); }

  // Rows [a, b) (absolute) of chunk `c` of tensor `t` into dst (contiguous, (b - a) rows).
  void read_rows(const SavedTensor& t, const SavedChunk& c, int64_t a, int64_t b, char* dst) {
    const bool single = meta_.block_bytes == 0;  // one safetensors file
    const std::string path = path_of(c);
    OpenFile& f = open(path);
    const IndexEntry* e = &entry(t, c);
    const std::string where = "tensor '" + t.name + "' rows [" + std::to_string(c.row_begin) + ", " +
                              std::to_string(c.row_end) + ")";
    const int64_t rb = row_bytes_of(t.shape, t.dtype);
    const int64_t off = (a - c.row_begin) * rb, len = (b - a) * rb, total = int64_t(e->nbytes);
    if (single || !verify_) {
      if (!verify_ || (a == c.row_begin && b == c.row_end) || c.checksum.empty()) {
        pread_exact(f.fd, e->offset + uint64_t(off), dst, size_t(len), path);
        bytes_read += len;
        if (verify_ && !c.checksum.empty() && hex(XXH64(dst, size_t(len), 0)) != c.checksum)
          bad_meta(path, where + ": checksum mismatch: the file is corrupt; restore it from a good copy");
        return;
      }
      // Part of a file's tensor: its checksum covers the whole tensor, so read all of it.
      std::vector<char> whole(static_cast<size_t>(total));
      read_rows(t, c, c.row_begin, c.row_end, whole.data());
      std::memcpy(dst, whole.data() + off, size_t(len));
      return;
    }
    pread_exact(f.fd, e->offset + uint64_t(off), dst, size_t(len), path);
    bytes_read += len;
    const int64_t B = meta_.block_bytes;
    std::vector<char> edge;
    for (int64_t k = off / B; k * B < off + len; ++k) {
      const int64_t bb = k * B, be = std::min(total, bb + B);
      XXH64_state_t* s = XXH64_createState();
      XXH64_reset(s, 0);
      auto edge_read = [&](int64_t from, int64_t to) {
        edge.resize(size_t(to - from));
        pread_exact(f.fd, e->offset + uint64_t(from), edge.data(), edge.size(), path);
        bytes_read += to - from;
        XXH64_update(s, edge.data(), edge.size());
      };
      if (bb < off) edge_read(bb, off);
      const int64_t mb = std::max(bb, off), me = std::min(be, off + len);
      XXH64_update(s, dst + (mb - off), size_t(me - mb));
      if (be > off + len) edge_read(off + len, be);
      const uint64_t got = XXH64_digest(s);
      XXH64_freeState(s);
      if (hex(got) != c.block_checksums[size_t(k)])
        bad_meta(path, where + ": checksum mismatch in bytes [" + std::to_string(bb) + ", " + std::to_string(be) +
                           ") of the chunk (stored " + c.block_checksums[size_t(k)] + ", data gives " + hex(got) +
                           "): the file is corrupt; restore it from a good copy");
    }
  }

 private:
  std::string path_of(const SavedChunk& c) const {
    return meta_.block_bytes == 0 ? c.file : meta_.step_dir + "/" + c.file;  // 0: one safetensors file
  }
  const IndexEntry& entry(const SavedTensor& t, const SavedChunk& c) {
    const std::string path = path_of(c);
    const IndexEntry* e = open(path).index.find(c.key);
    const std::string where = "tensor '" + t.name + "' rows [" + std::to_string(c.row_begin) + ", " +
                              std::to_string(c.row_end) + ")";
    if (!e) bad_meta(path, where + ": the file has no key '" + text_excerpt(c.key) + "'");
    Shape want = t.shape;
    if (!want.empty()) want[0] = c.row_end - c.row_begin;
    if (e->dtype != t.dtype || e->shape != want)
      bad_meta(path, where + ": the file holds " + core::name(e->dtype) + " " + shape_text(e->shape) +
                         ", the metadata says " + core::name(t.dtype) + " " + shape_text(want));
    return *e;
  }
  OpenFile& open(const std::string& path) {
    auto it = files_.find(path);
    if (it != files_.end()) return *it->second;
    auto f = std::make_unique<OpenFile>();
    f->index = read_index(path);  // validates the header (and that the file exists)
    std::string problem;
    f->fd = open_regular_file(path, problem);  // replaced by a FIFO since read_index: no hang
    if (f->fd < 0) bad_meta(path, problem);
    return *files_.emplace(path, std::move(f)).first->second;
  }
  const DistributedMetadata& meta_;
  bool verify_;
  std::map<std::string, std::unique_ptr<OpenFile>> files_;
};

// Fills rows [row_offset, row_offset + rows) of saved tensor `t` into dst.
void read_tensor_rows(ChunkReader& r, const SavedTensor& t, int64_t row_offset, int64_t rows, char* dst) {
  const int64_t rb = row_bytes_of(t.shape, t.dtype);
  const int64_t a = row_offset, b = row_offset + rows;
  for (const SavedChunk& c : t.chunks) {
    const int64_t lo = std::max(a, c.row_begin), hi = std::min(b, c.row_end);
    if (lo >= hi) continue;
    r.read_rows(t, c, lo, hi, dst + (lo - a) * rb);
  }
}

// ---------------------------------------------------------------- the save plan

struct Held {
  std::string name;
  DType dtype;
  Shape shape;
  int64_t row_begin, row_end;
};

json describe(const DistributedState& s, int rank, const std::string& error) {
  json d = {{"error", error}, {"step", s.step}, {"entries", json::array()}};
  if (!error.empty()) return d;
  for (const ShardedEntry& e : s.tensors) {
    const int64_t rows = e.global_shape.empty() ? 1 : e.local.size(0);
    d["entries"].push_back(
        {e.name, format_dtype_name(e.local.dtype()), e.global_shape, e.row_offset, e.row_offset + rows});
  }
  (void)rank;
  return d;
}

std::string check_local(const DistributedState& s) {
  std::map<std::string, int> seen;
  for (const ShardedEntry& e : s.tensors) {
    const std::string w = "tensor '" + e.name + "': ";
    if (e.name.empty()) return "a tensor has an empty name";
    if (e.name.find('@') != std::string::npos) return w + "names may not contain '@'";
    if (seen[e.name]++) return w + "named twice";
    if (!e.local.defined()) return w + "undefined";
    if (e.local.device().type != core::DeviceType::CPU) return w + "not on the CPU";
    if (e.local.dim() != int64_t(e.global_shape.size()))
      return w + "local " + shape_text(e.local.sizes()) + " and global " + shape_text(e.global_shape) +
             " differ in rank";
    for (size_t d = 1; d < e.global_shape.size(); ++d)
      if (e.local.size(int64_t(d)) != e.global_shape[d])
        return w + "local " + shape_text(e.local.sizes()) + " does not match global " + shape_text(e.global_shape) +
               " beyond dim 0";
    if (e.global_shape.empty() ? e.row_offset != 0
                               : (e.row_offset < 0 || e.row_offset + e.local.size(0) > e.global_shape[0]))
      return w + "rows [" + std::to_string(e.row_offset) + ", " +
             std::to_string(e.row_offset + (e.global_shape.empty() ? 1 : e.local.size(0))) + ") lie outside " +
             shape_text(e.global_shape);
  }
  return "";
}

struct Plan {
  // (name, row_begin) of the chunks this rank writes, and per tensor its dtype and shape.
  std::map<std::string, std::pair<DType, Shape>> tensors;
  std::vector<std::vector<std::pair<std::string, int64_t>>> writes;  // per rank
  std::string error;
};

Plan make_plan(const std::vector<json>& ranks) {
  Plan p;
  p.writes.resize(ranks.size());
  struct Holders {
    int64_t row_end;
    std::vector<int> ranks;
  };
  std::map<std::string, std::map<int64_t, Holders>> chunks;  // name -> row_begin -> holders
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const json& e : ranks[r]["entries"]) {
      const std::string name = e[0].get<std::string>();
      const DType dt = *dtype_from_format_name(e[1].get<std::string>());
      const Shape shape = e[2].get<Shape>();
      const int64_t b = e[3].get<int64_t>(), en = e[4].get<int64_t>();
      auto [it, fresh] = p.tensors.try_emplace(name, dt, shape);
      if (!fresh && (it->second.first != dt || it->second.second != shape)) {
        p.error = "tensor '" + name + "' is " + core::name(it->second.first) + " " + shape_text(it->second.second) +
                  " on one rank and " + core::name(dt) + " " + shape_text(shape) + " on rank " + std::to_string(r);
        return p;
      }
      if (en <= b) continue;  // no rows here
      Holders& h = chunks[name][b];
      if (!h.ranks.empty() && h.row_end != en) {
        p.error = "tensor '" + name + "': ranks hold rows from " + std::to_string(b) + " to " +
                  std::to_string(h.row_end) + " and to " + std::to_string(en) + " (rank " + std::to_string(r) +
                  "): overlapping shards";
        return p;
      }
      h.row_end = en;
      h.ranks.push_back(int(r));
    }
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::map<std::string, int> names;
    for (const json& e : ranks[r]["entries"]) names[e[0].get<std::string>()] = 1;
    if (names.size() != p.tensors.size())
      for (const auto& [n, _] : p.tensors)
        if (!names.count(n)) {
          p.error = "rank " + std::to_string(r) + " does not have tensor '" + n +
                    "' (every rank must name every tensor)";
          return p;
        }
  }
  struct Item {
    int64_t bytes;
    std::string name;
    int64_t row_begin;
    const std::vector<int>* holders;
  };
  std::vector<Item> items;
  for (const auto& [name, by_row] : chunks) {
    const auto& [dt, shape] = p.tensors[name];
    int64_t next = 0;
    for (const auto& [b, h] : by_row) {
      if (b != next) {
        p.error = "tensor '" + name + "': " + (b < next ? "shards overlap at row " : "no rank holds row ") +
                  std::to_string(std::min(b, next));
        return p;
      }
      next = h.row_end;
      items.push_back({(h.row_end - b) * row_bytes_of(shape, dt), name, b, &h.ranks});
    }
    if (next != rows_of(shape)) {
      p.error = "tensor '" + name + "': no rank holds rows from " + std::to_string(next) + " to " +
                std::to_string(rows_of(shape));
      return p;
    }
  }
  // Largest first, each to its least loaded holder: replicated state spreads over the ranks.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  std::vector<int64_t> load(ranks.size(), 0);
  for (const Item& it : items) {
    int best = (*it.holders)[0];
    for (int r : *it.holders)
      if (load[size_t(r)] < load[size_t(best)]) best = r;
    load[size_t(best)] += it.bytes;
    p.writes[size_t(best)].emplace_back(it.name, it.row_begin);
  }
  return p;
}

}  // namespace

// ---------------------------------------------------------------- public

namespace {

// save_distributed with two additions for the asynchronous save: `early_error` (this rank could
// not stage its state) fails the save in step (1); `gate` (may be null) runs after this rank wrote
// its file and before it reports success, and a non-empty result is this rank's error (Note
// [Background staging]: the caller's verdict on the staged copy).
SaveStats save_gated(const DistributedState& state, const std::string& dir, dist::ProcessGroup& group,
                     const DistributedSaveOptions& options, const std::string& early_error,
                     const std::function<std::string()>& gate) {
  const auto t0 = Clock::now();
  const int rank = group.rank(), W = group.size();
  const char* op = "checkpoint.save";
  const std::string kept = "; the previous checkpoint (if any) is what `latest` still names";
  // (1) Validate, exchange what each rank holds, agree on the save id and the plan.
  std::string error = early_error.empty() ? check_local(state) : early_error;
  if (error.empty()) error = step_error(state.step);
  if (const std::string at = rank == 0 ? non_finite_number_path(state.state, "state") : "";  // rank 0's is saved
      error.empty() && !at.empty())
    error = at +
            " is NaN or infinite, which JSON cannot hold (it would load as null); store it as a string, e.g. "
            "\"inf\", as the LR schedulers' state dicts do";
  std::string save_id;
  if (rank == 0 && error.empty()) {
    try {
      make_dirs(dir);
      remove_stale_staging(dir);
    } catch (const std::exception& e) {
      error = e.what();
    }
    save_id = new_save_id();
  }
  json mine = describe(state, rank, error);
  mine["save_id"] = save_id;
  std::vector<json> all;
  {
    const auto texts = all_gather_strings(group, mine.dump(), options.timeout);
    std::vector<std::string> errors;
    for (const std::string& t : texts) {
      all.push_back(json::parse(t));
      errors.push_back(all.back()["error"].get<std::string>());
    }
    raise_if_any(op, errors, kept);
  }
  save_id = all[0]["save_id"].get<std::string>();
  for (int r = 1; r < W; ++r)
    TB_CHECK(all[size_t(r)]["step"] == all[0]["step"], op, "ranks disagree on the step: rank 0 saves ",
             all[0]["step"].dump(), ", rank ", r, " ", all[size_t(r)]["step"].dump());
  const Plan plan = make_plan(all);
  TB_CHECK(plan.error.empty(), op, plan.error);
  const std::string name = step_name(state.step);
  const std::string staging = dir + "/." + name + ".staging-" + save_id;

  // (2) Write this rank's chunks.
  SaveStats stats;
  json written = json::array();
  error.clear();
  try {
    if (::mkdir(staging.c_str(), 0755) != 0 && errno != EEXIST)
      throw core::Error(op, "cannot create '" + staging + "': " + errno_text(errno));
    std::map<std::string, const ShardedEntry*> by_name;
    for (const ShardedEntry& e : state.tensors) by_name[e.name] = &e;
    NamedTensors out;
    for (const auto& [n, b] : plan.writes[size_t(rank)]) {
      Tensor t = by_name.at(n)->local.contiguous();
      const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
      const int64_t bytes = t.numel() * int64_t(t.itemsize());
      written.push_back({{"name", n}, {"row_begin", b}, {"row_end", b + rows}, {"key", key_of(n, b)}});
      stats.bytes_written += bytes;
      out.emplace_back(key_of(n, b), t);
    }
    if (!out.empty()) {
      // Written in place: the staging directory is the unit that becomes visible (step (4)).
      // The chunk and block checksums come from the one pass that writes the bytes.
      SaveFileOptions o;
      o.block_bytes = kBlockBytes;
      o.atomic = false;
      const std::vector<WrittenChecksums> sums = save_file(staging + "/" + file_of(rank), out, {{"save_id", save_id}},
                                                           o);
      for (size_t k = 0; k < sums.size(); ++k) {
        json blocks = json::array();
        for (uint64_t b : sums[k].blocks) blocks.push_back(hex(b));
        written[k]["checksum"] = hex(sums[k].whole);
        written[k]["blocks"] = std::move(blocks);
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (gate) {
    std::string verdict = gate();
    if (error.empty()) error = std::move(verdict);
  }
  // (3) Everyone's outcome.
  json report = {{"error", error}, {"chunks", written}};
  std::vector<json> reports;
  {
    const auto texts = all_gather_strings(group, report.dump(), options.timeout);
    std::vector<std::string> errors;
    for (const std::string& t : texts) {
      reports.push_back(json::parse(t));
      errors.push_back(reports.back()["error"].get<std::string>());
    }
    bool failed = false;
    for (const auto& e : errors) failed = failed || !e.empty();
    if (failed && rank == 0) remove_tree_quietly(staging);
    raise_if_any(op, errors, kept);
  }
  // (4) Rank 0 commits: metadata last, then the directory, then `latest`.
  std::string commit_error;
  if (rank == 0) {
    try {
      json tensors = json::object();
      for (const auto& [n, ds] : plan.tensors)
        tensors[n] = {{"dtype", format_dtype_name(ds.first)}, {"shape", ds.second}, {"chunks", json::array()}};
      for (int r = 0; r < W; ++r)
        for (const json& c : reports[size_t(r)]["chunks"])
          tensors[c["name"].get<std::string>()]["chunks"].push_back({{"row_begin", c["row_begin"]},
                                                                     {"row_end", c["row_end"]},
                                                                     {"writer", r},
                                                                     {"file", file_of(r)},
                                                                     {"key", c["key"]},
                                                                     {"checksum", c["checksum"]},
                                                                     {"blocks", c["blocks"]}});
      const json meta = {{"format", kFormat},    {"version", kVersion},
                         {"save_id", save_id},   {"step", state.step},
                         {"world_size", W},      {"layout", state.layout},
                         {"created", utc_now()}, {"block_bytes", kBlockBytes},
                         {"tensors", tensors},   {"state", state.state}};
      std::string text;
      try {
        text = meta.dump(1);
      } catch (const json::exception& e) {
        throw core::Error(op, "the state's JSON cannot be written (invalid UTF-8?): " + std::string(e.what()));
      }
      TB_CHECK(json_depth(text) <= kMaxJsonDepth, op, "the state's JSON nests deeper than ", kMaxJsonDepth - 2,
               " levels; flatten it");
      // In place, like the rank files: the rename of the staging directory publishes them all,
      // once the directory's entries are durable too.
      AtomicWriter meta_file(staging + "/" + kMetadataFile, /*in_place=*/true);
      meta_file.write(text);
      meta_file.commit();
      fsync_dir(staging);
      install_step_dir(dir, staging, dir + "/" + name, name);
      commit_latest(dir, name, options.keep_last);
    } catch (const std::exception& e) {
      commit_error = e.what();
      remove_tree_quietly(staging);
    }
  }
  {
    const auto texts = all_gather_strings(group, commit_error, options.timeout);
    raise_if_any(op, texts, kept);
  }
  stats.step_dir = dir + "/" + name;
  stats.seconds = since(t0);
  return stats;
}

}  // namespace

SaveStats save_distributed(const DistributedState& state, const std::string& dir, dist::ProcessGroup& group,
                           const DistributedSaveOptions& options) {
  return save_gated(state, dir, group, options, "", nullptr);
}

LoadStats load_distributed(DistributedState& state, const std::string& path, dist::ProcessGroup& group,
                           const DistributedLoadOptions& options) {
  const auto t0 = Clock::now();
  const char* op = "checkpoint.load";
  state_fence();  // the entries are filled in place: a background staging of them must be done
  std::optional<DistributedMetadata> meta;
  std::string error;
  try {
    meta = read_distributed_metadata(path);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Every rank must read the same save (a `latest` moved in between would mix two).
  {
    const json mine = {{"error", error}, {"save_id", meta ? meta->save_id : ""}};
    const auto texts = all_gather_strings(group, mine.dump(), options.timeout);
    std::vector<std::string> errors;
    std::vector<std::string> ids;
    for (const std::string& t : texts) {
      const json j = json::parse(t);
      errors.push_back(j["error"].get<std::string>());
      ids.push_back(j["save_id"].get<std::string>());
    }
    raise_if_any(op, errors, "");
    for (size_t r = 1; r < ids.size(); ++r)
      TB_CHECK(ids[r] == ids[0], op, "ranks 0 and ", r, " read different saves of '", path,
               "' (did `latest` move during the load?); load a step directory");
  }
  LoadStats stats;
  stats.step_dir = meta->step_dir;
  error.clear();
  try {
    ChunkReader reader(*meta, options.verify_checksums);
    std::map<std::string, int> seen;
    for (ShardedEntry& e : state.tensors) {
      const std::string w = "tensor '" + e.name + "': ";
      TB_CHECK(!seen[e.name]++, op, w, "named twice");
      const SavedTensor* t = meta->find(e.name);
      TB_CHECK(t, op, "'", meta->step_dir, "' has no tensor '", e.name, "'");
      TB_CHECK(e.local.defined() && e.local.device().type == core::DeviceType::CPU && e.local.is_contiguous(), op, w,
               "the destination must be a defined, contiguous CPU tensor");
      TB_CHECK(e.global_shape == t->shape && e.local.dtype() == t->dtype, op, w, "the checkpoint holds ",
               core::name(t->dtype), " ", shape_text(t->shape), ", this model wants ", core::name(e.local.dtype()), " ",
               shape_text(e.global_shape));
      const int64_t rows = e.global_shape.empty() ? 1 : e.local.size(0);
      TB_CHECK(e.local.dim() == int64_t(t->shape.size()) && e.row_offset >= 0 &&
                   e.row_offset + rows <= rows_of(t->shape) &&
                   (e.global_shape.empty() ||
                    row_bytes_of(e.local.sizes(), e.local.dtype()) == row_bytes_of(t->shape, t->dtype)),
               op, w, "local ", shape_text(e.local.sizes()), " at row ", e.row_offset, " does not fit ",
               shape_text(t->shape));
      if (rows > 0 && e.local.numel() > 0) {
        // An in-place write, as copy_ is: the version moves first, so even a load that fails
        // part-way leaves no cache keyed on the old values (autocast's weight shadows, a tensor
        // saved for backward) trusting them.
        e.local.bump_version();
        read_tensor_rows(reader, *t, e.row_offset, rows, static_cast<char*>(e.local.data()));
      }
    }
    stats.bytes_read = reader.bytes_read;
  } catch (const std::exception& e) {
    error = e.what();
  }
  {
    const auto texts = all_gather_strings(group, error, options.timeout);
    raise_if_any(op, texts, "");
  }
  state.state = meta->state;
  state.step = meta->step;
  state.layout = meta->layout;
  stats.seconds = since(t0);
  return stats;
}

NamedTensors read_distributed_full(const DistributedMetadata& meta) {
  ChunkReader reader(meta, true);
  NamedTensors out;
  for (const SavedTensor& t : meta.tensors) {
    for (const SavedChunk& c : t.chunks) reader.check_chunk(t, c);  // the files hold it: its size is real
    Tensor x = empty(t.shape, t.dtype);
    if (x.numel() > 0) read_tensor_rows(reader, t, 0, rows_of(t.shape), static_cast<char*>(x.data()));
    out.emplace_back(t.name, std::move(x));
  }
  return out;
}

std::vector<ChunkCheck> verify_distributed(const DistributedMetadata& meta) {
  ChunkReader reader(meta, true);
  std::vector<ChunkCheck> out;
  for (const SavedTensor& t : meta.tensors)
    for (const SavedChunk& c : t.chunks) {
      ChunkCheck k{t.name, c.file, c.row_begin, c.row_end, true, ""};
      try {
        // The file's header first: the metadata's claimed size is allocated only once the file
        // holds that many bytes (a 1 GiB claim over a 200-byte file is a problem, not 1 GiB).
        reader.check_chunk(t, c);
        std::vector<char> buf(size_t((c.row_end - c.row_begin) * row_bytes_of(t.shape, t.dtype)));
        reader.read_rows(t, c, c.row_begin, c.row_end, buf.data());
      } catch (const std::exception& e) {
        k.ok = false;
        k.problem = e.what();
      }
      out.push_back(std::move(k));
    }
  return out;
}

// ---------------------------------------------------------------- asynchronous save

namespace {

// Copies every entry of `from` into `into`'s staging buffers (reusing the previous save's when
// the shapes and dtypes are the same). Returns the problem instead of throwing: the save must
// still go through its collectives to fail on every rank.
std::string stage(DistributedState& into, const std::vector<ShardedEntry>& from) {
  std::vector<ShardedEntry> fresh;
  fresh.reserve(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    const ShardedEntry& e = from[i];
    if (!e.local.defined()) return "tensor '" + e.name + "' is undefined";
    if (e.local.device().type != core::DeviceType::CPU) return "tensor '" + e.name + "' is not on the CPU";
    ShardedEntry c = e;
    const std::vector<ShardedEntry>& old = into.tensors;
    if (i < old.size() && old[i].local.defined() && old[i].local.sizes() == e.local.sizes() &&
        old[i].local.dtype() == e.local.dtype())
      c.local = old[i].local;
    else c.local = empty(e.local.sizes(), e.local.dtype());
    if (e.local.is_contiguous())  // a flat copy: memcpy ran ~4x the strided copy_ here; Note [Staging copy]
      staging_copy(c.local.data(), e.local.data(), size_t(e.local.numel()) * e.local.itemsize());
    else c.local.copy_(e.local.detach());
    fresh.push_back(std::move(c));
  }
  into.tensors = std::move(fresh);
  return "";
}

}  // namespace

struct AsyncCheckpointer::Impl {
  std::shared_ptr<dist::ProcessGroup> group;  // private: split from the caller's
  DistributedSaveOptions options;
  Staging mode = Staging::Blocking;
  DistributedState staged;  // the copies the background thread writes (buffers reused)
  std::thread worker;
  std::exception_ptr error;
  SaveStats stats;
  bool in_flight = false;
  std::atomic<bool> finished{true};  // the worker has returned

  // Note [Background staging]: what the caller's thread checks once the copy is complete.
  struct Watched {
    std::string name;
    Tensor tensor;
    uint64_t version;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Watched> watched;
  int64_t step = 0;
  bool copied = true;            // the worker finished copying (or gave up)
  bool verdict_pending = false;  // a background copy awaits the caller's check
  std::optional<std::string> verdict;
  double blocking_s = 0, staging_s = 0;
  std::optional<StateFence> fence;  // last: unregistered before anything it uses goes

  // Waits for the copy, then checks the versions (on the caller's thread); "" when clean.
  std::string finish_staging() {
    std::unique_lock<std::mutex> lock(mutex);
    if (!verdict_pending) return "";
    const auto t0 = Clock::now();
    cv.wait(lock, [&] { return copied; });
    std::string problem;
    for (const Watched& w : watched)
      if (w.tensor.version() != w.version) {
        problem = "tensor '" + w.name + "' was written in place (version " + std::to_string(w.version) + " -> " +
                  std::to_string(w.tensor.version()) +
                  ") between save() and wait_staged() of the background-staged save of step " + std::to_string(step) +
                  ", so its copy may mix old and new values: that save is abandoned on every rank. Call "
                  "wait_staged() (or step the optimizer, which waits for it) before writing saved tensors, or use "
                  "Staging::Blocking";
        break;
      }
    watched.clear();
    verdict = problem;
    verdict_pending = false;
    blocking_s += since(t0);
    cv.notify_all();
    return problem;
  }

  // The worker's gate: this rank reports success only after the caller's verdict.
  std::string await_verdict() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return verdict.has_value(); });
    return *verdict;
  }

  SaveStats join() {
    if (!in_flight) return stats;
    finish_staging();  // the worker waits for the verdict; a problem is reported through it
    worker.join();
    in_flight = false;
    if (error) std::rethrow_exception(std::exchange(error, nullptr));
    return stats;
  }
};

AsyncCheckpointer::AsyncCheckpointer(const std::shared_ptr<dist::ProcessGroup>& group, DistributedSaveOptions options,
                                     Staging staging)
    : impl_(std::make_shared<Impl>()) {
  TB_CHECK(group, "checkpoint.async_save", "a process group is required");
  impl_->group = group->split(0);  // every rank in one group of its own
  impl_->options = options;
  impl_->mode = staging;
  // Optimizer steps and loads wait for a background copy (Note [State fences]).
  if (staging == Staging::Background) impl_->fence.emplace([impl = impl_.get()] { impl->finish_staging(); });
}

AsyncCheckpointer::~AsyncCheckpointer() {
  try {
    impl_->join();
  } catch (...) {
  }
  impl_->fence.reset();
}

void AsyncCheckpointer::save(const DistributedState& state, const std::string& dir) {
  const auto t0 = Clock::now();
  Impl& im = *impl_;
  im.join();
  DistributedState& s = im.staged;
  s.state = state.state;
  s.step = state.step;
  s.layout = state.layout;
  std::string early;
  {
    std::lock_guard<std::mutex> lock(im.mutex);
    im.verdict.reset();
    im.blocking_s = 0;
    im.step = state.step;
    im.copied = im.mode == Staging::Blocking;
  }
  std::vector<ShardedEntry> sources;
  if (im.mode == Staging::Blocking) {
    const auto c0 = Clock::now();
    early = stage(s, state.tensors);
    std::lock_guard<std::mutex> lock(im.mutex);
    im.staging_s = since(c0);
    im.verdict = "";
  } else {
    sources = state.tensors;  // handles: the worker copies from them
    std::lock_guard<std::mutex> lock(im.mutex);
    for (const ShardedEntry& e : state.tensors)
      if (e.local.defined()) im.watched.push_back({e.name, e.local, e.local.version()});
    im.verdict_pending = true;
  }
  im.in_flight = true;
  im.finished.store(false, std::memory_order_relaxed);
  im.worker = std::thread([impl = impl_.get(), dir, sources = std::move(sources), early]() mutable {
    // One thread: the save runs beside training, whose parallel loops own the cores.
    ThreadLimit one(1);
    if (impl->mode == Staging::Background) {
      const auto c0 = Clock::now();
      try {
        early = stage(impl->staged, sources);
      } catch (const std::exception& e) {  // e.g. no memory for the staging buffers
        early = e.what();
      }
      sources.clear();
      std::lock_guard<std::mutex> lock(impl->mutex);
      impl->staging_s = since(c0);
      impl->copied = true;
      impl->cv.notify_all();
    }
    try {
      impl->stats = save_gated(impl->staged, dir, *impl->group, impl->options, early,
                               [impl] { return impl->await_verdict(); });
    } catch (...) {
      impl->error = std::current_exception();
    }
    impl->finished.store(true, std::memory_order_release);
  });
  std::lock_guard<std::mutex> lock(im.mutex);
  im.blocking_s += since(t0);
}

void AsyncCheckpointer::wait_staged() {
  const std::string problem = impl_->finish_staging();
  if (!problem.empty())
    throw core::Error("checkpoint.async_save",
                      problem + "; the previous checkpoint (if any) is what `latest` still names");
}

SaveStats AsyncCheckpointer::wait() { return impl_->join(); }

bool AsyncCheckpointer::done() const { return impl_->finished.load(std::memory_order_acquire); }

Staging AsyncCheckpointer::staging() const { return impl_->mode; }

double AsyncCheckpointer::last_blocking_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->blocking_s;
}

double AsyncCheckpointer::last_staging_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->staging_s;
}

}  // namespace tb::checkpoint
