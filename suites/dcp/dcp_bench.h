// The `dcp` suite's benchmarks (dcp_bench.cpp), run inside every rank of a launched world, and
// their PyTorch peer (reference/dist/torch_dcp_bench.py, torch.distributed.checkpoint on Gloo,
// run by the parent after each world size; dcp_peer is in suites/comm/comm_peer.cpp).
// Cases are named dcp/<model>/w<world>/<impl>:
//   model  gpt: the training state of nn::GPT(vocab 16384, d 1024, 2 blocks, 8 heads, T 512) under
//          AdamW: each parameter with its exp_avg and exp_avg_sq (float32) and a 0-dim step,
//          about 700 MB in all (dcp_bench_spec); each tensor's rows split across the ranks as
//          torch.chunk splits them (FSDP's dim-0 shards; the 0-dim steps whole on every rank)
//   impl   engine  checkpoint::save_distributed / load_distributed / AsyncCheckpointer on MPI
//          torch   torch.distributed.checkpoint save / load / async_save of DTensors (Shard(0))
//                  on Gloo, FileSystemWriter's defaults (fsync on)
// docs/results.md ("dcp") defines the metrics.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/core/shape.h"
#include "harness/suite.h"

namespace tb::suites {

// The benchmarked state's tensors (name, global shape), the same list on both sides: the peer
// gets it as a JSON file.
std::vector<std::pair<std::string, core::Shape>> dcp_bench_spec(const std::string& model);
std::vector<std::string> dcp_bench_models();  // {"gpt"}

// Run inside every rank (worlds 1 and 2), the same names in the same order.
std::vector<harness::TestCase> dcp_rank_benches(int world);

// Run in the parent after the ranks of `world`: the cases dcp/<model>/w<world>/torch that
// `wanted` selects.
std::vector<harness::Record> dcp_peer(int world, const harness::CaseFilter& wanted);

}  // namespace tb::suites
