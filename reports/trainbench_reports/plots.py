"""The PNG plots: speedup vs LibTorch, throughput against the machine's peak, correctness counts.
Each function returns the written path, or None when the inputs hold nothing to plot."""
from __future__ import annotations

import io
import math
from collections import Counter, OrderedDict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from .load import number  # noqa: E402
from .output import write_output  # noqa: E402

ENGINE_COLOR = "#1f77b4"
TORCH_COLOR = "#ff7f0e"
STATUS_COLORS = OrderedDict(
    [("pass", "#2ca02c"), ("fail", "#d62728"), ("error", "#9467bd"), ("skip", "#7f7f7f")])


def _bar_height(n: int) -> float:
    return max(2.5, 0.28 * n + 1.5)


def _plain_log_ticks(ax) -> None:
    # Matplotlib writes log ticks as 6x10^-1; speedups and GFLOP/s read better as 0.6 and 200.
    fmt = ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(fmt)
    ax.xaxis.set_minor_formatter(fmt)
    ax.tick_params(axis="x", which="minor", labelsize=7)


def _log_limits(lo: float, hi: float, pad: float):
    """Axis limits around [lo, hi] on a log scale, kept finite, positive and increasing however
    far out the values are (1e308 times the padding is inf; a subnormal one over it is 0)."""
    clamp = lambda e: min(max(e, -300.0), 300.0)  # noqa: E731
    lo_e = clamp(math.log10(lo) - math.log10(pad))
    hi_e = max(clamp(math.log10(hi) + math.log10(pad)), lo_e + 1)
    return 10.0 ** lo_e, 10.0 ** hi_e


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return write_output(path, png.getvalue())


def speedup(items, path: Path):
    """items: [(label, record)] of passed benchmarks. Bars right of 1 mean the engine is faster."""
    data = [(lab, number(r["metrics"].get("speedup"))) for lab, r in items]
    data = [(lab, s) for lab, s in data if s is not None and s > 0 and math.isfinite(s)]
    if not data:
        return None
    labels = [d[0] for d in data]
    values = [d[1] for d in data]
    fig, ax = plt.subplots(figsize=(9, _bar_height(len(data))))
    y = range(len(data))
    colors = ["#2ca02c" if v >= 1 else "#d62728" for v in values]
    ax.barh(list(y), values, color=colors, left=0)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.invert_yaxis()
    lo, hi = min(values + [1.0]), max(values + [1.0])
    ax.set_xlim(*_log_limits(lo, hi, 1.6))
    for yi, v in zip(y, values):
        ax.annotate(f"{v:.2f}x", (v, yi), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_xlabel("speedup vs LibTorch (LibTorch median time / engine median time, log scale)")
    ax.set_title("Engine speedup vs LibTorch (>1: engine faster)")
    ax.grid(axis="x", which="both", alpha=0.3)
    _plain_log_ticks(ax)
    return _save(fig, path)


def throughput(items, path: Path, engine_key: str, torch_key: str, peak: float, unit: str,
               peak_note: str):
    """Engine and LibTorch throughput per case, with the machine's peak as a vertical line."""
    data = []
    for lab, r in items:
        e, t = number(r["metrics"].get(engine_key)), number(r["metrics"].get(torch_key))
        if (e and e > 0) or (t and t > 0):
            data.append((lab, e or 0.0, t or 0.0))
    if not data:
        return None
    n = len(data)
    fig, ax = plt.subplots(figsize=(9, _bar_height(n) * 1.3))
    h = 0.4
    ys = list(range(n))
    ax.barh([y - h / 2 for y in ys], [d[1] for d in data], height=h, color=ENGINE_COLOR,
            label="engine")
    ax.barh([y + h / 2 for y in ys], [d[2] for d in data], height=h, color=TORCH_COLOR,
            label="LibTorch")
    ax.axvline(peak, color="black", linestyle="--", linewidth=1,
               label=f"peak {peak:g} {unit} ({peak_note})")
    positive = [v for d in data for v in d[1:] if v > 0]
    ax.set_xscale("log")
    ax.set_xlim(*_log_limits(min(positive + [peak]), max(positive + [peak]), 2))
    ax.set_yticks(ys, [d[0] for d in data], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{unit} (log scale)")
    ax.set_title(f"Throughput in {unit}: engine and LibTorch against the machine's peak")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", which="both", alpha=0.3)
    _plain_log_ticks(ax)
    return _save(fig, path)


def correctness(records, path: Path):
    """Stacked pass/fail/error/skip counts per suite over correctness and scenario records."""
    per_suite: dict[str, Counter] = OrderedDict()
    for r in records:
        if r["kind"] in ("benchmark", "estimate", "projection"):  # models, not checks
            continue
        per_suite.setdefault(r["suite"], Counter())[r["status"]] += 1
    if not per_suite:
        return None
    suites = list(per_suite)
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.5 * len(suites) + 1.5)))
    left = [0] * len(suites)
    for status, color in STATUS_COLORS.items():
        counts = [per_suite[s][status] for s in suites]
        if not any(counts):
            continue
        ax.barh(suites, counts, left=left, color=color, label=status)
        for i, c in enumerate(counts):
            if c:
                ax.text(left[i] + c / 2, i, str(c), ha="center", va="center", fontsize=8,
                        color="white")
        left = [a + b for a, b in zip(left, counts)]
    ax.invert_yaxis()
    ax.set_xlabel("cases")
    ax.set_title("Correctness: cases per suite by status")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return _save(fig, path)


def curves(records, path: Path):
    """Per-record curves (record["series"]): each engine_X drawn against its reference_X."""
    with_series = [r for r in records if r.get("series")]
    if not with_series:
        return None
    panels = []  # (record label, quantity, engine values, reference values or None)
    for r in with_series:
        series = r["series"]
        for key, values in series.items():
            if not key.startswith("engine_"):
                continue
            name = key[len("engine_"):]
            if name == "time_s":  # a benchmark's repetition times: `trainbench compare` reads them
                continue
            panels.append((f'{r["suite"]}/{r["case"]}', name, values, series.get("reference_" + name)))
    if not panels:
        return None
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, (label, name, eng, ref) in zip(axes.flat, panels):
        def numeric(vs):
            return [math.nan if v is None else v for v in map(number, vs)]
        ax.plot(range(1, len(eng) + 1), numeric(eng), marker="o", label="engine")
        if ref is not None:
            ax.plot(range(1, len(ref) + 1), numeric(ref), marker="s", linestyle="--", label="LibTorch")
        ax.set_title(f"{label}: {name}", fontsize=9)
        ax.set_xlabel("epoch" if "epoch" in name else "step")  # per-epoch curves say so in their name
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    return _save(fig, path)
