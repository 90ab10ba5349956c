// What the CPU caching allocator's OutOfMemoryError carries (oom_report(e)): the request, the
// cap, what is held and cached, by which tags, the site that asked, and the largest live blocks
// with the site that made each; format_oom() is the error's message. Also the allocator's
// fault injection (set_fail_at, TRAINBENCH_MEMORY_FAIL_AT), its cache release switch and the
// directory an OOM writes its memory snapshot to. These are functions, not members, so that
// allocator.h stays as it is (Note [Allocator state outside the header] in allocator.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
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
  uint64_t requested = 0;          // bytes asked
  int64_t block = 0;               // the size class it needed (0 when too large to have one)
  Tag tag = Tag::Other;            // the tag it would have had
  Site site;                       // who asked (strings live for the process)
  int64_t limit = 0;               // the cap (0 = none)
  int64_t allocated = 0;           // held by live blocks
  int64_t reserved = 0;            // allocated + cached
  int64_t cached_free = 0;         // reserved - allocated at the refusal (the cache dropped unless release is off)
  int64_t largest_free_block = 0;  // the largest cached block, 0 if none
  std::array<int64_t, kNumTags> allocated_by_tag{};
  struct LiveBlock {
    int64_t size = 0;
    Tag tag = Tag::Other;
    Site site;
  };
  std::vector<LiveBlock> largest_live;  // largest first, at most 5
  std::string snapshot_path;            // where the snapshot went ("" if not written)
};

// The message: what was asked, by whom, why refused, then held/cached/tags/largest blocks.
std::string format_oom(const OomReport& r);

// The OutOfMemoryError the CPU caching allocator throws: catch OutOfMemoryError as before, and
// read the report with oom_report(e).
class OomError final : public OutOfMemoryError {
 public:
  explicit OomError(std::shared_ptr<const OomReport> report);
  const OomReport& report() const { return *report_; }

 private:
  std::shared_ptr<const OomReport> report_;
};

// e's report; null for an OutOfMemoryError made from a bare message.
const OomReport* oom_report(const OutOfMemoryError& e);

// Fault injection: the k-th allocation request from now (k >= 1; requests of 0 bytes do not
// count) throws, once, as if over the cap; 0 disarms. fail_at: the requests still to go (0 when
// disarmed). TRAINBENCH_MEMORY_FAIL_AT=k arms it when the allocator is made.
void set_fail_at(CpuCachingAllocator& a, int64_t k);
int64_t fail_at(const CpuCachingAllocator& a);
// Whether a request over the cap first returns the cached free blocks to the system and tries
// again (default; TRAINBENCH_MEMORY_RELEASE_CACHE=0 turns it off). Off models memory the
// allocator cannot give back (fragmented CUDA segments): cached blocks of other sizes count
// against the cap, and the report shows them as cached but free.
void set_release_cache(CpuCachingAllocator& a, bool on);
// Where an OOM writes memory_snapshot_rank<R>.json before it is thrown ("" = nowhere; set from
// TRAINBENCH_MEMORY_SNAPSHOT_DIR when the allocator is made).
void set_oom_snapshot_dir(CpuCachingAllocator& a, std::string dir);
// Requests refused so far (counted nowhere in Stats).
int64_t num_ooms(const CpuCachingAllocator& a);

}  // namespace tb::memory
