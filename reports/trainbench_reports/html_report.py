"""The self-contained HTML report: run headers, counts, plots embedded as data URIs, failures,
and a table of every record. One file, no external assets, so it can be attached to CI runs."""
from __future__ import annotations

import base64
import datetime as dt
from html import escape
from pathlib import Path

from .output import write_output
from .summary import (STATUSES, Row, counts_by_suite, fmt_seconds, geomean_speedup, key_metrics,
                      totals)

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; }
.pass { color: #1a7f1a; font-weight: 600; } .fail { color: #c62828; font-weight: 600; }
.error { color: #7b1fa2; font-weight: 600; } .skip { color: #777; }
.msg { max-width: 40em; white-space: pre-wrap; font-family: monospace; font-size: 12px; }
.metrics { font-family: monospace; font-size: 12px; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
.note { color: #666; }
"""


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{escape(path.stem)}" src="data:image/png;base64,{data}">'


def _status(s: str) -> str:
    return f'<span class="{escape(s)}">{escape(s)}</span>'


def _metrics_cell(pairs) -> str:
    return "<br>".join(f"{escape(k)}={escape(v)}" for k, v in pairs)


def _run_table(results) -> str:
    keys = []
    for res in results:
        for k in res.run:
            if k not in keys:
                keys.append(k)
    head = "".join(f"<th>{escape(res.label)}</th>" for res in results)
    body = []
    for k in keys:
        cells = "".join(f"<td>{escape(_fmt_run(res.run.get(k, '')))}</td>" for res in results)
        body.append(f"<tr><th>{escape(k)}</th>{cells}</tr>")
    return f"<table><tr><th>run</th>{head}</tr>{''.join(body)}</table>"


def _fmt_run(v) -> str:
    if isinstance(v, list):
        return ", ".join(map(str, v))
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def _counts_table(rows) -> str:
    head = "".join(f"<th>{s}</th>" for s in STATUSES)
    body = []
    for (suite, kind), c in counts_by_suite(rows).items():
        cells = "".join(f'<td class="num">{c[s]}</td>' for s in STATUSES)
        body.append(f"<tr><td>{escape(suite)}</td><td>{escape(kind)}</td>{cells}</tr>")
    t = totals(rows)
    cells = "".join(f'<td class="num"><b>{t[s]}</b></td>' for s in STATUSES)
    body.append(f"<tr><td><b>total</b></td><td></td>{cells}</tr>")
    return f"<table><tr><th>suite</th><th>kind</th>{head}</tr>{''.join(body)}</table>"


def _records_table(rows: list[Row], multi_run: bool) -> str:
    run_th = "<th>run</th>" if multi_run else ""
    out = [f"<table><tr>{run_th}<th>suite</th><th>case</th><th>kind</th><th>status</th>"
           "<th>rank</th><th>key metrics</th><th>tolerances</th><th>duration</th>"
           "<th>message</th></tr>"]
    for row in rows:
        r = row.rec
        tol = [(k, str(v)) for k, v in r.get("tolerances", {}).items()]
        run_td = f"<td>{escape(row.result.label)}</td>" if multi_run else ""
        out.append(
            f"<tr>{run_td}<td>{escape(r['suite'])}</td><td>{escape(r['case'])}</td>"
            f"<td>{escape(r['kind'])}</td><td>{_status(r['status'])}</td>"
            f'<td class="num">{r.get("rank", 0)}</td>'
            f'<td class="metrics">{_metrics_cell(key_metrics(r))}</td>'
            f'<td class="metrics">{_metrics_cell(tol)}</td>'
            f'<td class="num">{escape(fmt_seconds(r.get("duration_s")))}</td>'
            f'<td class="msg">{escape(r.get("message", ""))}</td></tr>')
    out.append("</table>")
    return "".join(out)


def write(path: Path, results, rows: list[Row], plots: list[tuple[str, Path | None, str]],
          peaks_note: str, sections: list[tuple[str, str]] = ()) -> Path:
    """sections: (title, HTML) written after the plots, e.g. the collectives' overhead table."""
    multi_run = len(results) > 1
    t = totals(rows)
    gm = geomean_speedup(rows)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<title>trainbench report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>trainbench report</h1>",
        f"<p class='note'>Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC} from "
        + ", ".join(escape(str(res.path)) for res in results) + ".</p>"
        if results else "<p class='note'>No result files were given.</p>",
        f"<p><b>{t['pass']} passed, {t['fail']} failed, {t['error']} errors, "
        f"{t['skip']} skipped</b> of {len(rows)} records."
        + (f" Geometric-mean speedup vs LibTorch: <b>{gm:.2f}x</b>." if gm else "") + "</p>",
    ]
    if results:
        parts += ["<h2>Runs</h2>", _run_table(results)]
    if rows:
        parts += ["<h2>Counts</h2>", _counts_table(rows)]
    bad = [r for r in rows if r.rec["status"] in ("fail", "error")]
    if bad:
        parts += ["<h2>Failures</h2>", _records_table(bad, multi_run)]
    parts.append("<h2>Plots</h2>")
    for title, png, missing in plots:
        parts.append(f"<h3>{escape(title)}</h3>")
        parts.append(_img(png) if png else f"<p class='note'>{escape(missing)}</p>")
    parts.append(f"<p class='note'>{escape(peaks_note)}</p>")
    for title, body in sections:
        parts += [f"<h2>{escape(title)}</h2>", body]
    parts += ["<h2>All records</h2>",
              _records_table(rows, multi_run) if rows else "<p class='note'>No records.</p>",
              "</body></html>"]
    return write_output(path, "\n".join(parts).encode("utf-8"))
