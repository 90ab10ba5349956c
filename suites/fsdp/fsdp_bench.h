// The `fsdp` suite's benchmarks (fsdp_bench.cpp), run inside every rank of a launched world, and
// its PyTorch peer (reference/dist/torch_fsdp_bench.py, run by the parent after each world size).
// Cases are named fsdp/<model>/<strategy>/w<world>/<impl>:
//   model     mlp | gpt (the ddp benchmarks' models and global batches, suites/ddp/ddp_bench.cpp)
//   strategy  full_shard | shard_grad_op | no_shard, and hybrid_shard at world 4 (2 x 2);
//             `ddp` for impl engine-ddp
//   impl      engine      dist::fully_shard per unit (each Linear of the MLP, each TransformerBlock
//                         of the GPT, then the root) on the MPI process group
//             engine-ddp  the engine's DDP on the same model and batch (strategy `ddp`)
//             torch       PyTorch FSDP2 (torch.distributed.fsdp.fully_shard) on Gloo, same units
// docs/results.md ("fsdp") defines the metrics.
#pragma once
#include <string>
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

// The strategies benchmarked at `world` (hybrid_shard only at world 4, as 2 groups of 2).
std::vector<std::string> fsdp_bench_strategies(int world);
// The models benchmarked: TRAINBENCH_FSDP_MODELS (comma-separated, default mlp,gpt).
std::vector<std::string> fsdp_bench_models();

// Run inside every rank, the same names in the same order.
std::vector<harness::TestCase> fsdp_rank_benches(int world);

// Run in the parent after the ranks of `world` (suites/comm/comm_peer.cpp, as ddp_peer): the
// cases fsdp/<model>/<strategy>/w<world>/torch that `wanted` selects.
std::vector<harness::Record> fsdp_peer(int world, const harness::CaseFilter& wanted);

}  // namespace tb::suites
