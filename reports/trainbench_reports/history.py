"""History across runs: when the report is given several results (a folder of runs), each
benchmark case's time per run, ordered by the run header's time, as one trend plot per suite
(history_<suite>.png, plot_name), a table per suite in the HTML and every case in history.csv;
correctness cases whose status changed between runs are listed with their statuses in run order.
One result: nothing here.

Bounded for any input: at most MAX_SUITE_PLOTS suites get a plot (the HTML names the others), the
grey lines of a plot are one LineCollection, a plot is at most MAX_WIDTH_IN wide, and a suite's
HTML table shows at most MAX_TABLE_ROWS cases (history.csv has them all)."""
from __future__ import annotations

import csv
import hashlib
import heapq
import io
import math
import re
from html import escape
from pathlib import Path

from .load import MAX_TIME_S, MIN_TIME_S, number
from .output import OutputError, write_output
from .summary import fmt_seconds

MAX_HIGHLIGHTED = 8  # cases drawn in colour and named in the legend; the rest thin and grey
# A plot per suite cost ~0.18 s each: 2000 suites of a results folder took 6 minutes. Past this
# many, the suites whose cases moved most get a plot (the measure that colours a plot's cases: a
# suite that held steady draws flat lines, and what a history is read for is what changed); the
# rest are named in the HTML, whose tables list every suite.
MAX_SUITE_PLOTS = 12
MAX_WIDTH_IN = 20.0  # 1.1 inch a run up to 14 runs; past that the width stays and fewer runs are labelled
MAX_RUN_LABELS = 16
# 20,000 cases over 3 runs made a 2.7 MB history section; past this many cases a suite's table shows
# those that moved most (the measure that colours the plots) and the full table is CSV_NAME.
MAX_TABLE_ROWS = 50
CSV_NAME = "history.csv"
MAX_SLUG = 100  # a 300-character suite name was a file name too long to write
_HASHED = re.compile(r"-[0-9a-f]{12}$")


def ordered_runs(results):
    """The results in run order: the run header's ISO 8601 time, then the file label."""
    return sorted(results, key=lambda r: (str(r.run.get("time", "")), r.label))


def _usable_time(v) -> bool:
    """A time per call history uses: MIN_TIME_S to MAX_TIME_S, as `trainbench compare` (5e-324 s
    or 1e300 s is no timing: their ratio printed "infx", the first "4.94e-315 ns")."""
    return v is not None and MIN_TIME_S <= v <= MAX_TIME_S


def case_time(rec, dropped: list | None = None):
    """A benchmark record's time per call in seconds: the median of its repetitions
    (series.engine_time_s), else the median metric the suite wrote (engine_median_s, a distributed
    bench's time_s or step_ms); None when it has none. Values that are no time per call ("nan",
    0, or outside MIN_TIME_S..MAX_TIME_S) are left out; with `dropped` = [not numbers or not
    positive, out of range], they are counted there, as compare counts them."""
    series = rec.get("series", {}).get("engine_time_s")
    if isinstance(series, list):
        vals = []
        for v in map(number, series):
            if _usable_time(v):
                vals.append(v)
            elif dropped is not None:
                dropped[0 if v is None or not v > 0 else 1] += 1
        vals.sort()
        if vals:
            n = len(vals)
            return vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
    m = rec.get("metrics", {})
    for key, scale in (("engine_median_s", 1.0), ("time_s", 1.0), ("step_ms", 1e-3)):
        v = number(m.get(key))
        if v is not None and v > 0:
            if _usable_time(v * scale):
                return v * scale
            if dropped is not None:
                dropped[1] += 1
    return None


def _run_label(res) -> str:
    t = str(res.run.get("time", "?"))
    short = t[5:16].replace("T", " ") if len(t) >= 16 else t  # 2026-12-03T10:20:30Z -> 12-03 10:20
    return f"{short}\n{res.run.get('git_revision', '?')}"


def collect(results, dropped: list | None = None):
    """(runs in order, {suite: {case: [time or None per run]}}, [(suite, case, [status per run])]
    for the cases whose status changed). Only rank-0 records; a case repeated in one file keeps
    its first record. `dropped`: counts of the times left out (case_time)."""
    runs = ordered_runs(results)
    times: dict = {}
    statuses: dict = {}
    for i, res in enumerate(runs):
        seen = set()
        for rec in res.records:
            if rec.get("rank", 0):
                continue
            key = (rec["suite"], rec["case"])
            if key in seen:
                continue
            seen.add(key)
            statuses.setdefault(key, [None] * len(runs))[i] = rec["status"]
            if rec["kind"] == "benchmark" and rec["status"] == "pass":
                t = case_time(rec, dropped)
                if t is not None:
                    times.setdefault(rec["suite"], {}).setdefault(rec["case"], [None] * len(runs))[i] = t
    changed = [(s, c, st) for (s, c), st in statuses.items() if len({x for x in st if x is not None}) > 1]
    return runs, times, changed


def _spread(values) -> float:
    vals = [v for v in values if v]
    return max(vals) / min(vals) if len(vals) > 1 else 1.0


def _slug(suite: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", suite) or "suite"


def plot_name(suite: str) -> str:
    """history_<slug>.png, one file per suite name: the plain slug where it is the name itself in
    lower case, else the slug (cut to MAX_SLUG) and 12 hex digits of the name's SHA-256. "a/b" and
    "a_b" shared history_a_b.png, and "A" and "a" one file on a case-insensitive file system, so one
    suite's plot showed the other's data. A plain name never ends as a hashed one does."""
    slug = _slug(suite)
    if slug == suite.lower() and len(slug) <= MAX_SLUG and not _HASHED.search(slug):
        return f"history_{slug}.png"
    digest = hashlib.sha256(suite.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"history_{slug[:MAX_SLUG]}-{digest}.png"


def _drawable(values) -> bool:
    return sum(1 for v in values if v) > 1


def drawn_suites(times):
    """(the suites that get a trend plot, by name; those left out, by name): all of them up to
    MAX_SUITE_PLOTS, else the suites with a case timed in two runs or more first, those by their
    largest case spread (max / min time over the runs, as trend_plot colours cases), then name."""
    if len(times) <= MAX_SUITE_PLOTS:
        return sorted(times), []
    def rank(suite):
        spreads = [_spread(v) for v in times[suite].values() if _drawable(v)]
        return (not spreads, -max(spreads, default=1.0), suite)
    order = sorted(times, key=rank)
    return sorted(order[:MAX_SUITE_PLOTS]), sorted(order[MAX_SUITE_PLOTS:])


def _segments(xs, ys):
    """The runs of consecutive finite points of one line, as LineCollection segments: a missing
    run breaks the line, as ax.plot breaks it at NaN."""
    out, cur = [], []
    for x, y in zip(xs, ys):
        if math.isfinite(y):
            cur.append((x, y))
            continue
        if len(cur) > 1:
            out.append(cur)
        cur = []
    if len(cur) > 1:
        out.append(cur)
    return out


def trend_plot(suite: str, cases: dict, runs, path: Path):
    """One line per case: its time in each run over its own median across runs (log scale), so
    cases of any size share an axis; the cases that moved most are coloured and named, the rest
    drawn grey as one LineCollection (an ax.plot per case took 11 s for 20,000 cases, now 1.3 s)."""
    from matplotlib.collections import LineCollection

    from .plots import _save, plt  # matplotlib only when a history is drawn

    lines = []
    for case, values in cases.items():
        present = sorted(v for v in values if v)
        if len(present) < 2:
            continue
        mid = present[len(present) // 2]
        lines.append((case, [v / mid if v else math.nan for v in values], _spread(values)))
    if not lines:
        return None
    lines.sort(key=lambda x: -x[2])
    fig, ax = plt.subplots(figsize=(min(MAX_WIDTH_IN, max(7.0, 1.1 * len(runs) + 4)), 4.8))
    xs = list(range(len(runs)))
    for case, rel, spread in lines[:MAX_HIGHLIGHTED]:
        ax.plot(xs, rel, marker="o", linewidth=1.6, label=f"{case} ({spread:.2f}x range)")
    grey = [seg for _, rel, _ in lines[MAX_HIGHLIGHTED:] for seg in _segments(xs, rel)]
    if grey:
        ax.add_collection(LineCollection(grey, colors="#bbbbbb", linewidths=0.8, zorder=0))
        ax.autoscale_view()
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    step = -(-len(runs) // MAX_RUN_LABELS)  # every run labelled up to MAX_RUN_LABELS runs
    ax.set_xticks(xs[::step], [_run_label(r) for r in runs[::step]], fontsize=7)
    ax.set_ylabel("time per call / the case's median over runs (log)")
    rest = f"; {len(lines) - MAX_HIGHLIGHTED} more in grey" if len(lines) > MAX_HIGHLIGHTED else ""
    ax.set_title(f"{suite}: benchmark time per run (up = slower){rest}", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, path)


def plots(results, out: Path):
    """[(title, png or None, note)] for the report's plot list: one trend per suite with benchmark
    history (at most MAX_SUITE_PLOTS, drawn_suites), and a note of how many were left out. Stale
    history_*.png from an earlier report into `out` are removed."""
    items = []
    written = set()  # lower case: on a case-insensitive file system history_A.png is history_a.png
    if len(results) > 1:
        runs, times, _ = collect(results)
        drawn, left_out = drawn_suites(times)
        for suite in drawn:
            name = plot_name(suite)
            title = f"History: {suite} benchmarks over {len(runs)} runs"
            if name.lower() in written:  # only two names crafted to share 48 bits of their hash
                items.append((title, None, f"Not drawn: its file name {name} is another suite's."))
                continue
            png = trend_plot(suite, times[suite], runs, out / name)
            items.append((title, png, f"No {suite} benchmark ran in two or more of the runs."))
            if png:
                written.add(png.name.lower())
        if left_out:
            items.append((f"History: {len(left_out)} more suites not drawn", None,
                          f"Trend plots for {len(drawn)} of the {len(times)} suites with benchmark "
                          "times, those whose cases moved most; the others are named, and their "
                          f"times listed, under History across runs (every case in {CSV_NAME})."))
    for old in out.glob("history_*.png"):
        if old.name.lower() not in written:
            try:
                old.unlink()
            except OSError as e:
                raise OutputError(f"{old}: cannot remove the stale plot: {e.strerror or e}")
    return items


def _change(values) -> str:
    """Last over first of a case's times, or '' where it has fewer than two."""
    present = [v for v in values if v]
    return f"{present[-1] / present[0]!r}" if len(present) > 1 else ""


def _shown(cases: dict):
    """The (case, times) a suite's HTML table shows: at most MAX_TABLE_ROWS, those whose time moved
    most (_spread, as trend_plot colours them), then by name; in that order."""
    return heapq.nsmallest(MAX_TABLE_ROWS, cases.items(), key=lambda kv: (-_spread(kv[1]), kv[0]))


def write_csv(results, path: Path):
    """Every case's time per run in seconds (empty where it has none) and last / first, as
    suite,case,<run>...,last/first rows, suites by name; None for one result, and a history.csv
    left by an earlier report is removed (its runs are not this report's)."""
    if len(results) < 2:
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            raise OutputError(f"{path}: cannot remove the stale table: {e.strerror or e}")
        return None
    runs, times, _ = collect(results)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["suite", "case"] + [f"time_s {r.label} {r.run.get('time', '?')}" for r in runs]
               + ["last/first"])
    for suite in sorted(times):
        for case, values in times[suite].items():
            w.writerow([suite, case] + ["" if v is None else repr(v) for v in values] + [_change(values)])
    return write_output(path, buf.getvalue().encode("utf-8", "backslashreplace"))


def section_html(results):
    """The history tables (benchmark times per run, status changes), or '' for one result. A suite's
    table shows at most MAX_TABLE_ROWS cases (_shown) and says how many more CSV_NAME holds."""
    if len(results) < 2:
        return ""
    dropped = [0, 0]
    runs, times, changed = collect(results, dropped)
    head = "".join(f"<th>{escape(_run_label(r)).replace(chr(10), '<br>')}</th>" for r in runs)
    parts = [f"<p>Every case's time per run, in seconds: {CSV_NAME} beside this report.</p>"] if times else []
    if any(dropped):
        parts.append(f"<p>Times left out as no time per call: {dropped[0]} not a positive number (\"nan\"), "
                     f"{dropped[1]} outside {MIN_TIME_S:g} s to {MAX_TIME_S:g} s.</p>")
    drawn, left_out = drawn_suites(times)
    if left_out:
        parts.append(f"<p>Trend plots for {len(drawn)} of the {len(times)} suites, those whose cases "
                     f"moved most ({escape(', '.join(drawn))}); not drawn ({len(left_out)}): "
                     f"{escape(', '.join(left_out))}.</p>")
    if changed:
        parts.append(f"<h3>Cases whose status changed ({len(changed)})</h3>")
        parts.append(f"<table><tr><th>suite</th><th>case</th>{head}</tr>")
        for suite, case, st in changed:
            cells = "".join(f'<td class="{escape(s or "")}">{escape(s or "-")}</td>' for s in st)
            parts.append(f"<tr><td>{escape(suite)}</td><td>{escape(case)}</td>{cells}</tr>")
        parts.append("</table>")
    for suite in sorted(times):
        cases = times[suite]
        parts.append(f"<h3>{escape(suite)}: time per call</h3>")
        if len(cases) > MAX_TABLE_ROWS:
            parts.append(f"<p>The {MAX_TABLE_ROWS} of {len(cases)} cases whose time moved most (max / min "
                         f"over the runs), those first; {len(cases) - MAX_TABLE_ROWS} more left out here, "
                         f"every case is in {CSV_NAME}.</p>")
            rows = _shown(cases)
        else:
            rows = cases.items()
        parts.append(f"<table><tr><th>case</th>{head}<th>last / first</th></tr>")
        for case, values in rows:
            cells = "".join(f'<td class="num">{escape(fmt_seconds(v))}</td>' for v in values)
            present = [v for v in values if v]
            change = f"{present[-1] / present[0]:.2f}x" if len(present) > 1 else "-"
            parts.append(f"<tr><td>{escape(case)}</td>{cells}<td class=\"num\">{change}</td></tr>")
        parts.append("</table>")
    return "\n".join(parts)
