"""Plots of the scaling projection (projection.py): the projected samples/s to 1024 ranks per link
class, labelled as a projection, with the measured points of this host overlaid; and every
measured step against the model's prediction for it, with the 15% goal as a band.

Drawn when the input holds comm records and DDP/FSDP benchmark records with a world-1 point."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from . import projection as pj  # noqa: E402
from .dist_plots import _bounded, _save  # noqa: E402

RANKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
LINK_STYLE = {"nvlink": "#2ca02c", "ib": "#1f77b4", "ethernet": "#d62728", "shm": "#9467bd", "gloo": "#8c564b"}
KIND_DASH = {"ddp": "--", "full_shard": ":", "shard_grad_op": "-."}


def model_of(results):
    """(fits, step models, validation points), or None when the input cannot make a projection."""
    try:
        fits = pj.fit_links(results)
        models = pj.step_models(results)
        if not models or not fits:
            return None
        return fits, models, pj.validate_points(models, fits)
    except pj.ProjectionError:  # e.g. no world-1 step: `trainbench project` says so; the report draws nothing
        return None


def _links(fits):
    return list(pj.LINK_PROFILES) + sorted(fits)


def projection_plot(results, path: Path):
    """samples/s vs ranks, one panel per model (rows) and strategy (columns): one dashed line per
    link class (the projection) and the measured points as markers. None when there is nothing to
    project."""
    got = model_of(results)
    if got is None:
        return None
    fits, models, vals = got
    names, left_out = _bounded(sorted({m for _, m in models}))
    kinds = [k for k in KIND_DASH if any(kind == k for kind, _ in models)]
    fig, axes = plt.subplots(len(names), len(kinds), figsize=(5.2 * len(kinds), 4.2 * len(names)), squeeze=False)
    for row, name in enumerate(names):
        for col, kind in enumerate(kinds):
            ax = axes[row][col]
            if (kind, name) not in models:
                ax.axis("off")
                continue
            sm, pts = models[(kind, name)]
            for link_name in _links(fits):
                link = pj.link_model(link_name, fits)
                if pj._needs(link, kind):
                    continue
                ys = [sm.predict(r, sm.batch1, link).samples_per_s for r in RANKS]
                ax.plot(RANKS, ys, "--", color=LINK_STYLE.get(link_name, "grey"), label=f"projection, {link_name}")
            ax.plot([p.world for p in pts], [p.m("samples_per_s") for p in pts], "o", color="black",
                    label="measured (this host: batch split, cores shared)")
            pv = [v for v in vals if v["kind"] == kind and v["model"] == name]
            if pv:
                ax.plot([v["world"] for v in pv], [v["predicted_samples_per_s"] for v in pv], "o", mfc="none",
                        color="orange", markersize=9, label="model at the measured points")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("ranks")
            ax.set_ylabel("samples/s")
            ax.set_title(f"PROJECTION: {name}, {pj._kind_label(kind)}\n(weak scaling, world-1 batch per rank)",
                         fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, loc="upper left")
    if left_out:
        fig.suptitle("Scaling PROJECTION" + left_out, fontsize=10)
    return _save(fig, path)


def validation_plot(results, path: Path):
    """Predicted against measured step time at every measured point, with y = x and the +-15% goal."""
    got = model_of(results)
    if got is None or not got[2]:
        return None
    vals = got[2]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    lo = min(min(v["measured_step_ms"], v["predicted_step_ms"]) for v in vals) * 0.7
    hi = max(max(v["measured_step_ms"], v["predicted_step_ms"]) for v in vals) * 1.4
    xs = [lo, hi]
    ax.plot(xs, xs, "-", color="black", lw=0.8, label="prediction = measurement")
    ax.fill_between(xs, [x * (1 - pj.GOAL_REL_ERROR) for x in xs], [x * (1 + pj.GOAL_REL_ERROR) for x in xs],
                    color="green", alpha=0.15, label=f"goal: within {pj.GOAL_REL_ERROR:.0%}")
    for v in vals:
        ok = abs(v["error"]) <= pj.GOAL_REL_ERROR
        color = "#1f77b4" if v["kind"] == "ddp" else "#ff7f0e"
        ax.plot(v["measured_step_ms"], v["predicted_step_ms"], "o" if ok else "x", color=color)
        if v["runs"] > 1:  # the point is the runs' median; the bar spans their fastest to slowest
            ax.plot([min(v["measured_runs_ms"]), max(v["measured_runs_ms"])], [v["predicted_step_ms"]] * 2, "-",
                    color=color, lw=0.8, alpha=0.6)
        across = f" {v['hosts']} hosts {v['link']}" if v["hosts"] > 1 else ""
        ax.annotate(f"{v['model']} {pj._kind_label(v['kind'])} w{v['world']}{across} {v['error']:+.0%}",
                    (v["measured_step_ms"], v["predicted_step_ms"]), fontsize=6, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    for axis in (ax.xaxis, ax.yaxis):  # decades labelled, the ticks between them not (they overlap)
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("measured step, ms")
    ax.set_ylabel("projected step (model), ms")
    several = "\nthe median of repeated runs; bars: their range" if any(v["runs"] > 1 for v in vals) else ""
    ax.set_title("Projection model against every measured step\n(blue DDP, orange FSDP; x: outside the goal)" + several,
                 fontsize=10 if several else None)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, path)


def validation_table_md(results) -> list[str]:
    """Markdown lines: every measured step beside the model's prediction."""
    got = model_of(results)
    if got is None or not got[2]:
        return []
    lines = ["## Scaling projection: the model at the measured points", "",
             "| model | strategy | world | hosts | link | measured ms | predicted ms | error |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for v in got[2]:
        lines.append(f"| {v['model']} | {pj._kind_label(v['kind'])} | {v['world']} | {v['hosts']} | {v['link']} | "
                     f"{v['measured_step_ms']:.2f} | {v['predicted_step_ms']:.2f} | {v['error']:+.1%} |")
    return lines + [""]


def plots(results, out: Path):
    """The report's entries: [(title, path or None, text when None)], empty without the inputs."""
    if model_of(results) is None:
        return []
    return [("Scaling PROJECTION (a model) to 1024 ranks, measured points overlaid",
             projection_plot(results, out / "projection.png"), "Nothing to project."),
            ("Projection model against every measured step",
             validation_plot(results, out / "projection_validation.png"),
             "No measured point the model can predict.")]
