"""trainbench_reports: turns trainbench result JSON (docs/results.md) into PNG plots, one
self-contained HTML report and a Markdown summary. Run it as ``python -m trainbench_reports``.

It reads nothing but the JSON files named on the command line (validated against
docs/result.schema.json), so reports can be made on any machine from archived results.
"""

# Measured peaks of the reference CI machine (2 cores), drawn as lines on the throughput plots so
# a figure reads as a fraction of what the hardware can do. Override with --peak-gflops and
# --peak-gbps on other machines.
DEFAULT_PEAK_GFLOPS = 270.0  # fp32 FMA throughput, 2 cores (AVX-512, measured)
DEFAULT_PEAK_GBPS = 22.0     # memory bandwidth, 2 threads (STREAM-like triad, measured)

SCHEMA_ID = "trainbench.result/1"
