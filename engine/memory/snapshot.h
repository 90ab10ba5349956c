// The memory snapshot: the allocator's live and cached blocks, its statistics and the recorded
// allocation events (when history is on), taken at one moment, and its JSON (docs/memory.md).
// PyTorch's torch.cuda.memory._record_memory_history / _snapshot are the model; reports/
// memory_snapshot.py turns the JSON into the pickle that PyTorch's memory_viz opens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/memory/allocator.h"
#include "engine/memory/site.h"

namespace tb::memory {

struct OomReport;  // oom.h

enum class Action : uint8_t { Alloc, Free, SegmentAlloc, SegmentFree, Oom };
const char* action_name(Action a);  // "alloc", "free", "segment_alloc", "segment_free", "oom"

struct Event {
  int64_t time_us = 0;  // microseconds since the Unix epoch (comparable across ranks)
  Action action = Action::Alloc;
  uintptr_t address = 0;  // 0 for oom
  int64_t size = 0;       // the block's size (oom: the size class asked for)
  int64_t requested = 0;  // bytes asked (alloc, free, oom); equal to size for segments
  Tag tag = Tag::Other;
  Site site;  // of the allocation (a free carries its block's)
};

struct Snapshot {
  struct Block {
    uintptr_t address = 0;
    int64_t size = 0;
    int64_t requested = 0;
    Tag tag = Tag::Other;
    Site site;
    int64_t time_us = 0;  // when allocated; 0 if history was off then
  };
  struct Cached {
    uintptr_t address = 0;
    int64_t size = 0;
  };
  int64_t time_us = 0;
  Stats stats;
  int64_t num_ooms = 0;
  int64_t limit = 0;
  std::vector<Block> live;     // largest first
  std::vector<Cached> cached;  // free blocks kept for reuse, largest first
  std::vector<Event> events;   // oldest first
  size_t max_entries = 0;      // the ring's capacity (0: history off)
  int64_t dropped_events = 0;  // recorded but pushed out of the ring
};

// Keeps the last `max_entries` allocation events of `a` (alloc, free, segment_alloc,
// segment_free, oom) for its snapshots; 0 turns recording off and drops them. Blocks allocated
// while it is on also remember their allocation time. As
// torch.cuda.memory._record_memory_history(max_entries=N); TRAINBENCH_MEMORY_HISTORY=N sets it
// when the allocator is made.
void record_history(CpuCachingAllocator& a, size_t max_entries);
// a's live and cached blocks, statistics and recorded events, consistent at one moment.
Snapshot snapshot(const CpuCachingAllocator& a);
// The same for cpu_allocator().
void record_history(size_t max_entries);
Snapshot snapshot();
// The snapshot as JSON text (docs/memory.md); `reason` is "on_demand" or "oom", `oom` the
// report when written for an OutOfMemoryError.
std::string snapshot_json(const Snapshot& s, const std::string& reason = "on_demand", const OomReport* oom = nullptr);
// Writes snapshot_json to <dir>/memory_snapshot_rank<R>.json (R: the first set of
// TRAINBENCH_RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, RANK, as dist::world_from_env; else 0),
// atomically (temporary file, rename); returns the path. A directory that cannot be written is a
// core::Error.
std::string write_snapshot(const std::string& dir, const Snapshot& s, const std::string& reason = "on_demand",
                           const OomReport* oom = nullptr);
// The file name for rank `rank`.
std::string snapshot_file_name(int64_t rank);

}  // namespace tb::memory
