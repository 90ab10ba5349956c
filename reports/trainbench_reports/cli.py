"""Command line: python -m trainbench_reports [--out DIR] [--peak-gflops X] [--peak-gbps Y] JSON...

Exit status: 0 report written; 2 a bad command line, input or --out (one line on stderr naming the
file and the problem: missing, a directory, unreadable, a FIFO or device, over 64 MiB, empty,
not UTF-8, not JSON, another schema, not a valid result, --out a file or not writable); 3 this interpreter cannot run the
report (see __main__.py); 1 a bug in the report generator (with its traceback)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from . import (DEFAULT_PEAK_GBPS, DEFAULT_PEAK_GFLOPS, DEFAULT_PEAK_GFLOPS_AVX2, default_peak_gflops,
               dist_plots, history, html_report, markdown, memory_snapshot, plots, profile_plots,
               projection_plots, scenario_plots)
from .load import LoadError, expand_folders, load_results
from .output import OutputError
from .summary import passed_benchmarks, rows_of


def _peak(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number (got {text!r})")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m trainbench_reports",
        description="Make PNG plots, report.html and summary.md from trainbench result JSON.")
    p.add_argument("inputs", nargs="*", metavar="JSON",
                   help="result files (docs/results.md), or folders of them (their *.json), and memory "
                        "snapshots (docs/memory.md), whose per-rank timelines are plotted")
    p.add_argument("--out", default="report", metavar="DIR",
                   help="output folder, created if needed (default: ./report)")
    p.add_argument("--peak-gflops", type=_peak, default=None,
                   help="machine peak fp32 GFLOP/s drawn on the plot (default: measured on the "
                        f"2-core CI machines, {DEFAULT_PEAK_GFLOPS:g} with AVX-512, or "
                        f"{DEFAULT_PEAK_GFLOPS_AVX2:g} when every input's run header says cpu_isa avx2)")
    p.add_argument("--peak-gbps", type=_peak, default=DEFAULT_PEAK_GBPS,
                   help="machine memory bandwidth in GB/s drawn on the plot "
                        f"(default {DEFAULT_PEAK_GBPS:g}: measured with 2 threads)")
    p.add_argument("--schema", type=Path, default=None,
                   help="JSON Schema to validate against (default: docs/result.schema.json)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    return p.parse_args(argv)


DIST_PNGS = ("comm_busbw.png", "comm_time.png", "ddp_scaling.png", "ddp_step.png",
             "fashion_mnist.png", "fsdp_throughput.png", "fsdp_memory.png", "fsdp_comm.png",
             "dcp_throughput.png", "scenarios.png", "profile_step.png", "projection.png",
             "projection_validation.png")


def dist_items(rows):
    """(run label when several files are reported, record) for the distributed plots."""
    multi = len({id(r.result) for r in rows}) > 1
    return [(r.result.label if multi else None, r.rec) for r in rows]


def distributed_plots(rows, out: Path):
    """The comm and ddp plots, listed only when the input has records of their kind (a report of
    single-process suites should not list five empty distributed plots)."""
    items = dist_items(rows)
    cases = [r.rec["case"] for r in rows]
    has_comm = any(dist_plots.COMM_CASE.match(c) for c in cases)
    has_ddp = any(dist_plots.DDP_CASE.match(c) for c in cases)
    has_fsdp = any(dist_plots.FSDP_CASE.match(c) for c in cases)
    has_dcp = any(dist_plots.DCP_CASE.match(c) for c in cases)
    has_fashion = any(dist_plots.is_fashion(r.rec["case"]) and r.rec["suite"] != "training"
                      and r.rec.get("series") for r in rows)
    plots_ = []
    if has_comm:
        none = "No passed comm benchmark records."
        plots_ += [
            ("Collectives: bus bandwidth vs message size",
             dist_plots.comm_busbw(items, out / "comm_busbw.png"), none),
            ("Collectives: time per call vs message size",
             dist_plots.comm_time(items, out / "comm_time.png"), none)]
    if has_ddp:
        none = "No passed DDP benchmark records."
        plots_ += [
            ("DDP scaling: samples/s vs ranks", dist_plots.ddp_scaling(items, out / "ddp_scaling.png"),
             none),
            ("DDP step split", dist_plots.ddp_step_split(items, out / "ddp_step.png"),
             "No DDP records with a step split.")]
    if has_fsdp:
        none = "No passed FSDP benchmark records."
        plots_ += [
            ("FSDP throughput: samples/s vs ranks per strategy",
             dist_plots.fsdp_throughput(items, out / "fsdp_throughput.png"), none),
            ("FSDP memory per rank by category",
             dist_plots.fsdp_memory(items, out / "fsdp_memory.png"),
             "No FSDP records with memory figures."),
            ("FSDP communication: exposed vs hidden",
             dist_plots.fsdp_comm(items, out / "fsdp_comm.png"),
             "No FSDP records with communication figures.")]
    if has_dcp:
        plots_.append(("Distributed checkpoints: save/load GB/s and async blocking time",
                       dist_plots.dcp_throughput(items, out / "dcp_throughput.png"),
                       "No passed distributed-checkpoint benchmark records."))
    if scenario_plots.scenario_points(items):
        plots_.append(("Scenarios: detection rate and time to diagnosis",
                       scenario_plots.scenarios_plot(items, out / "scenarios.png"),
                       "No scenario records."))
    if profile_plots.profile_points(items):
        plots_.append(("Step breakdown (trainbench profile)",
                       profile_plots.step_breakdown(items, out / "profile_step.png"), "No profile records."))
    if has_fashion:
        plots_.append(("Fashion-MNIST: DDP beside one process",
                       dist_plots.fashion_curves(items, out / "fashion_mnist.png"),
                       "No single-process Fashion-MNIST curves to compare with."))
    return plots_


def memory_plots(snapshots, out: Path):
    """The per-rank memory timeline, listed only when memory snapshots are among the inputs."""
    if not snapshots:
        return []
    return [("Memory timeline per rank: allocated bytes by tag (memory snapshots)",
             memory_snapshot.plot_timelines(snapshots, out / "memory_timeline.png"),
             "No memory snapshot recorded events (set TRAINBENCH_MEMORY_HISTORY).")]


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return _report(args)
    except (LoadError, OutputError) as e:
        print(f"trainbench_reports: error: {e}", file=sys.stderr)
        return 2
    except Exception:
        print("trainbench_reports: internal error (a bug in the report generator; please report it "
              "with the input files):", file=sys.stderr)
        raise


def _out_dir(out: Path) -> Path:
    """--out as a writable folder, created if needed, checked before the plots take their time."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"--out {out}: cannot create the folder: {e.strerror or e}")
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(f"--out {out}: the folder is not writable")
    return out


def _report(args) -> int:
    # Folders first, so a folder's memory snapshots are set apart like named ones.
    inputs, snapshots = memory_snapshot.split_inputs(expand_folders(args.inputs))
    results = load_results(inputs, args.schema)
    if not args.inputs:
        print("trainbench_reports: warning: no input files; writing an empty report",
              file=sys.stderr)

    if args.peak_gflops is None:
        args.peak_gflops = default_peak_gflops(results)
    out = _out_dir(Path(args.out))
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
    plot_list += distributed_plots(rows, out)
    plot_list += memory_plots(snapshots, out)
    plot_list += history.plots(results, out)  # several runs: each case's trend
    plot_list += projection_plots.plots(results, out)  # comm + ddp/fsdp records: the scaling model
    # Stale plots from an earlier report into the same folder would contradict this one.
    for name in ("speedup.png", "throughput_gflops.png", "throughput_gbps.png", "correctness.png",
                 "curves.png") + DIST_PNGS + ("memory_timeline.png",):
        if not any(png and png.name == name for _, png, _ in plot_list):
            try:
                (out / name).unlink(missing_ok=True)
            except OSError as e:
                raise OutputError(f"{out / name}: cannot remove the stale plot: {e.strerror or e}")

    peaks = (f"Peak lines: {args.peak_gflops:g} GFLOP/s fp32 and {args.peak_gbps:g} GB/s memory "
             "bandwidth (override with --peak-gflops / --peak-gbps).")
    items = dist_items(rows)
    sections = []
    table = dist_plots.comm_table_html(items)
    if table:
        sections.append(("Collectives: the engine's overhead over raw MPI", table))
    table = dist_plots.fsdp_table_html(items)
    if table:
        sections.append(("FSDP: the engine beside its DDP and PyTorch FSDP2", table))
    history.write_csv(results, out / history.CSV_NAME)  # every case; the HTML shows the movers
    table = history.section_html(results)
    if table:
        sections.append(("History across runs", table))
    html = html_report.write(out / "report.html", results, rows, plot_list, peaks, sections)
    md = markdown.write(out / "summary.md", results, rows,
                        extra=dist_plots.comm_table_md(items) + dist_plots.ddp_table_md(items)
                        + dist_plots.fsdp_table_md(items) + dist_plots.dcp_table_md(items)
                        + scenario_plots.scenarios_table_md(items) + profile_plots.profile_table_md(items)
                        + projection_plots.validation_table_md(results))
    if not args.quiet:
        print(f"report: {html}")
        print(f"summary: {md}")
    return 0
