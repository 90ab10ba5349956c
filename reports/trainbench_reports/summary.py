"""Shared reading of records for the HTML and Markdown outputs: rows with labels, counts,
formatted key metrics."""
from __future__ import annotations

import math
from collections import Counter, OrderedDict
from dataclasses import dataclass

from .load import Result, number

STATUSES = ("pass", "fail", "error", "skip")


@dataclass
class Row:
    result: Result
    rec: dict
    label: str  # unique-ish plot/table label of the case


def rows_of(results: list[Result]) -> list[Row]:
    multi_run = len(results) > 1
    suites = {r["suite"] for res in results for r in res.records}
    rows = []
    for res in results:
        for rec in res.records:
            label = rec["case"]
            if len(suites) > 1:
                label = f"{rec['suite']}: {label}"
            if multi_run:
                label = f"[{res.label}] {label}"
            if rec.get("rank", 0):
                label += f" (rank {rec['rank']})"
            rows.append(Row(res, rec, label))
    return rows


def counts_by_suite(rows: list[Row]) -> "OrderedDict[tuple[str, str], Counter]":
    out: OrderedDict = OrderedDict()
    for row in rows:
        out.setdefault((row.rec["suite"], row.rec["kind"]), Counter())[row.rec["status"]] += 1
    return out


def totals(rows: list[Row]) -> Counter:
    return Counter(row.rec["status"] for row in rows)


def fmt_seconds(s) -> str:
    s = number(s)
    if s is None:
        return "-"
    if s == 0:
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_value(v) -> str:
    n = number(v)
    if n is None:
        return str(v)
    if n == int(n) and abs(n) < 1e15:
        return str(int(n))
    return f"{n:.4g}"


def benchmark_key_metrics(m: dict) -> list[tuple[str, str]]:
    out = []
    if "engine_median_s" in m:
        out.append(("engine", fmt_seconds(m["engine_median_s"])))
    if "reference_median_s" in m:
        out.append(("LibTorch", fmt_seconds(m["reference_median_s"])))
    if number(m.get("speedup")) is not None:
        out.append(("speedup", f"{number(m['speedup']):.2f}x"))
    if "gflops" in m:
        ref = fmt_value(m.get("reference_gflops", "-"))
        out.append(("GFLOP/s", f"{fmt_value(m['gflops'])} vs {ref}"))
    if "gbps" in m:
        ref = fmt_value(m.get("reference_gbps", "-"))
        out.append(("GB/s", f"{fmt_value(m['gbps'])} vs {ref}"))
    return out


def key_metrics(rec: dict, limit: int = 8) -> list[tuple[str, str]]:
    """The metrics worth a table cell: timing and ratio for benchmarks, the first few otherwise."""
    m = rec.get("metrics", {})
    if rec["kind"] == "benchmark" and "engine_median_s" in m:
        return benchmark_key_metrics(m)
    items = [(k, fmt_value(v)) for k, v in m.items()]
    if len(items) > limit:
        items = items[:limit] + [("...", f"{len(m) - limit} more")]
    return items


def passed_benchmarks(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.rec["kind"] == "benchmark" and r.rec["status"] == "pass"
            and number(r.rec["metrics"].get("speedup")) is not None]


def geomean_speedup(rows: list[Row]):
    vals = [number(r.rec["metrics"]["speedup"]) for r in passed_benchmarks(rows)]
    vals = [v for v in vals if v and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
