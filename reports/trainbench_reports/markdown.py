"""summary.md: the short, plain-text view of a report for CI logs and pull-request comments."""
from __future__ import annotations

from pathlib import Path

from .load import number
from .output import write_output
from .summary import (STATUSES, Row, counts_by_suite, fmt_seconds, fmt_value, geomean_speedup,
                      passed_benchmarks, totals)


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def write(path: Path, results, rows: list[Row], max_failures: int = 50, extra=()) -> Path:
    """extra: Markdown lines appended at the end (the collectives and DDP tables)."""
    t = totals(rows)
    lines = ["# trainbench summary", ""]
    for res in results:
        run = res.run
        lines.append(f"- `{res.path}`: {run.get('time', '?')}, git {run.get('git_revision', '?')}, "
                     f"host {run.get('host', '?')}, {run.get('threads', '?')} threads, "
                     f"{run.get('build_type', '?')}")
    if not results:
        lines.append("No result files were given.")
    lines += ["", f"**{t['pass']} passed, {t['fail']} failed, {t['error']} errors, "
              f"{t['skip']} skipped** ({len(rows)} records)", ""]

    if rows:
        lines += ["| suite | kind | " + " | ".join(STATUSES) + " |",
                  "|---|---|" + "---:|" * len(STATUSES)]
        for (suite, kind), c in counts_by_suite(rows).items():
            lines.append(f"| {_cell(suite)} | {kind} | " + " | ".join(str(c[s]) for s in STATUSES)
                         + " |")
        lines.append("")

    bad = [r for r in rows if r.rec["status"] in ("fail", "error")]
    if bad:
        lines += ["## Failures", ""]
        for r in bad[:max_failures]:
            msg = r.rec.get("message", "").splitlines()
            lines.append(f"- **{r.rec['status']}** {_cell(r.label)}"
                         + (f": {_cell(msg[0])}" if msg else ""))
        if len(bad) > max_failures:
            lines.append(f"- ... and {len(bad) - max_failures} more (see report.html)")
        lines.append("")

    benches = passed_benchmarks(rows)
    if benches:
        gm = geomean_speedup(rows)
        lines += ["## Benchmarks", "",
                  (f"Geometric-mean speedup vs LibTorch: **{gm:.2f}x** (>1: engine faster)" if gm
                   else "No positive speedup to average."), "",
                  "| case | engine | LibTorch | speedup | GFLOP/s engine / LibTorch | "
                  "GB/s engine / LibTorch |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in benches:
            m = r.rec["metrics"]
            gf = (f"{fmt_value(m['gflops'])} / {fmt_value(m.get('reference_gflops', '-'))}"
                  if "gflops" in m else "")
            gb = (f"{fmt_value(m['gbps'])} / {fmt_value(m.get('reference_gbps', '-'))}"
                  if "gbps" in m else "")
            lines.append(f"| {_cell(r.label)} | {fmt_seconds(m.get('engine_median_s'))} | "
                         f"{fmt_seconds(m.get('reference_median_s'))} | "
                         f"{number(m['speedup']):.2f}x | {gf} | {gb} |")
        lines.append("")
    lines += list(extra)
    return write_output(path, ("\n".join(lines) + "\n").encode("utf-8"))
