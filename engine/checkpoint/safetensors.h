// Named tensors in the safetensors layout: save_file writes them atomically with a checksum per
// tensor, load_file validates the whole header before it reads a byte of data. Files open in
// any safetensors reader (Python `safetensors`, Rust, our own suites/checkpoint/read_safetensors.py).
// Not here: training state (training_state.h), sharded checkpoints, devices other than CPU.
//
// Note [File format]
//   bytes [0, 8)        N, the header length: unsigned 64-bit little-endian
//   bytes [8, 8+N)      the header: UTF-8 JSON, one object
//                         {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//                          ...,
//                          "__metadata__": {"<key>": "<string value>", ...}}   (optional)
//                       we pad it with spaces so the data starts at a multiple of 8 bytes
//   bytes [8+N, EOF)    the data section: each tensor's elements, row-major (C order),
//                       little-endian; data_offsets are relative to the start of this section
// dtypes: F64 F32 F16 BF16 I64 I32 BOOL (one byte, 0 or 1). A 0-dim tensor has shape [] and one
// element; a zero-size tensor has begin == end. Like the safetensors spec, the tensors' byte
// ranges tile the data section exactly: sorted by offset, each begins where the previous ended,
// the first at 0 and the last at the end of the file; end - begin == numel * itemsize.
// Checksums: for every tensor we write "checksum.<name>": 16 lowercase hex digits of
// XXH64(tensor bytes, seed 0) into __metadata__, so any reader still understands the file and
// ours verifies it. Other writers' files without checksums load too (nothing to verify).
// Limits enforced by the loader: header length <= 100,000,000 bytes (as safetensors), JSON nested
// at most 128 levels (kMaxJsonDepth, untrusted_json.h), at most 64 dimensions, sizes whose byte
// count overflows 64 bits are rejected.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tb::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;
inline constexpr size_t kMaxDims = 64;
inline constexpr const char* kChecksumPrefix = "checksum.";

struct LoadOptions {
  bool verify_checksums = true;
  std::optional<DType> dtype;  // cast floating tensors to this on load; others keep theirs
};

struct LoadedFile {
  NamedTensors tensors;                         // in the order of their data offsets
  std::map<std::string, std::string> metadata;  // __metadata__ without our checksum.* entries
};

// Writes atomically (see atomic_file.h). Tensors must be defined, on CPU, uniquely and
// non-emptily named; non-contiguous tensors are written contiguously. Metadata keys starting
// with "checksum." are reserved.
void save_file(const std::string& path, const NamedTensors& tensors,
               const std::map<std::string, std::string>& metadata = {});

// For a writer that needs more than the file (the distributed checkpoint's metadata).
struct SaveFileOptions {
  // > 0: also hash every block of this many bytes of each tensor (its last block may be shorter),
  // in the same pass over the bytes as the whole-tensor checksum.
  int64_t block_bytes = 0;
  // false: create `path` directly (it must not exist) and fsync it, without the temporary, the
  // rename and the directory fsync of an atomic write: for a file inside a staging directory that
  // is itself moved into place atomically once its files are durable. On failure `path` is removed.
  bool atomic = true;
};
struct WrittenChecksums {
  uint64_t whole = 0;            // XXH64 of the tensor's bytes (the header's checksum.<name>)
  std::vector<uint64_t> blocks;  // XXH64 of each block (SaveFileOptions::block_bytes > 0)
};
// save_file with options; returns the checksums of each tensor, in the caller's order.
std::vector<WrittenChecksums> save_file(const std::string& path, const NamedTensors& tensors,
                                        const std::map<std::string, std::string>& metadata,
                                        const SaveFileOptions& options);

// Throws core::Error naming the file, the tensor and the problem on any malformed, truncated or
// corrupted input.
LoadedFile load_file(const std::string& path, const LoadOptions& options = {});
// The same from bytes in memory; `name` is used in messages.
LoadedFile load_bytes(std::string_view bytes, const LoadOptions& options = {}, const std::string& name = "<memory>");

// A file's validated header without its data (for reading byte ranges of tensors): every
// tensor's dtype, shape and absolute byte range in the file, in data order.
struct IndexEntry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t offset = 0, nbytes = 0;      // bytes [offset, offset + nbytes) of the file
  std::optional<std::string> checksum;  // 16 hex digits, XXH64 of the whole tensor, when stored
};
struct FileIndex {
  std::string path;
  std::vector<IndexEntry> tensors;
  std::map<std::string, std::string> metadata;            // without checksum.* entries
  const IndexEntry* find(const std::string& name) const;  // nullptr when absent
};
// Validates the header exactly as load_file does (same errors) and reads no data.
FileIndex read_index(const std::string& path);

// The file format's name for a dtype ("F32") and back (throws on an unknown name).
const char* format_dtype_name(DType t);
std::optional<DType> dtype_from_format_name(std::string_view s);
// XXH64 (seed 0) of n bytes as 16 lowercase hex digits.
std::string checksum_hex(const void* data, size_t n);

}  // namespace tb::checkpoint
