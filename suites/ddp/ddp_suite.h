// The `ddp` suite: DistributedDataParallel checked against one LibTorch process, run inside every
// rank of a launched world (harness/suite.h, Note [Distributed suites]). Every rank returns the
// same case names in the same order; rank 0's records carry the metrics.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"
#include "harness/suite.h"

namespace tb::suites {

// Correctness cases (ddp_suite.cpp): equivalence with LibTorch on the concatenated batch, no_sync,
// unused parameters, state broadcast, bucket layout, the DDP Trainer (resume), and at world 2 the
// Fashion-MNIST run.
std::vector<harness::TestCase> ddp_rank_tests(int world);
// Benchmarks (ddp_bench.cpp): records of kind "benchmark" named ddp/<model>/w<world>/engine.
std::vector<harness::TestCase> ddp_rank_benches(int world);
// Whether the ddp benchmarks run DDP with gradient_as_bucket_view, on both sides (the engine's
// ranks and the PyTorch peer): on unless TRAINBENCH_DDP_BUCKET_VIEW=0.
bool ddp_bench_bucket_view();
// The PyTorch peer's AdamW implementation (torch_ddp_bench.py --adamw): TRAINBENCH_DDP_TORCH_ADAMW,
// default `fused` (like the engine's: one pass per parameter); `foreach` or `for-loop` (PyTorch's
// own default on CPU) to measure against those.
std::string ddp_bench_torch_adamw();

// The world-1 step's parts at one batch (seconds per step), as the ddp and fsdp benchmarks time
// it again for the scaling projection.
struct SmallBatchStep {
  int64_t batch = 0;
  double step_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, main_thread_cpu_s = 0;
};
// The world-1 step timed again at a quarter of the batch (Note [Two batches at world 1] in
// ddp_bench.cpp: small_batch, small_batch_*_ms), then on one thread at half and a quarter of it
// (Note [One thread at world 1]: one_thread_*). `time_at(b)` warms up and times the step with
// the inputs x and y cut to their first b samples; x and y are whole again afterwards.
void add_world1_metrics(harness::Record& rec, Tensor& x, Tensor& y, int64_t per_rank,
                        const std::function<SmallBatchStep(int64_t batch)>& time_at);

}  // namespace tb::suites
