"""The step breakdown of `trainbench profile` runs (docs/profiling.md): per model and world size,
one horizontal bar of the mean step split into forward, backward, optimizer, data and other, with
the time inside collectives drawn below it (under DDP it overlaps backward, so it is not a part of
the sum), as shares of the step, and a Markdown table of the same figures in ms.

Records: suite "profile", kind "benchmark", case "<model>/w<world>", metrics step_ms, forward_ms,
backward_ms, optimizer_ms, data_ms, other_ms, communication_ms. Each function takes
[(run label or None, record)] and returns the written path (None: nothing to draw) or lines."""
from __future__ import annotations

import re
from pathlib import Path

from .dist_plots import _save, plt
from .load import number

PROFILE_CASE = re.compile(r"^(?P<model>[A-Za-z0-9_-]+)/w(?P<world>\d+)$")
PARTS = (("forward_ms", "forward", "#1f77b4"), ("backward_ms", "backward", "#ff7f0e"),
         ("optimizer_ms", "optimizer", "#2ca02c"), ("data_ms", "data", "#9467bd"),
         ("other_ms", "other", "#7f7f7f"))


def profile_points(items):
    """[(label, {metric: ms})] of the passed profile records, in input order."""
    out = []
    for run, r in items:
        if r.get("suite") != "profile" or r.get("status") != "pass":
            continue
        g = PROFILE_CASE.match(r.get("case", ""))
        if not g:
            continue
        m = r.get("metrics", {})
        step = number(m.get("step_ms"))
        if step is None:
            continue
        vals = {k: max(0.0, number(m.get(k)) or 0.0) for k, _, _ in PARTS}
        vals["step_ms"] = step
        vals["communication_ms"] = max(0.0, number(m.get("communication_ms")) or 0.0)
        label = f"{g['model']} w{g['world']}" + ("" if run is None else f" [{run}]")
        out.append((label, vals))
    return out


def step_breakdown(items, path: Path):
    """Stacked bars: each profiled model's step as shares of its mean (models of very different
    step times side by side), annotated with the step in ms; communication as a thin hatched bar."""
    points = profile_points(items)
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.7 * len(points)))
    for i, (label, v) in enumerate(points):
        left, step = 0.0, v["step_ms"] or 1.0
        for key, name, color in PARTS:
            ax.barh(i, 100 * v[key] / step, left=left, height=0.5, color=color, label=name if i == 0 else None)
            left += 100 * v[key] / step
        ax.annotate(f"{v['step_ms']:.1f} ms", (min(left, 100), i), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
        if v["communication_ms"] > 0:
            ax.barh(i + 0.35, 100 * v["communication_ms"] / step, height=0.15, color="white", edgecolor="#d62728",
                    hatch="////", label="communication (overlaps)" if i == 0 else None)
    ax.set_yticks(range(len(points)), [p[0] for p in points], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 115)
    ax.set_xlabel("share of the mean training step (%), step time in ms at the bar's end")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35 / max(1, len(points)) - 0.25),
              ncol=6, frameon=False)
    ax.set_title("Step breakdown (trainbench profile)", fontsize=11)
    return _save(fig, path)


def profile_table_md(items) -> list[str]:
    """Markdown: per profiled model the step and its parts in ms."""
    rows = [f"| {label} | {v['step_ms']:.2f} | " + " | ".join(f"{v[k]:.2f}" for k, _, _ in PARTS)
            + f" | {v['communication_ms']:.2f} |" for label, v in profile_points(items)]
    if not rows:
        return []
    return ["## Step breakdown (trainbench profile), ms per step", "",
            "| model | step | forward | backward | optimizer | data | other | communication |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""]
