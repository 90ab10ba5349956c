// A fresh CPU caching allocator for tests: every statistic starts at zero, and no cap, injected
// failure, history or snapshot directory, whatever the TRAINBENCH_MEMORY_* variables say.
#pragma once
#include "engine/memory/allocator.h"

namespace tb::memory {

struct Fresh {
  CpuCachingAllocator a;
  Fresh() {
    a.set_limit(0);
    a.set_fail_at(0);
    a.record_history(0);
    a.set_oom_snapshot_dir("");
    a.set_release_cache(true);
  }
};

}  // namespace tb::memory
