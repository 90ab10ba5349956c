// Internal to engine/checkpoint: the distributed checkpoint's format constants and the helpers
// its writer (distributed.cpp) and its metadata reader (distributed_metadata.cpp) share.
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/shape.h"

namespace tb::checkpoint::detail {

constexpr const char* kFormat = "trainbench.distributed_checkpoint";
constexpr int kVersion = 1;
constexpr const char* kMetadataFile = "metadata.json";
constexpr const char* kStateKey = "trainbench.state";  // a consolidated file's state, in __metadata__
// Checksums cover 1 MiB blocks of each chunk, so a rank reading part of a chunk verifies what it
// read at the cost of at most two partial blocks (the ends of its range), not the whole chunk.
constexpr int64_t kBlockBytes = int64_t(1) << 20;

inline std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Rows of a tensor for sharding: dim 0, or 1 for a 0-dim tensor.
inline int64_t rows_of(const Shape& s) { return s.empty() ? 1 : s[0]; }
inline int64_t row_bytes_of(const Shape& s, DType dt) {
  int64_t n = int64_t(core::itemsize(dt));
  for (size_t i = 1; i < s.size(); ++i) n *= s[i];
  return n;
}
inline std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}
[[noreturn]] inline void bad_meta(const std::string& file, const std::string& what) {
  throw core::Error("checkpoint.load", "'" + file + "': " + what);
}
inline bool is_regular_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace tb::checkpoint::detail
