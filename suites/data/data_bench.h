// The data suite's benchmarks (`trainbench bench --suite data`): the DataLoader's throughput on
// variable-length token sequences through pad_collate at 0..4 workers, and the data-bottleneck
// probe: the time a GPT training step waits for its batch (the profiler's dataloader.next
// events) at 0 and 2 workers. Engine-only, self-timed (harness::register_timed_benches).
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

std::vector<harness::TestCase> data_benches();

}  // namespace tb::suites
