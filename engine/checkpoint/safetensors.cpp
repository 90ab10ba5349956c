// save_file / load_file for the safetensors layout (see Note [File format] in safetensors.h).
// The loader is written for hostile input: every number in the header is range-checked before it
// is used for an allocation or an offset, and data is read only after the whole header is valid.
#include "engine/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"
#include "engine/tensor/iterator.h"  // num_threads

namespace tb::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "the file format is little-endian; a big-endian host needs byte swapping here");

namespace {

constexpr const char* kMetadataKey = "__metadata__";

struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
  std::optional<uint64_t> checksum;
};

struct Header {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw core::Error("checkpoint.load", "'" + file + "': " + what);
}
[[noreturn]] void fail_tensor(const std::string& file, const std::string& tensor, const std::string& what) {
  fail(file, "tensor '" + text_excerpt(tensor, 200) + "': " + what);
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

std::optional<uint64_t> parse_hex64(const std::string& s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    v = (v << 4) | uint64_t(d);
  }
  return v;
}

// A non-negative JSON integer, or nullopt (floats like 1e12, negatives and non-numbers are not).
std::optional<uint64_t> as_uint(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

Entry parse_entry(const std::string& file, const std::string& name, const nlohmann::json& v, uint64_t data_size) {
  Entry e;
  e.name = name;
  if (!v.is_object())
    fail_tensor(file, name, "expected an object {dtype, shape, data_offsets}, got " + std::string(v.type_name()));
  auto field = [&](const char* key) -> const nlohmann::json& {
    auto it = v.find(key);
    if (it == v.end()) fail_tensor(file, name, std::string("missing \"") + key + "\"");
    return *it;
  };
  const nlohmann::json& dt = field("dtype");
  if (!dt.is_string()) fail_tensor(file, name, "\"dtype\" must be a string, got " + json_excerpt(dt));
  const auto dtype = dtype_from_format_name(dt.get_ref<const std::string&>());
  if (!dtype)
    fail_tensor(file, name, "unsupported dtype " + json_excerpt(dt) + " (supported: F64 F32 F16 BF16 I64 I32 BOOL)");
  e.dtype = *dtype;

  const nlohmann::json& sh = field("shape");
  if (!sh.is_array()) fail_tensor(file, name, "\"shape\" must be an array of non-negative integers");
  if (sh.size() > kMaxDims)
    fail_tensor(file, name,
                "shape has " + std::to_string(sh.size()) + " dimensions, more than " + std::to_string(kMaxDims));
  // numel * itemsize must fit in 64 bits before it is compared with anything.
  uint64_t nbytes = core::itemsize(e.dtype);
  for (const nlohmann::json& d : sh) {
    const auto n = as_uint(d);
    if (!n || *n > uint64_t(INT64_MAX))
      fail_tensor(file, name, "shape " + json_excerpt(sh) + " has an entry that is not a non-negative integer");
    if (__builtin_mul_overflow(nbytes, *n, &nbytes))
      fail_tensor(file, name, "shape " + json_excerpt(sh) + " has a byte size that overflows 64 bits");
    e.shape.push_back(int64_t(*n));
  }

  const nlohmann::json& off = field("data_offsets");
  std::optional<uint64_t> b, en;
  if (off.is_array() && off.size() == 2) b = as_uint(off[0]), en = as_uint(off[1]);
  if (!b || !en)
    fail_tensor(file, name,
                "\"data_offsets\" must be [begin, end] with non-negative integers, got " + json_excerpt(off));
  if (*b > *en) fail_tensor(file, name, "data_offsets " + json_excerpt(off) + " end before they begin");
  if (*en > data_size)
    fail_tensor(file, name,
                "data_offsets " + json_excerpt(off) + " reach past the data section of " + std::to_string(data_size) +
                    " bytes (the file is truncated or the header is corrupt)");
  if (*en - *b != nbytes)
    fail_tensor(file, name,
                "data_offsets " + json_excerpt(off) + " span " + std::to_string(*en - *b) + " bytes but shape " +
                    json_excerpt(sh) + " of " + format_dtype_name(e.dtype) + " needs " + std::to_string(nbytes));
  e.begin = *b;
  e.end = *en;
  return e;
}

// nlohmann's DOM builder, which also rejects duplicate keys (nlohmann keeps the last one, and a
// duplicate could hide a tensor) and records the top level's keys in file order (which breaks
// ties between zero-size tensors). Not parse() with a callback: after every object that one
// scans the enclosing object for discarded values, quadratic in the number of tensors.
class HeaderSax : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
  explicit HeaderSax(nlohmann::json& root) : Base(root) {}
  bool start_object(std::size_t n) {
    open_objects_.emplace_back();
    return Base::start_object(n);
  }
  bool key(std::string& k) {
    // Keys belong to the innermost open container, which is then an object.
    if (!open_objects_.back().insert(k).second && duplicate.empty()) duplicate = k;
    if (open_objects_.size() == 1) top_keys.push_back(k);
    return Base::key(k);
  }
  bool end_object() {
    open_objects_.pop_back();
    return Base::end_object();
  }
  std::vector<std::string> top_keys;
  std::string duplicate;

 private:
  std::vector<std::set<std::string>> open_objects_;
};

// Parses and validates the header; nothing is read from the data section here. O(n log n) in
// the number of tensors (std::map-backed JSON: ordered_json looks keys up linearly).
Header parse_header(const std::string& file, std::string_view text, uint64_t data_size) {
  if (text.empty() || text.front() != '{')
    fail(file, "the header does not start with '{': not a safetensors file, or a corrupt one");
  check_json_depth(text, "checkpoint.load", file);
  nlohmann::json j;
  HeaderSax sax(j);
  try {
    nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const nlohmann::json::exception& e) {
    fail(file, std::string("the header is not valid JSON: ") + e.what());
  }
  const std::vector<std::string>& top_keys = sax.top_keys;
  const std::string& duplicate = sax.duplicate;
  if (!duplicate.empty()) fail(file, "the header has the key '" + text_excerpt(duplicate) + "' twice");
  if (!j.is_object()) fail(file, "the header must be a JSON object");

  Header h;
  std::map<std::string, uint64_t> checksums;
  h.entries.reserve(top_keys.size());
  for (const std::string& key : top_keys) {
    const nlohmann::json& value = j.find(key).value();
    if (key != kMetadataKey) {
      h.entries.push_back(parse_entry(file, key, value, data_size));
      continue;
    }
    if (!value.is_object()) fail(file, "\"__metadata__\" must be an object of strings, got " + json_excerpt(value));
    for (auto m = value.begin(); m != value.end(); ++m) {
      if (!m.value().is_string())
        fail(file,
             "\"__metadata__\" value of '" + text_excerpt(m.key()) + "' is not a string: " + json_excerpt(m.value()));
      const std::string& val = m.value().get_ref<const std::string&>();
      if (m.key().rfind(kChecksumPrefix, 0) == 0) {
        const auto sum = parse_hex64(val);
        const std::string tensor = m.key().substr(std::strlen(kChecksumPrefix));
        if (!sum) fail_tensor(file, tensor, "checksum \"" + text_excerpt(val) + "\" is not 16 hex digits");
        checksums[tensor] = *sum;
      } else {
        h.metadata[m.key()] = val;
      }
    }
  }
  for (Entry& e : h.entries) {
    auto c = checksums.find(e.name);
    if (c != checksums.end()) e.checksum = c->second, checksums.erase(c);
  }
  if (!checksums.empty())
    fail(file,
         "a checksum names tensor '" + text_excerpt(checksums.begin()->first) + "', which the header does not have");

  // The ranges must tile [0, data_size): no overlap, no gap, no trailing bytes.
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : h.entries) {
    if (e.begin < expected)
      fail_tensor(file, e.name,
                  "bytes [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlap tensor '" +
                      (prev ? prev->name : "") + "'");
    if (e.begin > expected)
      fail_tensor(file, e.name,
                  "a gap of " + std::to_string(e.begin - expected) + " bytes precedes it in the data section");
    expected = e.end;
    prev = &e;
  }
  if (expected != data_size)
    fail(file, "the data section has " + std::to_string(data_size - expected) +
                   " bytes that no tensor describes (a corrupt header, or trailing garbage)");
  return h;
}

// Reads `n` bytes at data-section offset `off` into dst; throws on a short read. Called from
// several threads at once (pread on one fd, or memcpy from a buffer: both are safe).
using ReadAt = std::function<void(uint64_t off, void* dst, size_t n)>;

// Note [Load and save I/O]
// A load is a page-cache copy (pread) plus an XXH64 of every byte; a save is the same XXH64
// plus a copy into the page cache plus the disk write that fsync waits for. On the 2-core
// development VM (400 MB: 40 float32 tensors of 10 MB, in the page cache), one thread's pread
// costs ~75-100 ms of CPU, XXH64 runs at ~10 GB/s on data in cache but ~6 GB/s from memory, and
// LibTorch's torch::load (one read() per tensor, nothing verified) takes 80-90 ms. Reading a
// whole tensor and then hashing it on one thread took 140-180 ms (0.45-0.6x LibTorch). So:
//  - each tensor is read (written) in kBlock pieces, each hashed right after its pread (right
//    before its pwrite) while it is in the core's L2; streaming XXH64 equals the one-shot hash;
//  - tensors are spread over num_threads() threads, taken in data order (a cold read still
//    walks the file forward). An XXH64 stream is sequential, so the unit of work is a tensor:
//    one huge tensor is read and hashed by one thread;
//  - tensors are allocated on the calling thread (the allocator's memory tag is the caller's),
//    and the error of the first failing tensor in data order is thrown there, as a one-thread
//    loop would throw it;
//  - a save knows its header's size before hashing (checksums are 16 hex digits), so it writes
//    the data first, at its final offsets, and the header last, and asks the kernel to start
//    writing each tensor to disk as soon as it is copied (start_writeback), so the closing
//    fsync finds little left to do.
// Measured (bench run with the CPUs to itself): load 72-91 ms (was 137-182 ms) against
// torch::load's 94-109 ms, save 481-545 ms (was 618-668 ms) against torch::save + fsync's
// 714-788 ms. Two threads do not halve the load: both copies share the memory bandwidth, and on a
// busy machine, where the process gets about one core, the load costs what its CPU time costs
// (~1.4x torch::load's, the price of the checksum). Measured and not taken: mmap of the file
// with hashing from the mapping and non-temporal stores into the tensors (56-63 ms): a file
// truncated by another process while mapped raises SIGBUS, a crash instead of an error.
constexpr size_t kBlock = size_t(256) << 10;
// Below this many data bytes a load or save stays on the calling thread (threads cost more than
// they save).
constexpr uint64_t kParallelBytes = uint64_t(4) << 20;
// With a dtype conversion, tensors are read in batches of about this many bytes, so the
// file-dtype copies alive at once stay bounded (a one-tensor-at-a-time loop held only one).
constexpr uint64_t kConvertBatchBytes = uint64_t(32) << 20;
// A save hands each tensor's bytes to the disk's writeback every this many bytes (and its tail at
// its end, unless smaller than a block: small tensors are left to the final fsync), so the disk
// writes while the next bytes are hashed and copied, and the fsync waits for little more than the
// last pieces.
constexpr size_t kWritebackBytes = size_t(16) << 20;

// Runs work(k) for k in [0, count): on num_threads() threads (tensors handed out in order) when
// `bytes` are enough to be worth it, else in order on this thread. Rethrows, on the calling thread,
// the exception of the smallest k that failed, which a plain loop would have thrown; the items
// after a failed one may be skipped.
template <typename F>
void for_each_tensor(int64_t count, uint64_t bytes, const F& work) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
  std::atomic<int64_t> first_failed{count};
  auto run = [&](int64_t k) {
    if (k > first_failed.load(std::memory_order_relaxed)) return;
    try {
      work(k);
    } catch (...) {
      errors[size_t(k)] = std::current_exception();  // an exception must not leave an OpenMP region
      for (int64_t f = first_failed.load(); k < f && !first_failed.compare_exchange_weak(f, k);) {
      }
    }
  };
  const int nt = int(std::min<int64_t>(num_threads(), count));
  if (nt > 1 && bytes >= kParallelBytes) {
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int64_t k = 0; k < count; ++k) run(k);
  } else {
    for (int64_t k = 0; k < count; ++k) run(k);
  }
  for (const std::exception_ptr& err : errors)
    if (err) std::rethrow_exception(err);
}

// Reads one tensor's bytes into dst, hashing them as they arrive, and validates them.
void read_entry(const std::string& file, const Entry& e, char* dst, const ReadAt& read_at, bool verify) {
  const size_t n = size_t(e.end - e.begin);
  const bool hash = e.checksum && verify;
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  for (size_t off = 0; off < n; off += kBlock) {
    const size_t len = std::min(kBlock, n - off);
    read_at(e.begin + off, dst + off, len);
    if (hash) XXH64_update(&state, dst + off, len);
  }
  if (hash) {
    const uint64_t got = XXH64_digest(&state);
    if (got != *e.checksum)
      fail_tensor(file, e.name,
                  "checksum mismatch (stored " + hex64(*e.checksum) + ", data gives " + hex64(got) +
                      "): the file is corrupt; restore it from a good copy");
  }
  if (e.dtype == DType::Bool) {
    // Any byte but 0 or 1 would be an invalid C++ bool.
    const auto* p = reinterpret_cast<const uint8_t*>(dst);
    for (size_t i = 0; i < n; ++i)
      if (p[i] > 1)
        fail_tensor(file, e.name, "BOOL byte " + std::to_string(i) + " is " + std::to_string(p[i]) + ", not 0 or 1");
  }
}

LoadedFile read_tensors(const std::string& file, const Header& h, const ReadAt& read_at, const LoadOptions& opt) {
  if (opt.dtype)
    TB_CHECK(core::is_floating(*opt.dtype), "checkpoint.load", "LoadOptions.dtype must be a floating dtype, got ",
             core::name(*opt.dtype));
  LoadedFile out;
  out.metadata = h.metadata;
  out.tensors.reserve(h.entries.size());
  const uint64_t batch_bytes = opt.dtype ? kConvertBatchBytes : UINT64_MAX;
  std::vector<Tensor> batch;
  for (size_t first = 0; first < h.entries.size();) {
    // [first, last): whole tensors, at least one, up to batch_bytes.
    size_t last = first;
    uint64_t bytes = 0;
    for (; last < h.entries.size() && (last == first || bytes < batch_bytes); ++last)
      bytes += h.entries[last].end - h.entries[last].begin;
    const int64_t count = int64_t(last - first);
    batch.clear();
    for (size_t i = first; i < last; ++i)
      batch.push_back(empty(h.entries[i].shape, h.entries[i].dtype));  // bounded by the file's size
    for_each_tensor(count, bytes, [&](int64_t k) {
      read_entry(file, h.entries[first + size_t(k)], static_cast<char*>(batch[size_t(k)].data()), read_at,
                 opt.verify_checksums);
    });
    for (size_t i = first; i < last; ++i) {
      Tensor& t = batch[i - first];
      if (opt.dtype && core::is_floating(t.dtype())) t = t.to(*opt.dtype);
      out.tensors.emplace_back(h.entries[i].name, std::move(t));
    }
    first = last;
  }
  return out;
}

}  // namespace

const char* format_dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "BOOL";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::BFloat16: return "BF16";
    case DType::Float16: return "F16";
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
  }
  throw core::Error("checkpoint", "invalid dtype");
}

std::optional<DType> dtype_from_format_name(std::string_view s) {
  for (DType t : core::kAllDTypes)
    if (s == format_dtype_name(t)) return t;
  return std::nullopt;
}

std::string checksum_hex(const void* data, size_t n) { return hex64(XXH64(data, n, 0)); }

void save_file(const std::string& path, const NamedTensors& tensors,
               const std::map<std::string, std::string>& metadata) {
  save_file(path, tensors, metadata, SaveFileOptions{});
}

std::vector<WrittenChecksums> save_file(const std::string& path, const NamedTensors& tensors,
                                        const std::map<std::string, std::string>& metadata,
                                        const SaveFileOptions& options) {
  const char* op = "checkpoint.save";
  TB_CHECK(options.block_bytes >= 0, op, "'", path, "': block_bytes must be >= 0, got ", options.block_bytes);
  std::set<std::string> names;
  std::vector<Tensor> data;  // contiguous versions, in the caller's order
  data.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    TB_CHECK(!name.empty(), op, "'", path, "': a tensor has an empty name");
    TB_CHECK(name != kMetadataKey, op, "'", path, "': '__metadata__' is reserved and cannot name a tensor");
    TB_CHECK(names.insert(name).second, op, "'", path, "': two tensors are named '", name, "'");
    TB_CHECK(t.defined(), op, "'", path, "': tensor '", name, "' is undefined");
    TB_CHECK(t.device().type == core::DeviceType::CPU, op, "'", path, "': tensor '", name, "' is on ", t.device().str(),
             "; copy it to the CPU first");
    data.push_back(t.contiguous());
  }
  for (const auto& [k, v] : metadata)
    TB_CHECK(k.rfind(kChecksumPrefix, 0) != 0, op, "'", path, "': metadata key '", k,
             "' uses the reserved prefix 'checksum.'");

  // Header: __metadata__ first (as the Python writer does), then tensors in the caller's order.
  // Written piece by piece: linear in the number of tensors (an ordered_json object would
  // search its keys on every insertion), and the keys are already known to be unique. The
  // checksums are 16 hex digits, so the header's size is known before the data is hashed: the
  // data goes first (hashed as it is written, Note [Load and save I/O]) and the header, with the
  // checksums filled in, last.
  std::string meta_text, tensor_text;
  uint64_t offset = 0;
  struct Chunk {
    const char* data;
    size_t bytes;
    uint64_t offset;  // in the data section
    size_t sum_at;    // where its checksum's 16 digits go in meta_text
  };
  std::vector<Chunk> chunks;
  std::string text;
  try {
    auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(); };
    for (const auto& [k, v] : metadata) meta_text += quoted(k) + ":" + quoted(v) + ",";
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = data[i];
      const size_t n = size_t(t.numel()) * t.itemsize();
      const std::string name = quoted(tensors[i].first);
      meta_text += quoted(std::string(kChecksumPrefix) + tensors[i].first) + ":\"";
      chunks.push_back({n > 0 ? static_cast<const char*>(t.data()) : nullptr, n, offset, meta_text.size()});
      meta_text += std::string(16, '0') + "\",";
      const nlohmann::ordered_json entry = {{"dtype", format_dtype_name(t.dtype())},
                                            {"shape", t.sizes()},
                                            {"data_offsets", {offset, offset + n}}};
      tensor_text += "," + name + ":" + entry.dump();
      offset += n;
    }
  } catch (const nlohmann::json::exception& e) {
    throw core::Error(op, "'" + path + "': a tensor name or metadata entry is not valid UTF-8: " + e.what());
  }
  if (!meta_text.empty()) meta_text.pop_back();  // the last ','
  const std::string head = "{\"" + std::string(kMetadataKey) + "\":{";
  text = head + meta_text + "}" + tensor_text + "}";
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data starts 8-byte aligned
  const uint64_t n = text.size();
  const uint64_t data_start = 8 + n;

  AtomicWriter w(path, !options.atomic);
  std::vector<WrittenChecksums> sums(chunks.size());
  const size_t block = size_t(options.block_bytes);
  for_each_tensor(int64_t(chunks.size()), offset, [&](int64_t k) {
    const Chunk& c = chunks[size_t(k)];
    WrittenChecksums& out = sums[size_t(k)];
    XXH64_state_t state, block_state;
    XXH64_reset(&state, 0);
    XXH64_reset(&block_state, 0);
    size_t flushed = 0;  // bytes of this tensor handed to the disk's writeback
    for (size_t off = 0, len = 0; off < c.bytes; off += len) {
      len = std::min(kBlock, c.bytes - off);
      if (block > 0) len = std::min(len, block - off % block);  // a piece never straddles a block
      // Both hashes read the piece while it is in the core's cache, then write() copies it.
      XXH64_update(&state, c.data + off, len);
      if (block > 0) {
        XXH64_update(&block_state, c.data + off, len);
        if ((off + len) % block == 0 || off + len == c.bytes) {
          out.blocks.push_back(XXH64_digest(&block_state));
          XXH64_reset(&block_state, 0);
        }
      }
      w.write_at(data_start + c.offset + off, c.data + off, len);
      const size_t pending = off + len - flushed;
      if (pending >= kWritebackBytes || (off + len == c.bytes && pending >= kBlock)) {
        w.start_writeback(data_start + c.offset + flushed, off + len - flushed);
        flushed = off + len;
      }
    }
    out.whole = XXH64_digest(&state);
  });
  for (size_t k = 0; k < chunks.size(); ++k) text.replace(head.size() + chunks[k].sum_at, 16, hex64(sums[k].whole));
  char len[8];
  std::memcpy(len, &n, 8);
  w.write_at(0, len, 8);
  w.write_at(8, text.data(), text.size());
  w.commit();
  return sums;
}

LoadedFile load_bytes(std::string_view bytes, const LoadOptions& options, const std::string& name) {
  if (bytes.size() < 8)
    fail(name, "it is " + std::to_string(bytes.size()) + " bytes, too short for the 8-byte header length");
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes)
    fail(name, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                   " bytes (corrupt file?)");
  if (n > bytes.size() - 8)
    fail(name, "header length " + std::to_string(n) + " exceeds the " + std::to_string(bytes.size() - 8) +
                   " bytes after the length field (the file is truncated)");
  const uint64_t data_start = 8 + n;
  const Header h = parse_header(name, bytes.substr(8, size_t(n)), bytes.size() - data_start);
  return read_tensors(
      name, h, [&](uint64_t off, void* dst, size_t len) { std::memcpy(dst, bytes.data() + data_start + off, len); },
      options);
}

namespace {

// An open file's validated header (the caller keeps `fd` open while it reads data).
struct OpenedHeader {
  Header header;
  uint64_t data_start = 0;
};

OpenedHeader read_header_fd(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file");  // open_regular_file refused it already
  const uint64_t size = uint64_t(st.st_size);
  auto pread_all = [&](uint64_t pos, void* dst, size_t len) { pread_exact(fd, pos, dst, len, path); };
  if (size < 8) fail(path, "it is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  uint64_t n;
  pread_all(0, &n, 8);
  if (n > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(n) + " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                   " bytes (corrupt file?)");
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " exceeds the " + std::to_string(size - 8) +
                   " bytes after the length field (the file is truncated)");
  std::string text(size_t(n), '\0');
  if (n > 0) pread_all(8, text.data(), size_t(n));
  const uint64_t data_start = 8 + n;
  return {parse_header(path, text, size - data_start), data_start};
}

struct Fd {
  int fd;
  explicit Fd(const std::string& path) {
    std::string problem;
    fd = open_regular_file(path, problem);  // a FIFO or a device would block or never end
    if (fd < 0) fail(path, problem);
  }
  ~Fd() { ::close(fd); }
};

}  // namespace

LoadedFile load_file(const std::string& path, const LoadOptions& options) {
  Fd f(path);
  const OpenedHeader o = read_header_fd(f.fd, path);
  return read_tensors(
      path, o.header,
      [&](uint64_t off, void* dst, size_t len) { pread_exact(f.fd, o.data_start + off, dst, len, path); }, options);
}

FileIndex read_index(const std::string& path) {
  Fd f(path);
  const OpenedHeader o = read_header_fd(f.fd, path);
  FileIndex idx;
  idx.path = path;
  idx.metadata = o.header.metadata;
  for (const Entry& e : o.header.entries) {
    IndexEntry x;
    x.name = e.name;
    x.dtype = e.dtype;
    x.shape = e.shape;
    x.offset = o.data_start + e.begin;
    x.nbytes = e.end - e.begin;
    if (e.checksum) x.checksum = hex64(*e.checksum);
    idx.tensors.push_back(std::move(x));
  }
  return idx;
}

const IndexEntry* FileIndex::find(const std::string& name) const {
  for (const IndexEntry& e : tensors)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace tb::checkpoint
