// save_file / load_file for the safetensors layout (see Note [File format] in safetensors.h).
// The loader is written for hostile input: every number in the header is range-checked before it
// is used for an allocation or an offset, and data is read only after the whole header is valid.
#include "engine/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/atomic_file.h"
#include "engine/checkpoint/untrusted_json.h"
#include "engine/core/error.h"

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

// Reads `n` bytes at data-section offset `off` into dst; throws on a short read.
using ReadAt = std::function<void(uint64_t off, void* dst, size_t n)>;

LoadedFile read_tensors(const std::string& file, const Header& h, const ReadAt& read_at, const LoadOptions& opt) {
  if (opt.dtype)
    TB_CHECK(core::is_floating(*opt.dtype), "checkpoint.load", "LoadOptions.dtype must be a floating dtype, got ",
             core::name(*opt.dtype));
  LoadedFile out;
  out.metadata = h.metadata;
  out.tensors.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    Tensor t = empty(e.shape, e.dtype);  // e.end - e.begin bytes, bounded by the file's size
    const size_t n = size_t(e.end - e.begin);
    if (n > 0) read_at(e.begin, t.data(), n);
    if (e.checksum && opt.verify_checksums) {
      const uint64_t got = XXH64(t.data(), n, 0);
      if (got != *e.checksum)
        fail_tensor(file, e.name,
                    "checksum mismatch (stored " + hex64(*e.checksum) + ", data gives " + hex64(got) +
                        "): the file is corrupt; restore it from a good copy");
    }
    if (e.dtype == DType::Bool) {
      // Any byte but 0 or 1 would be an invalid C++ bool.
      const auto* p = static_cast<const uint8_t*>(t.data());
      for (size_t i = 0; i < n; ++i)
        if (p[i] > 1)
          fail_tensor(file, e.name, "BOOL byte " + std::to_string(i) + " is " + std::to_string(p[i]) + ", not 0 or 1");
    }
    if (opt.dtype && core::is_floating(e.dtype)) t = t.to(*opt.dtype);
    out.tensors.emplace_back(e.name, std::move(t));
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
  const char* op = "checkpoint.save";
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
  // search its keys on every insertion), and the keys are already known to be unique.
  std::string meta_text, tensor_text;
  uint64_t offset = 0;
  std::vector<std::pair<const void*, size_t>> chunks;
  std::string text;
  try {
    auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(); };
    for (const auto& [k, v] : metadata) meta_text += quoted(k) + ":" + quoted(v) + ",";
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = data[i];
      const size_t n = size_t(t.numel()) * t.itemsize();
      const void* p = n > 0 ? t.data() : nullptr;
      const std::string name = quoted(tensors[i].first);
      meta_text += quoted(std::string(kChecksumPrefix) + tensors[i].first) + ":\"" + checksum_hex(p, n) + "\",";
      const nlohmann::ordered_json entry = {{"dtype", format_dtype_name(t.dtype())},
                                            {"shape", t.sizes()},
                                            {"data_offsets", {offset, offset + n}}};
      tensor_text += "," + name + ":" + entry.dump();
      offset += n;
      chunks.emplace_back(p, n);
    }
  } catch (const nlohmann::json::exception& e) {
    throw core::Error(op, "'" + path + "': a tensor name or metadata entry is not valid UTF-8: " + e.what());
  }
  if (!meta_text.empty()) meta_text.pop_back();  // the last ','
  text = "{\"" + std::string(kMetadataKey) + "\":{" + meta_text + "}" + tensor_text + "}";
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data starts 8-byte aligned
  const uint64_t n = text.size();
  char len[8];
  std::memcpy(len, &n, 8);

  AtomicWriter w(path);
  w.write(len, 8);
  w.write(text);
  for (const auto& [p, bytes] : chunks)
    if (bytes > 0) w.write(p, bytes);
  w.commit();
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
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a safetensors file");
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
  explicit Fd(const std::string& path) : fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
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
