"""trainbench_reports: turns trainbench result JSON (docs/results.md) into PNG plots, one
self-contained HTML report and a Markdown summary. Run it as ``python -m trainbench_reports``.

It reads nothing but the JSON files named on the command line (validated against
docs/result.schema.json), so reports can be made on any machine from archived results.
"""

# Measured peaks of the reference CI machine (2 cores), drawn as lines on the throughput plots so
# a figure reads as a fraction of what the hardware can do. Override with --peak-gflops and
# --peak-gbps on other machines.
# Measured 2026-11-29 on the 2-core AMD EPYC machines CI runs on (shared/BASELINES.md has an
# older Intel figure of 270): 12 independent AVX-512 FMA chains reach 117 GFLOP/s on one core
# (2 x 117 for two), and a 2-thread read stream over 64 MiB on huge pages (max/float32/16M)
# reaches ~50 GB/s.
DEFAULT_PEAK_GFLOPS = 234.0  # fp32 FMA throughput, 2 cores
DEFAULT_PEAK_GBPS = 50.0     # memory read bandwidth, 2 threads
# The pool's other 2-core kind, a Zen 3 EPYC with AVX2 only (run header cpu_isa "avx2"): ten
# independent 256-bit FMA chains per thread measured 80-96 GFLOP/s on one core and 163-177 on
# two (2026-12-01). Used as the default when every input result says it ran on such a CPU.
DEFAULT_PEAK_GFLOPS_AVX2 = 175.0


def default_peak_gflops(results) -> float:
    """The GFLOP/s peak line for these results when none is given: the AVX2 figure if every
    result's run header says cpu_isa avx2, else the AVX-512 machine's."""
    if results and all(r.run.get("cpu_isa") == "avx2" for r in results):
        return DEFAULT_PEAK_GFLOPS_AVX2
    return DEFAULT_PEAK_GFLOPS

SCHEMA_ID = "trainbench.result/1"
