// The peak suite (`trainbench bench --suite peak`): this machine's measured floors, the figures
// the matmul benchmarks are held against (docs/results.md, "Peak records"). Self-timed,
// engine-free (harness::register_timed_benches), at 1 and 2 threads (std::thread, not pinned):
//   peak/fp32_fma/t<N>   AVX-512 FMAs on 16 register chains: 2*16 FLOPs per instruction
//   peak/bf16_dot/t<N>   AVX512-BF16 vdpbf16ps on 16 chains: 2*32 FLOPs per instruction
//   peak/amx_bf16/t<N>   AMX tdpbf16ps on 4 C tiles: 16*16*32*2 = 16384 FLOPs per instruction
//   peak/stream/t<N>     memory bandwidth: z = x + y and a read-only sum over 64M floats
// A case whose ISA this CPU (or OS) lacks is skipped with the reason. Every kernel call's output
// is compared with a scalar-computed expectation; a mismatch fails the case.
#pragma once
#include <vector>

#include "harness/suite.h"

namespace tb::suites {

std::vector<harness::TestCase> peak_benches();

}  // namespace tb::suites
