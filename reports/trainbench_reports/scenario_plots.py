"""Plots and tables of the scenarios (`trainbench scenario run`, `trainbench bench --suite
scenarios`; docs/debugging.md): per scenario and backend, the detection rate (runs whose expected
diagnosis came out) and the distribution of the time from the fault to the diagnosis, with the
collective timeout and the goal (timeout + 5 s) drawn as lines.

Two kinds of records feed them (docs/results.md, "Scenario records"):
  kind "benchmark", case soak/<scenario>/<backend>: the soak's summary of N seeds, every run's
      time in series time_to_diagnosis_s;
  kind "scenario", case hang/<scenario>/<backend>/seed<S> (or oom/<scenario>/seed<S>): one run.
Each function takes [(run label or None, record)] and returns the written path, or None when
there is nothing to draw."""
from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path

from .dist_plots import _save, plt
from .load import number

SOAK_CASE = re.compile(r"^soak/(?P<scenario>[^/]+)/(?P<backend>[A-Za-z0-9_-]+)$")
RUN_CASE = re.compile(r"^(?P<family>hang|oom)/(?P<scenario>[^/]+)(?:/(?P<backend>[A-Za-z0-9_-]+))?/seed\d+$")


def scenario_points(items):
    """{label: {"runs", "detected", "ttd": [s...], "timeout", "kills"}} with label
    "<scenario> <backend>" (and " [run]" when several files are reported)."""
    out: dict = OrderedDict()
    for run, r in items:
        metrics = r.get("metrics", {})
        soak = SOAK_CASE.match(r["case"]) if r.get("kind") == "benchmark" else None
        one = RUN_CASE.match(r["case"]) if r.get("kind") == "scenario" else None
        if not soak and not one:
            continue
        g = soak or one
        label = g["scenario"] + (f" {g['backend']}" if g["backend"] else "") + ("" if run is None else f" [{run}]")
        p = out.setdefault(label, {"runs": 0, "detected": 0, "ttd": [], "timeout": None, "kills": 0})
        p["timeout"] = p["timeout"] or number(metrics.get("timeout_s"))
        if soak:
            runs = number(metrics.get("runs")) or 0
            p["runs"] += runs
            p["detected"] += round((number(metrics.get("detection_rate")) or 0) * runs)
            p["kills"] += number(metrics.get("outer_kills")) or 0
            p["ttd"] += [v for v in (number(x) for x in r.get("series", {}).get("time_to_diagnosis_s", []))
                         if v is not None]
        else:
            p["runs"] += 1
            p["detected"] += r.get("status") == "pass"
            p["kills"] += number(metrics.get("outer_kill")) or 0
            t = number(metrics.get("time_to_diagnosis_s"))
            if t is not None:
                p["ttd"].append(t)
    return out


def scenarios_plot(items, path: Path):
    """Left: detection rate per scenario and backend. Right: each run's time to diagnosis (dots,
    box over them), the collective timeout and the goal timeout + 5 s as lines."""
    points = scenario_points(items)
    if not points:
        return None
    labels = list(points)
    fig, (ax_d, ax_t) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.32 * len(labels)), squeeze=True,
                                     gridspec_kw={"width_ratios": [1, 2]})
    ys = list(range(len(labels)))
    rates = [points[k]["detected"] / points[k]["runs"] if points[k]["runs"] else 0 for k in labels]
    ax_d.barh(ys, rates, color=["#2ca02c" if r == 1 else "#d62728" for r in rates])
    for y, k, rate in zip(ys, labels, rates):
        ax_d.annotate(f"{points[k]['detected']:g}/{points[k]['runs']:g}", (min(rate, 1), y), va="center",
                      ha="right", fontsize=7, color="white" if rate > 0.2 else "black")
    ax_d.set_yticks(ys, labels, fontsize=7)
    ax_d.set_xlim(0, 1)
    ax_d.invert_yaxis()
    ax_d.set_xlabel("detection rate")
    ax_d.grid(alpha=0.3, axis="x")
    data = [points[k]["ttd"] or [float("nan")] for k in labels]
    ax_t.boxplot(data, positions=ys, orientation="horizontal", widths=0.6, showfliers=False)
    for y, d in zip(ys, data):
        ax_t.plot(d, [y] * len(d), "o", markersize=2.5, alpha=0.5, color="#1f77b4")
    timeouts = {points[k]["timeout"] for k in labels if points[k]["timeout"]}
    if len(timeouts) == 1:
        t = timeouts.pop()
        ax_t.axvline(t, color="black", linestyle="--", linewidth=1, label=f"timeout {t:g} s")
        ax_t.axvline(t + 5, color="#d62728", linestyle=":", linewidth=1, label=f"goal: p99 <= {t + 5:g} s")
        ax_t.legend(fontsize=7, loc="lower right")
    ax_t.set_yticks(ys, [""] * len(ys))
    ax_t.set_ylim(ax_d.get_ylim())
    ax_t.set_xlim(left=0)
    ax_t.set_xlabel("time from the fault to the diagnosis (s)")
    ax_t.grid(alpha=0.3, axis="x")
    fig.suptitle("Scenarios: detection rate and time to diagnosis", fontsize=11)
    return _save(fig, path)


def _pct(v, p):
    if not v:
        return None
    s = sorted(v)
    k = max(1, -(-len(s) * p // 100))
    return s[int(k) - 1]


def scenarios_table_md(items) -> list[str]:
    """Markdown: per scenario and backend the runs, detection rate, p50/p99/max time to diagnosis
    and outer kills."""
    rows = []
    for label, p in scenario_points(items).items():
        f = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        rate = p["detected"] / p["runs"] if p["runs"] else 0
        rows.append(f"| {label} | {p['runs']:g} | {rate:.0%} | {f(_pct(p['ttd'], 50))} | {f(_pct(p['ttd'], 99))} | "
                    f"{f(max(p['ttd']) if p['ttd'] else None)} | {p['kills']:g} |")
    if not rows:
        return []
    return ["## Scenarios: detection and time to diagnosis (s)", "",
            "| scenario | runs | detected | p50 | p99 | max | outer kills |",
            "| --- | --- | --- | --- | --- | --- | --- |", *rows, ""]
