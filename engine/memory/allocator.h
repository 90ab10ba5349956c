// Allocator interface and the CPU caching allocator: freed blocks are kept by size and reused,
// so steady-state training allocates no fresh pages. Every block is counted under the tag that
// was current when it was allocated (TagGuard) or was given later (retag: a tensor made as
// `other` and then registered as a parameter), and remembers where it came from (the op, the
// module path and the user label current on the allocating thread: site.h). An optional cap
// (TRAINBENCH_MEMORY_LIMIT: bytes, K/M/G/T, or a fraction of RAM) or an injected failure
// (TRAINBENCH_MEMORY_FAIL_AT) turns a request into an OutOfMemoryError whose OomReport (oom.h)
// says what was asked, by which op and module, what is held, by which tags, what is cached, and
// the largest live blocks with the op that made each. With history on (record_history), a
// bounded ring of allocation events feeds the memory snapshot (snapshot.h).
// See Note [Memory tags] in allocator.cpp for who sets which tag.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/error.h"

namespace tb::memory {

enum class Tag : uint8_t { Other, Parameter, Gradient, OptimizerState, Activation, Communication };
inline constexpr int kNumTags = 6;
const char* tag_name(Tag t);

// Scopes a tag: allocations made on this thread while the guard lives carry it. With
// keep_outer, a tag already set by an enclosing scope (anything but Other) stays: an optimizer
// step that calls a differentiable op keeps its optimizer_state tag.
class TagGuard {
 public:
  explicit TagGuard(Tag t, bool keep_outer = false);
  ~TagGuard();
  TagGuard(const TagGuard&) = delete;
  TagGuard& operator=(const TagGuard&) = delete;
  static Tag current();

 private:
  Tag prev_;
};

struct Stats {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // allocated + cached free blocks
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;         // requests served
  int64_t num_cache_hits = 0;     // requests served from the cache
  int64_t num_system_allocs = 0;  // requests that went to the system
  std::array<int64_t, kNumTags> allocated_by_tag{};
  int64_t num_ooms = 0;  // requests refused (counted nowhere else)
};

// What the allocator knew when it refused a request (engine/memory/oom.h).
struct OomReport;

class OutOfMemoryError : public core::Error {
 public:
  OutOfMemoryError(std::string detail, uint64_t requested)
      : core::Error("allocate", std::move(detail)), requested_(requested) {}
  // The message is the report's text (oom.h: format_oom).
  explicit OutOfMemoryError(std::shared_ptr<const OomReport> report);
  uint64_t requested() const { return requested_; }
  // Null only for errors made from a bare message.
  const OomReport* report() const { return report_.get(); }

 private:
  uint64_t requested_;
  std::shared_ptr<const OomReport> report_;
};

// A block of memory and the means to return it.
class Allocator;
struct DataDeleter {
  Allocator* owner = nullptr;
  void operator()(void* p) const;
};
using DataPtr = std::unique_ptr<void, DataDeleter>;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;  // the one method; 64-byte aligned
  // Counts the live block at `p` under `tag` from now on (a no-op for allocators without tags).
  virtual void retag(void* /*p*/, Tag /*tag*/) {}

 protected:
  friend struct DataDeleter;
  virtual void release(void* p) = 0;
};

struct Snapshot;  // snapshot.h

class CpuCachingAllocator final : public Allocator {
 public:
  // Reads TRAINBENCH_MEMORY_LIMIT, TRAINBENCH_MEMORY_FAIL_AT, TRAINBENCH_MEMORY_HISTORY,
  // TRAINBENCH_MEMORY_SNAPSHOT_DIR and TRAINBENCH_MEMORY_RELEASE_CACHE (docs/env.md); a bad value
  // is a core::Error naming it.
  CpuCachingAllocator();
  ~CpuCachingAllocator() override;
  DataPtr allocate(size_t nbytes) override;
  void retag(void* p, Tag tag) override;
  Stats stats() const;
  void reset_peak();
  void empty_cache();             // return cached free blocks to the system
  void set_limit(int64_t bytes);  // 0 = no cap; negative is an error (limit.h: fractions of RAM)
  int64_t limit() const;
  // Whether a request over the cap first returns the cached free blocks to the system and tries
  // again (default; TRAINBENCH_MEMORY_RELEASE_CACHE=0 turns it off). Off models memory that the
  // allocator cannot give back (fragmented CUDA segments): cached blocks of other sizes then
  // count against the cap, and an OOM report shows them as cached but free.
  void set_release_cache(bool on);
  // Fault injection: the k-th allocation request from now (k >= 1; requests of 0 bytes do not
  // count) throws OutOfMemoryError once, as if over the cap; 0 disarms. Returns the requests
  // still to go before it fires (0 when disarmed).
  void set_fail_at(int64_t k);
  int64_t fail_at() const;
  // Keeps the last `max_entries` allocation events (alloc, free, segment_alloc, segment_free,
  // oom) for snapshot(); 0 turns recording off and drops them. Blocks allocated while it is on
  // also remember their allocation time.
  void record_history(size_t max_entries);
  // The live and cached blocks, statistics and recorded events, consistent at one moment.
  Snapshot snapshot() const;
  // Where an OutOfMemoryError writes memory_snapshot_rank<R>.json before it is thrown (""
  // = nowhere; TRAINBENCH_MEMORY_SNAPSHOT_DIR sets it at construction).
  void set_oom_snapshot_dir(std::string dir);

 private:
  void release(void* p) override;
  struct Impl;  // allocator.cpp: its state and the lock, so this header stays put
  std::unique_ptr<Impl> impl_;
};

CpuCachingAllocator& cpu_allocator();
// Requests above this (2^63 - 2 MiB) are refused with an OutOfMemoryError before any arithmetic
// on them: a block's rounded size must stay representable as int64 (stats, the cap).
inline constexpr size_t kMaxAllocation = size_t(INT64_MAX) & ~((size_t(2) << 20) - 1);
// The bytes a request of `nbytes` occupies (its size class); stats count these.
size_t block_size(size_t nbytes);
std::string format_bytes(int64_t n);

}  // namespace tb::memory
