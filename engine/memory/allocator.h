// Allocator interface and the CPU caching allocator: freed blocks are kept by size and reused,
// so steady-state training allocates no fresh pages. Every block is counted under the tag that
// was current when it was allocated (TagGuard) or was given later (retag: a tensor made as
// `other` and then registered as a parameter), and an optional cap (TRAINBENCH_MEMORY_LIMIT,
// bytes or with a K/M/G/T suffix) turns an over-budget request into an OutOfMemoryError that
// says what was asked, what is held, by which tags, and the largest live blocks.
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
};

class OutOfMemoryError : public core::Error {
 public:
  OutOfMemoryError(std::string detail, uint64_t requested)
      : core::Error("allocate", std::move(detail)), requested_(requested) {}
  uint64_t requested() const { return requested_; }

 private:
  uint64_t requested_;
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

class CpuCachingAllocator final : public Allocator {
 public:
  CpuCachingAllocator();
  ~CpuCachingAllocator() override;
  DataPtr allocate(size_t nbytes) override;
  void retag(void* p, Tag tag) override;
  Stats stats() const;
  void reset_peak();
  void empty_cache();             // return cached free blocks to the system
  void set_limit(int64_t bytes);  // 0 = no cap; negative is an error
  int64_t limit() const;

 private:
  void release(void* p) override;
  void free_cached_locked();
  struct Block {
    size_t size;
    Tag tag;
  };
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // rounded size -> cached blocks
  std::unordered_map<void*, Block> live_;
  Stats stats_;
  int64_t limit_ = 0;
};

CpuCachingAllocator& cpu_allocator();
// Requests above this (2^63 - 2 MiB) are refused with an OutOfMemoryError before any arithmetic
// on them: a block's rounded size must stay representable as int64 (stats, the cap).
inline constexpr size_t kMaxAllocation = size_t(INT64_MAX) & ~((size_t(2) << 20) - 1);
// The bytes a request of `nbytes` occupies (its size class); stats count these.
size_t block_size(size_t nbytes);
std::string format_bytes(int64_t n);

}  // namespace tb::memory
