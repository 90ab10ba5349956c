// A fresh CPU caching allocator for tests: every statistic starts at zero, and no cap, injected
// failure, history or snapshot directory, whatever the TRAINBENCH_MEMORY_* variables say.
#pragma once
#include "engine/memory/allocator.h"
#include "engine/memory/oom.h"
#include "engine/memory/snapshot.h"

namespace tb::memory {

struct Fresh {
  CpuCachingAllocator a;
  Fresh() {
    a.set_limit(0);
    set_fail_at(a, 0);
    record_history(a, 0);
    set_oom_snapshot_dir(a, "");
    set_release_cache(a, true);
  }
};

}  // namespace tb::memory
