"""Memory snapshots (docs/memory.md): the engine's JSON -> the pickle PyTorch's memory visualizer
opens, and the per-rank memory timeline (allocated bytes over time by tag) in the HTML report.

    python -m trainbench_reports.memory_snapshot IN.json OUT.pickle

writes the dict torch.cuda.memory._snapshot() returns (segments, device_traces), which
https://pytorch.org/memory_viz and torch.cuda._memory_viz (stats, trace, segments, trace_plot)
read. The CPU allocator has no segments shared by several blocks: each block, live or cached, is
its own segment, as a block of PyTorch's expandable segments would be. A block's "frames" name
its site: the op (as the function), the module path (as the file) and the user label; each
allocation's "category" is its tag, so the visualizer colours the timeline by tag.
Exit status: 0 written; 2 a bad input (one line naming the file and the problem)."""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

from .load import LoadError, decode_json, read_input
from .output import write_output

FORMAT = "trainbench.memory_snapshot"
TAGS = ("parameter", "gradient", "optimizer_state", "activation", "communication", "other")
# MemoryViz.js adds 'unknown' to its legend with a typo when categories lack it; naming the tag
# 'other' as PyTorch's profiler names an uncategorised tensor avoids that path.
CATEGORY = {"other": "unknown"}
# The most bytes read of one snapshot: TRAINBENCH_MEMORY_HISTORY keeps up to 10^7 events
# (kMaxHistory in engine/memory/allocator.cpp), about 100 bytes of JSON each.
MAX_SNAPSHOT_BYTES = 1 << 30


class SnapshotError(Exception):
    """An input that is not a trainbench memory snapshot; the message names the file."""


def is_snapshot(doc) -> bool:
    return isinstance(doc, dict) and doc.get("format") == FORMAT


def load(path) -> dict:
    path = Path(path)
    try:
        doc = decode_json(read_input(path, MAX_SNAPSHOT_BYTES, "memory snapshot"), path)
    except LoadError as e:
        raise SnapshotError(str(e))
    if not is_snapshot(doc):
        raise SnapshotError(f"{path}: not a trainbench memory snapshot (no \"format\": \"{FORMAT}\")")
    if doc.get("version") != 1:
        raise SnapshotError(f"{path}: snapshot version {doc.get('version')!r}, this reader knows 1")
    for key in ("live", "cached", "events", "stats"):
        if key not in doc:
            raise SnapshotError(f"{path}: the snapshot has no {key!r}")
    return doc


def split_inputs(paths):
    """(result paths, [(path, snapshot)]): the report's inputs with memory snapshots set apart
    (a file is a snapshot when its JSON says "format": "trainbench.memory_snapshot")."""
    results, snapshots = [], []
    for p in paths:
        try:  # bounded, regular files only: a FIFO or /dev/zero is refused, not read
            data = read_input(Path(p), MAX_SNAPSHOT_BYTES, "result file")
            # Only a snapshot names its format; a result file need not be parsed twice.
            doc = decode_json(data, Path(p)) if FORMAT.encode() in data else None
        except LoadError:
            results.append(p)  # load_results names the problem (too deep a nesting included)
            continue
        if is_snapshot(doc):
            snapshots.append((Path(p), doc))
        else:
            results.append(p)
    return results, snapshots


def _frames(e: dict) -> list:
    frames = [{"filename": e.get("module") or "<no module>", "line": 0, "name": e.get("op") or "<unnamed op>"}]
    if e.get("label"):
        frames.append({"filename": "<label>", "line": 0, "name": e["label"]})
    return frames


def _block(b: dict, live: bool) -> dict:
    return {"address": b["address"], "size": b["size"],
            "requested_size": b.get("requested", b["size"]) if live else 0,
            "state": "active_allocated" if live else "inactive",
            "frames": _frames(b) if live else []}


def to_torch(snap: dict) -> dict:
    """The dict torch.cuda.memory._snapshot() returns, for device 0."""
    segments = []
    for b, live in [(b, True) for b in snap["live"]] + [(c, False) for c in snap["cached"]]:
        block = _block(b, live)
        segments.append({
            "device": 0, "address": b["address"], "total_size": b["size"], "stream": 0,
            "segment_type": "large" if b["size"] >= (1 << 20) else "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "allocated_size": block["requested_size"], "active_size": b["size"] if live else 0,
            "requested_size": block["requested_size"], "blocks": [block]})
    segments.sort(key=lambda s: s["address"])
    trace = []
    for e in snap["events"]:
        base = {"addr": e["address"], "size": e["size"], "stream": 0, "time_us": e["time_us"],
                "frames": _frames(e)}
        action = e["action"]
        if action == "alloc":
            trace.append(dict(base, action="alloc", category=CATEGORY.get(e["tag"], e["tag"])))
        elif action == "free":
            trace.append(dict(base, action="free_requested"))
            trace.append(dict(base, action="free_completed"))
        elif action in ("segment_alloc", "segment_free"):
            trace.append(dict(base, action=action, frames=[]))
        elif action == "oom":
            limit = snap.get("limit_bytes") or 0
            reserved = snap["stats"]["reserved_bytes"]
            trace.append(dict(base, action="oom", size=e["requested"],
                              device_free=max(0, limit - reserved) if limit else 0))
    # A closing 'snapshot' event (PyTorch records one when a snapshot is taken) in the 'unknown'
    # category keeps MemoryViz.js's legend code off its typo whatever tags occurred.
    trace.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0,
                  "time_us": snap.get("time_us", 0), "frames": [], "category": "unknown"})
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"backend": "trainbench cpu caching allocator"}}


def write_pickle(snap: dict, out) -> Path:
    # Protocol 4: MemoryViz.js's unpickler reads protocols 2 to 4 only.
    return write_output(out, pickle.dumps(to_torch(snap), protocol=4))


def timeline(snap: dict):
    """(seconds since the first event, {tag: allocated bytes}) after each alloc or free event.
    The window starts from the blocks live then: those freed in it that it did not allocate, and
    those still live at the end that it did not allocate. A block counts under the tag it was
    allocated with until it is freed (a later retag is not an event), so no tag goes negative."""
    events = [e for e in snap["events"] if e["action"] in ("alloc", "free")]
    now = {t: 0 for t in TAGS}
    if not events:
        return [], {t: [] for t in TAGS}
    active = {}  # address -> tag, for blocks this window allocated and has not freed
    allocated_here = set()
    for e in events:
        if e["action"] == "alloc":
            active[e["address"]] = e["tag"]
            allocated_here.add(e["address"])
        elif e["address"] in active:
            del active[e["address"]]
        else:  # live when the window began
            now[e["tag"]] = now.get(e["tag"], 0) + e["size"]
    for b in snap["live"]:
        if b["address"] not in active:
            now[b["tag"]] = now.get(b["tag"], 0) + b["size"]
    t0 = events[0]["time_us"]
    tag_of = {}
    xs, ys = [], {t: [] for t in now}
    for e in events:
        if e["action"] == "alloc":
            tag_of[e["address"]] = e["tag"]
            now[e["tag"]] += e["size"]
        else:
            now[tag_of.pop(e["address"], e["tag"])] -= e["size"]
        xs.append((e["time_us"] - t0) / 1e6)
        for t in now:
            ys[t].append(now[t])
    return xs, ys


def plot_timelines(snapshots, path):
    """One panel per snapshot (rank): allocated bytes over time, stacked by tag, the cap drawn
    when one was set and OOMs marked. None when no snapshot recorded events."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import _save

    drawn = [(p, s, timeline(s)) for p, s in snapshots]
    drawn = [d for d in drawn if d[2][0]]
    if not drawn:
        return None
    drawn.sort(key=lambda d: (d[1].get("rank", 0), str(d[0])))
    fig, axes = plt.subplots(len(drawn), 1, figsize=(9, 2.6 * len(drawn) + 0.6), squeeze=False)
    for ax, (p, s, (xs, ys)) in zip(axes[:, 0], drawn):
        tags = [t for t in TAGS if any(ys.get(t, []))]
        ax.stackplot(xs, [[v / 2**20 for v in ys[t]] for t in tags], labels=tags, step="post")
        limit = s.get("limit_bytes") or 0
        if limit:
            ax.axhline(limit / 2**20, color="#d62728", linestyle="--", linewidth=1, label="cap")
        t0 = min(e["time_us"] for e in s["events"] if e["action"] in ("alloc", "free"))
        for e in s["events"]:
            if e["action"] == "oom":
                ax.axvline((e["time_us"] - t0) / 1e6, color="#d62728", linewidth=1.5)
        title = f"rank {s.get('rank', 0)}: {len(s['events'])} events"
        if s.get("oom"):
            o = s["oom"]
            title += f"; OOM asking {o['requested'] / 2**20:.1f} MiB for {o.get('op') or 'an unnamed op'}"
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("MiB allocated")
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("seconds since the first recorded event")
    return _save(fig, Path(path))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python -m trainbench_reports.memory_snapshot IN.json OUT.pickle", file=sys.stderr)
        return 2
    try:
        out = write_pickle(load(argv[0]), argv[1])
    except SnapshotError as e:
        print(f"memory_snapshot: error: {e}", file=sys.stderr)
        return 2
    print(f"pickle: {out} (open it at https://pytorch.org/memory_viz or with torch.cuda._memory_viz)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
