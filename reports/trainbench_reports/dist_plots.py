"""Plots and tables of the distributed suites: the `comm` collectives sweep (busbw and time vs
message size, one line per implementation), DDP scaling and the split of a DDP step, and the
DDP Fashion-MNIST curves beside the single-process ones; FSDP throughput per strategy, per-rank
memory by category (with the estimator's figures when records carry them) and exposed against
hidden communication; distributed checkpoints' save/load GB/s beside torch.distributed.checkpoint
and the asynchronous save's blocking time.

Records are recognised by their case names (docs/results.md, "comm", "ddp", "fsdp" and "dcp"):
  <op>/<dtype>/<bytes>/w<world>/<impl>   e.g. all_reduce/float32/1048576/w2/engine
  ddp/<model>/w<world>/<impl>            e.g. ddp/mlp/w2/torch-gloo
  fsdp/<model>/<strategy>/w<world>/<impl> e.g. fsdp/gpt/full_shard/w2/torch
  dcp/<model>/w<world>/<impl>            e.g. dcp/gpt/w2/engine
Each function takes [(run label or None, record)] and returns the written path, or None when
there is nothing to draw."""
from __future__ import annotations

import io
import math
import re
from collections import OrderedDict
from html import escape
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from .load import MAX_RANKS, number, whole_number  # noqa: E402
from .output import write_output  # noqa: E402

COMM_CASE = re.compile(r"^(?P<op>[a-z_]+)/(?P<dtype>[a-z0-9]+)/(?P<bytes>\d+)/w(?P<world>\d+)/(?P<impl>[A-Za-z0-9_.-]+)$")
DDP_CASE = re.compile(r"^ddp/(?P<model>[^/]+)/w(?P<world>\d+)/(?P<impl>[A-Za-z0-9_.-]+)$")
OPS_ORDER = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
# Fixed colours so a reader learns them once: the raw MPI floor in black dashes.
IMPL_STYLE = {
    "engine": dict(color="#1f77b4", marker="o", linestyle="-"),
    "engine-gloo": dict(color="#2ca02c", marker="^", linestyle="-"),
    "mpi": dict(color="black", marker=".", linestyle="--"),
    "torch-gloo": dict(color="#ff7f0e", marker="s", linestyle="-"),
}
IMPL_ORDER = ("engine", "engine-gloo", "mpi", "torch-gloo")
STEP_PARTS = (("forward_ms", "forward", "#1f77b4"), ("backward_ms", "backward", "#2ca02c"),
              ("comm_wait_ms", "comm wait", "#d62728"), ("optimizer_ms", "optimizer", "#9467bd"))


# Panels of one figure: a panel per model (or model and strategy, or world and op) drawn for 150
# models took a minute, 500 most of two. Past these, the first by name are drawn and the title says
# how many were left out; the tables list every record.
MAX_PANELS = 12
MAX_BARS = 48  # bars in one panel of the step and memory plots (a world and impl each)
MAX_BYTES = 1e13  # a message size in a case name (the projection's COMM_RANGES)


def _bounded(keys, limit: int = MAX_PANELS, what: str = "models"):
    """(the keys to draw, a note for the title): all of them in their order, or past `limit` the
    `limit` whose names sort first (in their order) and a note of how many were left out."""
    keys = list(keys)
    if len(keys) <= limit:
        return keys, ""
    keep = set(sorted(keys)[:limit])
    return [k for k in keys if k in keep], (f" (the first {limit} of {len(keys)} {what} by name; "
                                           f"{len(keys) - limit} left out)")


def _bars_note(left: int) -> str:
    """A panel title's note of the bars past MAX_BARS left out."""
    return f" (the first {MAX_BARS} bars; {left} more left out)" if left > 0 else ""


def _world(m):
    """The case's w<world>, or None for a world no run has (0 ranks; more than MAX_RANKS)."""
    return whole_number(m["world"], 1, MAX_RANKS)


def _style(impl: str) -> dict:
    return IMPL_STYLE.get(impl, dict(marker="x", linestyle=":"))


def _impl_key(impl: str):
    return (IMPL_ORDER.index(impl) if impl in IMPL_ORDER else len(IMPL_ORDER), impl)


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return write_output(path, png.getvalue())


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{int(n)} B"


def comm_points(items):
    """{(op, world): {impl label: [(nominal bytes, record)]}} of passed comm benchmarks."""
    out: dict = {}
    for run, r in items:
        if r.get("kind") != "benchmark" or r.get("status") != "pass":
            continue
        m = COMM_CASE.match(r["case"])
        if not m or number(r["metrics"].get("time_s")) is None:
            continue
        world, nbytes = _world(m), whole_number(m["bytes"], 0, MAX_BYTES)
        if world is None or nbytes is None:  # 0 ranks, or 400 digits that overflow a float
            continue
        impl = m["impl"] if run is None else f"{m['impl']} [{run}]"
        out.setdefault((m["op"], world), {}).setdefault(impl, []).append((nbytes, r))
    for lines in out.values():
        for pts in lines.values():
            pts.sort(key=lambda p: p[0])
    return out


def _panel_keys(points):
    ops = sorted({op for op, _ in points}, key=lambda o: (OPS_ORDER.index(o) if o in OPS_ORDER else 9, o))
    worlds = sorted({w for _, w in points})
    return ops, worlds


def _comm_plot(items, path: Path, metric: str, ylabel: str, title: str, scale):
    points = comm_points(items)
    if not points:
        return None
    ops, worlds = _panel_keys(points)
    ops, ops_note = _bounded(ops, 6, "collectives")
    worlds, worlds_note = _bounded(worlds, 6, "world sizes")
    title += ops_note + worlds_note
    fig, axes = plt.subplots(len(worlds), len(ops), figsize=(4.3 * len(ops), 3.4 * len(worlds)),
                             squeeze=False)
    drawn = False
    for i, w in enumerate(worlds):
        for j, op in enumerate(ops):
            ax = axes[i][j]
            lines = points.get((op, w), {})
            for impl in sorted(lines, key=lambda s: _impl_key(s.split(" [")[0])):
                xs, ys = [], []
                for nbytes, r in lines[impl]:
                    y = number(r["metrics"].get(metric))
                    y = None if y is None else y * scale
                    if y is not None and 0 < y < 1e300 and nbytes > 0:  # drawable on log-log
                        xs.append(nbytes)
                        ys.append(y)
                if xs:
                    ax.plot(xs, ys, label=impl, markersize=4, linewidth=1.4,
                            **_style(impl.split(" [")[0]))
                    drawn = True
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(ticker.LogLocator(base=4))
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: fmt_bytes(v)))
            ax.tick_params(axis="x", labelsize=7, rotation=30)
            ax.set_title(f"{op}, {w} ranks", fontsize=10)
            ax.set_xlabel("message size (bytes, per nccl-tests)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.grid(which="both", alpha=0.25)
            if lines:
                ax.legend(fontsize=7)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def comm_busbw(items, path: Path):
    """Bus bandwidth vs message size: one panel per op and world size, one line per impl."""
    return _comm_plot(items, path, "busbw_gbps", "busbw (GB/s, log)",
                      "Collectives: bus bandwidth vs message size (nccl-tests busbw; higher is better)", 1.0)


def comm_time(items, path: Path):
    """Time per call vs message size: the latency end of the sweep that busbw hides."""
    return _comm_plot(items, path, "time_s", "time per call (us, log)",
                      "Collectives: time per call vs message size (lower is better)", 1e6)


def comm_overhead_rows(items, op: str = "all_reduce"):
    """[(world, nominal bytes, {impl: time_s}, engine/mpi ratio or None)] for one op: the issue's
    targets compare the engine's all_reduce with raw MPI_Allreduce."""
    rows = []
    for (o, w), lines in sorted(comm_points(items).items(), key=lambda kv: kv[0][1]):
        if o != op:
            continue
        sizes = sorted({b for pts in lines.values() for b, _ in pts})
        for b in sizes:
            times = {impl: number(r["metrics"]["time_s"]) for impl, pts in lines.items()
                     for nb, r in pts if nb == b}
            e, m = times.get("engine"), times.get("mpi")
            rows.append((w, b, times, e / m if e and m else None))
    return rows


def comm_table_html(items) -> str:
    rows = comm_overhead_rows(items)
    if not rows:
        return ""
    impls = sorted({i for _, _, t, _ in rows for i in t}, key=lambda s: _impl_key(s.split(" [")[0]))
    head = "".join(f"<th>{escape(i)}</th>" for i in impls)
    body = []
    for w, b, times, ratio in rows:
        cells = "".join(f'<td class="num">{_us(times.get(i))}</td>' for i in impls)
        rc = f"{ratio:.3g}x" if ratio else "-"
        body.append(f'<tr><td class="num">{w}</td><td class="num">{escape(fmt_bytes(b))}</td>{cells}'
                    f'<td class="num">{rc}</td></tr>')
    return ("<p>all_reduce, float32: time per call (us) of each implementation, and the engine's "
            "time over raw <code>MPI_Allreduce</code>'s (the targets: within 1.10x from 1 MiB, "
            "at most 2x at 8 B).</p>"
            f"<table><tr><th>ranks</th><th>size</th>{head}<th>engine / mpi</th></tr>"
            + "".join(body) + "</table>")


def comm_table_md(items) -> list[str]:
    rows = comm_overhead_rows(items)
    if not rows:
        return []
    impls = sorted({i for _, _, t, _ in rows for i in t}, key=lambda s: _impl_key(s.split(" [")[0]))
    lines = ["## Collectives: all_reduce float32, time per call (us)", "",
             "| ranks | size | " + " | ".join(impls) + " | engine / mpi |",
             "|---:|---:|" + "---:|" * len(impls) + "---:|"]
    for w, b, times, ratio in rows:
        lines.append(f"| {w} | {fmt_bytes(b)} | " + " | ".join(_us(times.get(i)) for i in impls)
                     + f" | {f'{ratio:.3g}x' if ratio else '-'} |")
    return lines + [""]


def _us(t) -> str:
    return "-" if t is None else f"{t * 1e6:.4g}"


def ddp_points(items):
    """{model: {impl label: {world: record}}} of passed DDP benchmarks."""
    out: dict = OrderedDict()
    for run, r in items:
        if r.get("kind") != "benchmark" or r.get("status") != "pass":
            continue
        m = DDP_CASE.match(r["case"])
        if not m:
            continue
        world = _world(m)
        if world is None:
            continue
        impl = m["impl"] if run is None else f"{m['impl']} [{run}]"
        out.setdefault(m["model"], {}).setdefault(impl, {})[world] = r
    return out


def ddp_scaling(items, path: Path):
    """samples/s vs world size per model, one line per impl, with each impl's ideal (linear from
    its smallest world) dotted."""
    points = ddp_points(items)
    data = []
    for model, impls in points.items():
        lines = {}
        for impl, by_world in impls.items():
            pts = sorted((w, number(r["metrics"].get("samples_per_s"))) for w, r in by_world.items())
            pts = [(w, s) for w, s in pts if s is not None and s > 0]
            if pts:
                lines[impl] = pts
        if lines:
            data.append((model, lines))
    if not data:
        return None
    kept, note = _bounded([model for model, _ in data])
    data = [d for d in data if d[0] in kept]
    fig, axes = plt.subplots(1, len(data), figsize=(4.8 * len(data), 3.8), squeeze=False)
    if note:
        fig.suptitle("DDP throughput vs ranks" + note, fontsize=10)
    for ax, (model, lines) in zip(axes[0], data):
        worlds = sorted({w for pts in lines.values() for w, _ in pts})
        for impl in sorted(lines, key=lambda s: _impl_key(s.split(" [")[0])):
            pts = lines[impl]
            style = _style(impl.split(" [")[0])
            ax.plot([w for w, _ in pts], [s for _, s in pts], label=impl, **style)
            w0, s0 = pts[0]
            if len(pts) > 1:
                ax.plot(worlds, [s0 * w / w0 for w in worlds], color=style.get("color"),
                        linestyle=":", linewidth=1, alpha=0.6)
            for w, s in pts:
                ax.annotate(f"{s:.3g}", (w, s), xytext=(3, 3), textcoords="offset points", fontsize=7)
        ax.set_xticks(worlds)
        ax.set_xlabel("ranks (dotted: linear scaling from the fewest ranks)")
        ax.set_ylabel("samples/s")
        ax.set_title(f"DDP {model}: throughput vs ranks", fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def ddp_step_split(items, path: Path):
    """Stacked bars per (world, impl), one panel per model (steps differ by orders of magnitude
    between models): forward, backward, comm wait, optimizer and the rest of the step (ms), with
    the fraction of communication hidden behind backward."""
    panels = []
    for model, impls in ddp_points(items).items():
        bars = []
        for impl in sorted(impls, key=lambda s: _impl_key(s.split(" [")[0])):
            for w, r in sorted(impls[impl].items()):
                m = r["metrics"]
                parts = [max(0.0, number(m.get(k)) or 0.0) for k, _, _ in STEP_PARTS]
                step = number(m.get("step_ms"))
                if step is None or step <= 0 or not any(parts):
                    continue
                bars.append((f"w{w} {impl}", parts, step, number(m.get("comm_hidden_fraction"))))
        if bars:
            panels.append((model, bars[:MAX_BARS], len(bars) - MAX_BARS))
    if not panels:
        return None
    kept, left_out = _bounded([model for model, _, _ in panels])
    panels = [p for p in panels if p[0] in kept]
    heights = [0.42 * len(b) + 1.2 for _, b, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (model, bars, bars_left) in zip(axes[:, 0], panels):
        ys = list(range(len(bars)))
        left = [0.0] * len(bars)
        for k, (_, label, color) in enumerate(STEP_PARTS):
            widths = [b[1][k] for b in bars]
            ax.barh(ys, widths, left=left, color=color, label=label)
            left = [a + b for a, b in zip(left, widths)]
        rest = [max(0.0, b[2] - l) for b, l in zip(bars, left)]
        ax.barh(ys, rest, left=left, color="#c7c7c7", label="other (step - parts)")
        for y, (label, parts, step, hidden) in zip(ys, bars):
            note = f"{step:.3g} ms"
            if hidden is not None:
                note += f", {hidden * 100:.0f}% comm hidden"
            ax.annotate(note, (max(step, sum(parts)), y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.set_yticks(ys, [b[0] for b in bars], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, max(max(b[2], sum(b[1])) for b in bars) * 1.4)
        ax.set_title(f"DDP {model}: one step, per-rank means (ms)" + _bars_note(bars_left), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    axes[-1, 0].set_xlabel("ms per step")
    if left_out:
        fig.suptitle("DDP step split" + left_out, fontsize=10)
    return _save(fig, path)


def _numeric(vs):
    return [math.nan if v is None else v for v in map(number, vs)]


def is_fashion(case: str) -> bool:
    """training's fashion_mnist/mlp, ddp's mpi/fashion_mnist/mlp/w2 and the like."""
    return re.search(r"(^|/)fashion_mnist/", case) is not None


def fashion_curves(items, path: Path):
    """The Fashion-MNIST curves of every run of it (suite training: one process, engine and
    LibTorch; suite ddp: the engine on several ranks), one panel per quantity, so DDP's accuracy
    reads against the single-process run's."""
    series = OrderedDict()  # quantity -> [(label, values)]
    sources = 0
    for run, r in items:
        if not is_fashion(r["case"]) or not r.get("series"):
            continue
        if r["suite"] == "training":
            who = {"engine_": "engine, 1 process", "reference_": "LibTorch, 1 process"}
        else:
            m = re.search(r"/w(\d+)(/|$)", r["case"])
            ranks = f"{m[1]} ranks" if m else r["suite"]
            backend = r["case"].split("/fashion_mnist/")[0] if "/fashion_mnist/" in r["case"] else ""
            how = r["suite"].upper() + (f" on {backend}" if backend else "")
            who = {"engine_": f"engine {how}, {ranks}", "reference_": f"LibTorch {how}, {ranks}"}
        found = False
        for key, values in r["series"].items():
            for prefix, label in who.items():
                if key.startswith(prefix) and "epoch" in key:
                    if run is not None:
                        label += f" [{run}]"
                    series.setdefault(key[len(prefix):], []).append((label, values))
                    found = True
        sources += found
    # Only worth a plot of its own when it sets runs side by side (the curves plot has each alone).
    if not series or sources < 2:
        return None
    cols = min(3, len(series))
    rows = (len(series) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.3 * rows), squeeze=False)
    for ax, (name, lines) in zip(axes.flat, series.items()):
        for label, values in lines:
            style = "--" if label.startswith("LibTorch") else "-"
            ax.plot(range(1, len(values) + 1), _numeric(values), marker="o", markersize=3,
                    linestyle=style, label=label)
        ax.set_title(f"Fashion-MNIST MLP: {name}", fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(series):]:
        ax.axis("off")
    return _save(fig, path)


def ddp_table_md(items) -> list[str]:
    points = ddp_points(items)
    if not points:
        return []
    lines = ["## DDP", "", "| model | ranks | impl | samples/s | ms/step | comm wait ms | hidden |",
             "|---|---:|---|---:|---:|---:|---:|"]
    for model, impls in points.items():
        for impl in sorted(impls, key=lambda s: _impl_key(s.split(" [")[0])):
            for w, r in sorted(impls[impl].items()):
                m = r["metrics"]

                def f(k, fmt="{:.4g}"):
                    v = number(m.get(k))
                    return "-" if v is None else fmt.format(v)
                lines.append(f"| {model} | {w} | {impl} | {f('samples_per_s')} | {f('step_ms')} | "
                             f"{f('comm_wait_ms')} | {f('comm_hidden_fraction', '{:.0%}')} |")
    return lines + [""]


# ---------------------------------------------------------------- FSDP (docs/results.md, "fsdp")

FSDP_CASE = re.compile(r"^fsdp/(?P<model>[^/]+)/(?P<strategy>[a-z_]+)/w(?P<world>\d+)/"
                       r"(?P<impl>[A-Za-z0-9_.-]+)$")
FSDP_STRATEGIES = ("full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "ddp")
FSDP_IMPL_STYLE = {
    "engine": dict(color="#1f77b4", marker="o", linestyle="-"),
    "engine-ddp": dict(color="#2ca02c", marker="^", linestyle="--"),
    "torch": dict(color="#ff7f0e", marker="s", linestyle="-"),
}
FSDP_IMPL_ORDER = ("engine", "engine-ddp", "torch")
# The memory categories (the engine's allocator tags), bottom to top of a stacked bar.
MEMORY_PARTS = (("peak_parameter_bytes", "parameters", "#1f77b4"),
                ("peak_gradient_bytes", "gradients", "#2ca02c"),
                ("peak_optimizer_state_bytes", "optimizer state", "#9467bd"),
                ("peak_activation_bytes", "activations", "#ff7f0e"),
                ("peak_communication_bytes", "communication", "#d62728"),
                ("peak_other_bytes", "other", "#c7c7c7"))


def _fsdp_impl_key(impl: str):
    base = impl.split(" [")[0]
    return (FSDP_IMPL_ORDER.index(base) if base in FSDP_IMPL_ORDER else len(FSDP_IMPL_ORDER), impl)


def _strategy_key(s: str):
    return (FSDP_STRATEGIES.index(s) if s in FSDP_STRATEGIES else len(FSDP_STRATEGIES), s)


def fsdp_points(items):
    """{model: {(strategy, impl label): {world: record}}} of passed FSDP benchmarks."""
    out: dict = OrderedDict()
    for run, r in items:
        if r.get("kind") != "benchmark" or r.get("status") != "pass":
            continue
        m = FSDP_CASE.match(r["case"])
        if not m:
            continue
        world = _world(m)
        if world is None:
            continue
        impl = m["impl"] if run is None else f"{m['impl']} [{run}]"
        out.setdefault(m["model"], {}).setdefault((m["strategy"], impl), {})[world] = r
    return out


def fsdp_throughput(items, path: Path):
    """samples/s vs world size, one panel per model and strategy, one line per impl; the engine's
    DDP (strategy `ddp`) is drawn in every panel of its model, as the reference to be near."""
    panels = []
    for model, lines in fsdp_points(items).items():
        strategies = sorted({s for s, _ in lines if s != "ddp"}, key=_strategy_key)
        for strategy in strategies:
            drawn = {}
            for (s, impl), by_world in lines.items():
                if s not in (strategy, "ddp"):
                    continue
                pts = sorted((w, number(r["metrics"].get("samples_per_s"))) for w, r in by_world.items())
                pts = [(w, v) for w, v in pts if v is not None and v > 0]
                if pts:
                    drawn[impl] = pts
            if drawn:
                panels.append((model, strategy, drawn))
    if not panels:
        return None
    kept, left_out = _bounded([(model, strategy) for model, strategy, _ in panels], what="models and strategies")
    panels = [p for p in panels if (p[0], p[1]) in kept]
    cols = min(4, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, (model, strategy, lines) in zip(axes.flat, panels):
        worlds = sorted({w for pts in lines.values() for w, _ in pts})
        for impl in sorted(lines, key=_fsdp_impl_key):
            pts = lines[impl]
            ax.plot([w for w, _ in pts], [v for _, v in pts], label=impl,
                    **FSDP_IMPL_STYLE.get(impl.split(" [")[0], dict(marker="x", linestyle=":")))
            for w, v in pts:
                ax.annotate(f"{v:.3g}", (w, v), xytext=(3, 3), textcoords="offset points", fontsize=7)
        ax.set_xticks(worlds)
        ax.set_xlabel("ranks")
        ax.set_ylabel("samples/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"FSDP {model}, {strategy}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("FSDP throughput vs ranks (higher is better; engine-ddp: the engine's DDP)" + left_out, fontsize=11)
    return _save(fig, path)


def _estimate(metrics, key: str):
    """The estimator's figure for a memory part, when the record carries it (estimate_<tag>_bytes
    beside peak_<tag>_bytes)."""
    return number(metrics.get("estimate_" + key[len("peak_"):]))


def fsdp_memory(items, path: Path):
    """Stacked per-rank peak memory by category (the engine's allocator tags) against world size
    and strategy, one panel per model; beside each engine bar, the estimator's stacked figure
    when the records carry estimate_* metrics, and PyTorch's measured categories (tensor bytes of
    parameters, gradients and optimizer state) when present."""
    panels = []
    for model, lines in fsdp_points(items).items():
        bars = []
        keys = sorted(lines, key=lambda k: (_strategy_key(k[0]), _fsdp_impl_key(k[1])))
        for strategy, impl in keys:
            for w, r in sorted(lines[(strategy, impl)].items()):
                m = r["metrics"]
                parts = [max(0.0, number(m.get(k)) or 0.0) for k, _, _ in MEMORY_PARTS]
                if not any(parts):
                    continue
                label = f"{strategy} w{w} {impl}"
                bars.append((label, parts, False))
                est = [_estimate(m, k) for k, _, _ in MEMORY_PARTS]
                if any(e is not None for e in est):
                    bars.append((f"{strategy} w{w} estimate", [max(0.0, e or 0.0) for e in est], True))
        if bars:
            panels.append((model, bars[:MAX_BARS], len(bars) - MAX_BARS))
    if not panels:
        return None
    kept, left_out = _bounded([model for model, _, _ in panels])
    panels = [p for p in panels if p[0] in kept]
    heights = [0.3 * len(b) + 1.2 for _, b, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    mib = float(1 << 20)
    for ax, (model, bars, bars_left) in zip(axes[:, 0], panels):
        ys = list(range(len(bars)))
        left = [0.0] * len(bars)
        for k, (_, label, color) in enumerate(MEMORY_PARTS):
            widths = [b[1][k] / mib for b in bars]
            ax.barh(ys, widths, left=left, color=color, label=label,
                    hatch=None, edgecolor="white", linewidth=0.3)
            left = [a + b for a, b in zip(left, widths)]
        for y, (label, parts, est), total in zip(ys, bars, left):
            if est:  # the estimator's bars: hatched outline over the same colours
                ax.barh([y], [total], color="none", edgecolor="black", hatch="//", linewidth=0.6)
            ax.annotate(f"{total:.3g} MiB", (total, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.set_yticks(ys, [b[0] for b in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, max(left) * 1.25 if max(left) > 0 else 1)
        ax.set_title(f"FSDP {model}: per-rank peak memory by category (each category's own peak, "
                     "largest over ranks; hatched: the estimator)" + _bars_note(bars_left), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    axes[-1, 0].set_xlabel("MiB per rank")
    if left_out:
        fig.suptitle("FSDP memory per rank" + left_out, fontsize=10)
    return _save(fig, path)


def fsdp_comm(items, path: Path):
    """Exposed against hidden communication per step (ms): exposed = comm_wait_ms (the training
    thread blocked on collectives), hidden = comm_busy_ms - exposed where the record measures the
    busy time; one bar per (strategy, world, impl), one panel per model, annotated with the
    exposed share of the step."""
    panels = []
    for model, lines in fsdp_points(items).items():
        bars = []
        keys = sorted(lines, key=lambda k: (_strategy_key(k[0]), _fsdp_impl_key(k[1])))
        for strategy, impl in keys:
            for w, r in sorted(lines[(strategy, impl)].items()):
                m = r["metrics"]
                exposed = number(m.get("comm_wait_ms"))
                step = number(m.get("step_ms"))
                if exposed is None or step is None or step <= 0:
                    continue
                busy = number(m.get("comm_busy_ms"))
                hidden = None if busy is None else max(0.0, busy - exposed)
                bars.append((f"{strategy} w{w} {impl}", max(0.0, exposed), hidden, step))
        if bars:
            panels.append((model, bars[:MAX_BARS], len(bars) - MAX_BARS))
    if not panels:
        return None
    kept, left_out = _bounded([model for model, _, _ in panels])
    panels = [p for p in panels if p[0] in kept]
    heights = [0.3 * len(b) + 1.2 for _, b, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (model, bars, bars_left) in zip(axes[:, 0], panels):
        ys = list(range(len(bars)))
        exposed = [b[1] for b in bars]
        hidden = [b[2] or 0.0 for b in bars]
        ax.barh(ys, exposed, color="#d62728", label="exposed (training thread waited)")
        ax.barh(ys, hidden, left=exposed, color="#98df8a", label="hidden (overlapped compute)")
        for y, (label, e, h, step) in zip(ys, bars):
            note = f"{e / step:.0%} of the {step:.3g} ms step exposed"
            if h is None:
                note += ", busy time not measured"
            ax.annotate(note, (e + (h or 0.0), y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.set_yticks(ys, [b[0] for b in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, max(max(e + h for e, h in zip(exposed, hidden)), 1e-9) * 1.8)
        ax.set_title(f"FSDP {model}: communication per step, exposed vs hidden (ms)" + _bars_note(bars_left),
                     fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    axes[-1, 0].set_xlabel("ms per step")
    if left_out:
        fig.suptitle("FSDP communication" + left_out, fontsize=10)
    return _save(fig, path)


def fsdp_rows(items):
    """[(model, strategy, world, {impl: record})] for the table, and the ratios the issue's
    targets name: engine / torch samples/s and engine / engine-ddp samples/s."""
    rows = []
    for model, lines in fsdp_points(items).items():
        ddp = {k[1]: v for k, v in lines.items() if k[0] == "ddp"}
        strategies = sorted({s for s, _ in lines if s != "ddp"}, key=_strategy_key)
        for strategy in strategies:
            worlds = sorted({w for (s, _), by in lines.items() if s == strategy for w in by})
            for w in worlds:
                impls = {impl: by[w] for (s, impl), by in lines.items() if s == strategy and w in by}
                for impl, by in ddp.items():
                    if w in by:
                        impls.setdefault(impl, by[w])
                rows.append((model, strategy, w, impls))
    return rows


def _sps(impls, impl):
    r = impls.get(impl)
    return None if r is None else number(r["metrics"].get("samples_per_s"))


def fsdp_table_md(items) -> list[str]:
    rows = fsdp_rows(items)
    if not rows:
        return []
    lines = ["## FSDP", "",
             "| model | strategy | ranks | engine samples/s | engine-ddp | torch | engine / torch "
             "| engine / ddp | exposed comm | MB/step | peak param+grad+optim MiB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for model, strategy, w, impls in rows:
        e, d, t = _sps(impls, "engine"), _sps(impls, "engine-ddp"), _sps(impls, "torch")

        def f(v, fmt="{:.4g}"):
            return "-" if v is None else fmt.format(v)
        eng = impls.get("engine", {}).get("metrics", {})
        exposed = number(eng.get("comm_exposed_fraction"))
        mb = number(eng.get("bytes_per_step"))
        states = [number(eng.get(k)) for k in ("peak_parameter_bytes", "peak_gradient_bytes",
                                               "peak_optimizer_state_bytes")]
        pgo = sum(states) / (1 << 20) if all(s is not None for s in states) else None
        lines.append(f"| {model} | {strategy} | {w} | {f(e)} | {f(d)} | {f(t)} | "
                     f"{f(e / t if e and t else None, '{:.2f}x')} | "
                     f"{f(e / d if e and d else None, '{:.2f}x')} | {f(exposed, '{:.0%}')} | "
                     f"{f(None if mb is None else mb / 1e6, '{:.3g}')} | {f(pgo, '{:.3g}')} |")
    return lines + [""]


def fsdp_table_html(items) -> str:
    """The FSDP table (fsdp_table_md's rows) for the HTML report."""
    md = fsdp_table_md(items)
    if not md:
        return ""
    head = [c.strip() for c in md[2].strip("|").split("|")]
    body = []
    for line in md[4:]:
        if not line:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        body.append("<tr>" + "".join((f'<td class="num">{escape(c)}</td>' if i >= 2
                                       else f"<td>{escape(c)}</td>") for i, c in enumerate(cells))
                    + "</tr>")
    return ("<p>FSDP: samples/s of the engine's FSDP, the engine's DDP and PyTorch FSDP2 on Gloo in "
            "the same run, their ratios (the issue's targets for full_shard on the GPT at 2 ranks: "
            "engine / torch at least 1.5x, engine / ddp at least 0.85x, exposed communication at "
            "most 30% of the step), and the engine's bytes and memory per rank.</p>"
            "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
            + "".join(body) + "</table>")


# ---------------------------------------------------------------- DCP (docs/results.md, "dcp")

DCP_CASE = re.compile(r"^dcp/(?P<model>[^/]+)/w(?P<world>\d+)/(?P<impl>[A-Za-z0-9_.-]+)$")
DCP_IMPL_COLOR = {"engine": "#1f77b4", "torch": "#ff7f0e"}


def dcp_points(items):
    """{(model, world): {impl label: record}} of passed distributed-checkpoint benchmarks."""
    out: dict = OrderedDict()
    for run, r in items:
        if r.get("kind") != "benchmark" or r.get("status") != "pass":
            continue
        m = DCP_CASE.match(r["case"])
        if not m:
            continue
        world = _world(m)
        if world is None:
            continue
        impl = m["impl"] if run is None else f"{m['impl']} [{run}]"
        out.setdefault((m["model"], world), {})[impl] = r
    return OrderedDict(sorted(out.items()))


def dcp_throughput(items, path: Path):
    """Per (model, world): save and load GB/s, one bar per impl, the engine's memcpy GB/s as a
    dashed line (what a save or load through the page cache cannot beat); and the asynchronous
    save's blocking time beside the synchronous save's, in ms."""
    groups = dcp_points(items)
    if not groups:
        return None
    kept, left_out = _bounded(groups, what="models and world sizes")
    groups = OrderedDict((k, groups[k]) for k in kept)
    fig, axes = plt.subplots(len(groups), 2, figsize=(9.5, 3.2 * len(groups)), squeeze=False)
    for (ax_bw, ax_t), ((model, world), impls) in zip(axes, groups.items()):
        names = sorted(impls, key=lambda i: (i.split(" [")[0] != "engine", i))
        width = 0.8 / max(1, len(names))
        floor = None
        for k, impl in enumerate(names):
            m = impls[impl]["metrics"]
            color = DCP_IMPL_COLOR.get(impl.split(" [")[0], "#7f7f7f")
            vals = [number(m.get("save_gbps")) or 0, number(m.get("load_gbps")) or 0]
            xs = [x + (k - (len(names) - 1) / 2) * width for x in (0, 1)]
            ax_bw.bar(xs, vals, width, label=impl, color=color)
            for x, v in zip(xs, vals):
                ax_bw.annotate(f"{v:.3g}", (x, v), ha="center", va="bottom", fontsize=7)
            floor = floor or number(m.get("memcpy_gbps"))
            times = [number(m.get("save_ms")) or 0, number(m.get("async_blocking_ms")) or 0]
            ax_t.bar(xs, times, width, label=impl, color=color)
            for x, v in zip(xs, times):
                ax_t.annotate(f"{v:.0f}", (x, v), ha="center", va="bottom", fontsize=7)
        if floor:
            ax_bw.axhline(floor, color="black", linestyle="--", linewidth=1, label=f"memcpy {floor:.3g}")
        ax_bw.set_xticks([0, 1], ["save", "load"])
        ax_bw.set_ylabel("GB/s (all ranks)")
        ax_bw.set_title(f"checkpoint {model}, {world} rank{'s' if world != 1 else ''}: GB/s", fontsize=10)
        ax_t.set_xticks([0, 1], ["sync save", "async save blocks"])
        ax_t.set_ylabel("ms")
        ax_t.set_title(f"checkpoint {model}, {world} rank{'s' if world != 1 else ''}: training blocked", fontsize=10)
        for ax in (ax_bw, ax_t):
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=7)
    fig.suptitle("Distributed checkpoints: the engine beside torch.distributed.checkpoint" + left_out, fontsize=11)
    return _save(fig, path)


def dcp_table_md(items) -> list[str]:
    """Markdown: per (model, world) the engine's and torch's save/load GB/s, their ratios and the
    async save's blocking share."""
    rows = []
    for (model, world), impls in dcp_points(items).items():
        e, t = impls.get("engine"), impls.get("torch")
        if not e:
            continue
        em, tm = e["metrics"], (t["metrics"] if t else {})

        def ratio(k):
            a, b = number(em.get(k)), number(tm.get(k))
            return f"{a / b:.2f}x" if a and b else "-"

        def f(m, k):
            v = number(m.get(k))
            return "-" if v is None else f"{v:.3g}"

        share = number(em.get("async_blocking_fraction"))
        rows.append(f"| {model} | {world} | {f(em, 'save_gbps')} | {f(tm, 'save_gbps')} | {ratio('save_gbps')} | "
                    f"{f(em, 'load_gbps')} | {f(tm, 'load_gbps')} | {ratio('load_gbps')} | "
                    f"{'-' if share is None else f'{share:.0%}'} | {f(em, 'memcpy_gbps')} | "
                    f"{f(em, 'plain_write_gbps')} |")
    if not rows:
        return []
    return ["## Distributed checkpoints (GB/s, all ranks)", "",
            "| model | ranks | engine save | torch save | ratio | engine load | torch load | ratio | "
            "async blocks | memcpy | plain write |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""]
