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

SCHEMA_ID = "trainbench.result/1"
