// What an OutOfMemoryError carries (OutOfMemoryError::report()): the request, the cap, what
// is held and cached, by which tags, the site that asked, and the largest live blocks with the
// site that made each. format_oom() is the error's message, one fact per line.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/memory/allocator.h"
#include "engine/memory/site.h"

namespace tb::memory {

struct OomReport {
  // Why it was refused: "limit" (over the cap after dropping the cache), "fail_at" (injected:
  // set_fail_at / TRAINBENCH_MEMORY_FAIL_AT), "system" (the system refused), "too_large"
  // (above kMaxAllocation).
  std::string reason;
  uint64_t requested = 0;     // bytes asked
  int64_t block = 0;          // the size class it needed (0 when too large to have one)
  Tag tag = Tag::Other;       // the tag it would have had
  Site site;                  // who asked (strings live for the process)
  int64_t limit = 0;          // the cap (0 = none)
  int64_t allocated = 0;      // held by live blocks
  int64_t reserved = 0;       // allocated + cached
  int64_t cached_free = 0;    // reserved - allocated at the refusal (the cache dropped unless release is off)
  int64_t largest_free_block = 0;  // the largest cached block, 0 if none
  std::array<int64_t, kNumTags> allocated_by_tag{};
  struct LiveBlock {
    int64_t size = 0;
    Tag tag = Tag::Other;
    Site site;
  };
  std::vector<LiveBlock> largest_live;  // largest first, at most 5
  std::string snapshot_path;             // where the snapshot went ("" if not written)
};

// The message: "out of memory: <op> in <module> asked for ..." then held/cached/tags/largest.
std::string format_oom(const OomReport& r);

}  // namespace tb::memory
