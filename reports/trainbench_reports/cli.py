"""Command line: python -m trainbench_reports [--out DIR] [--peak-gflops X] [--peak-gbps Y] JSON...

Exit status: 0 report written, 2 an input is missing or not a valid trainbench result."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import DEFAULT_PEAK_GBPS, DEFAULT_PEAK_GFLOPS, html_report, markdown, plots
from .load import LoadError, load_results
from .summary import passed_benchmarks, rows_of


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m trainbench_reports",
        description="Make PNG plots, report.html and summary.md from trainbench result JSON.")
    p.add_argument("inputs", nargs="*", metavar="JSON", help="result files (docs/results.md)")
    p.add_argument("--out", default="report", metavar="DIR",
                   help="output folder, created if needed (default: ./report)")
    p.add_argument("--peak-gflops", type=float, default=DEFAULT_PEAK_GFLOPS,
                   help="machine peak fp32 GFLOP/s drawn on the plot "
                        f"(default {DEFAULT_PEAK_GFLOPS:g}: measured on the 2-core CI machine)")
    p.add_argument("--peak-gbps", type=float, default=DEFAULT_PEAK_GBPS,
                   help="machine memory bandwidth in GB/s drawn on the plot "
                        f"(default {DEFAULT_PEAK_GBPS:g}: measured with 2 threads)")
    p.add_argument("--schema", type=Path, default=None,
                   help="JSON Schema to validate against (default: docs/result.schema.json)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        results = load_results(args.inputs, args.schema)
    except LoadError as e:
        print(f"trainbench_reports: error: {e}", file=sys.stderr)
        return 2
    if not args.inputs:
        print("trainbench_reports: warning: no input files; writing an empty report",
              file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_of(results)
    benches = [(r.label, r.rec) for r in passed_benchmarks(rows)]
    measured = [(r.label, r.rec) for r in rows
                if r.rec["kind"] == "benchmark" and r.rec["status"] == "pass"]
    no_bench = "No passed benchmark records in the input."
    plot_list = [
        ("Speedup vs LibTorch", plots.speedup(benches, out / "speedup.png"), no_bench),
        ("GFLOP/s vs peak",
         plots.throughput(measured, out / "throughput_gflops.png", "gflops", "reference_gflops",
                          args.peak_gflops, "GFLOP/s", "fp32"),
         "No benchmark records with a FLOP count."),
        ("GB/s vs memory bandwidth",
         plots.throughput(measured, out / "throughput_gbps.png", "gbps", "reference_gbps",
                          args.peak_gbps, "GB/s", "memory bandwidth"),
         "No benchmark records with a byte count."),
        ("Correctness per suite",
         plots.correctness([r.rec for r in rows], out / "correctness.png"),
         "No correctness records in the input."),
        ("Training curves, engine beside LibTorch",
         plots.curves([r.rec for r in rows], out / "curves.png"),
         "No records with curves in the input."),
    ]
    # Stale plots from an earlier report into the same folder would contradict this one.
    for name in ("speedup.png", "throughput_gflops.png", "throughput_gbps.png", "correctness.png",
                 "curves.png"):
        if not any(png and png.name == name for _, png, _ in plot_list):
            (out / name).unlink(missing_ok=True)

    peaks = (f"Peak lines: {args.peak_gflops:g} GFLOP/s fp32 and {args.peak_gbps:g} GB/s memory "
             "bandwidth (override with --peak-gflops / --peak-gbps).")
    html = html_report.write(out / "report.html", results, rows, plot_list, peaks)
    md = markdown.write(out / "summary.md", results, rows)
    if not args.quiet:
        print(f"report: {html}")
        print(f"summary: {md}")
    return 0
