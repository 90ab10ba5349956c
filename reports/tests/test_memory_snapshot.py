"""Memory snapshots (docs/memory.md): the JSON -> PyTorch memory_viz pickle, checked with the
venv's own torch.cuda._memory_viz (stats, trace, segments, memory, trace_plot, segment_plot),
the per-rank timeline, and the report taking snapshots among its inputs. The snapshots are built
here by replaying a known sequence of allocations and frees through a model of the engine's CPU
caching allocator (size classes and cache as engine/memory/allocator.cpp), plus
memory_snapshot_sample.json, written by the engine on an OOM:
    TRAINBENCH_MEMORY_LIMIT=120M TRAINBENCH_MEMORY_HISTORY=250 TRAINBENCH_MEMORY_SNAPSHOT_DIR=d \
      trainbench bench --suite training --filter train_step/gpt --repetitions 1
(softmax_causal in blocks.2.attn asks for 8 MiB with 112 MiB held). Run from this folder with
PYTHONPATH=<repo>/reports:
    python -m unittest -v test_memory_snapshot"""
import io
import json
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "memory_snapshot_sample.json"
sys.path.insert(0, str(HERE.parent))

from trainbench_reports import memory_snapshot as ms  # noqa: E402

try:
    from torch.cuda import _memory_viz as viz
except ImportError:  # a bare python3 without the project's venv
    viz = None

MiB = 1 << 20


def block_size(n):
    if n <= 64:
        return 64
    if n <= 4096:
        return 1 << (n - 1).bit_length()
    if n >= 2 * MiB:
        return (n + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
    return (n + 4095) // 4096 * 4096


class Replay:
    """Allocations and frees as the engine's allocator records them (one block per segment)."""

    def __init__(self, rank=0, limit=0):
        self.t, self.next_addr, self.rank, self.limit = 1_000_000, 1 << 20, rank, limit
        self.live, self.cached, self.events, self.ooms = {}, {}, [], 0

    def _event(self, action, addr, size, requested, tag="other", op=None, module=None):
        self.t += 10
        self.events.append({"time_us": self.t, "action": action, "address": addr, "size": size,
                            "requested": requested, "tag": tag, "op": op, "module": module,
                            "label": None})

    def alloc(self, n, tag, op, module):
        size = block_size(n)
        if self.cached.get(size):
            addr = self.cached[size].pop()
        else:
            addr, self.next_addr = self.next_addr, self.next_addr + size + 4096
            self._event("segment_alloc", addr, size, size)
        self.live[addr] = dict(address=addr, size=size, requested=n, tag=tag, op=op, module=module,
                               label=None, time_us=self.t)
        self._event("alloc", addr, size, n, tag, op, module)
        return addr

    def free(self, addr):
        b = self.live.pop(addr)
        self.cached.setdefault(b["size"], []).append(addr)
        self._event("free", addr, b["size"], b["requested"], b["tag"], b["op"], b["module"])

    def oom(self, n, op, module):
        self.ooms += 1
        self._event("oom", 0, block_size(n), n, "activation", op, module)

    def snapshot(self):
        live = sorted(self.live.values(), key=lambda b: (-b["size"], b["address"]))
        cached = sorted(({"address": a, "size": s} for s, l in self.cached.items() for a in l),
                        key=lambda c: (-c["size"], c["address"]))
        allocated = sum(b["size"] for b in live)
        by_tag = {t: sum(b["size"] for b in live if b["tag"] == t) for t in ms.TAGS}
        reserved = allocated + sum(c["size"] for c in cached)
        return {"format": ms.FORMAT, "version": 1, "reason": "on_demand", "rank": self.rank,
                "pid": 1, "device": "cpu", "time_us": self.t + 10, "limit_bytes": self.limit,
                "stats": {"allocated_bytes": allocated, "reserved_bytes": reserved,
                          "cached_free_bytes": reserved - allocated,
                          "largest_free_block_bytes": max([c["size"] for c in cached] or [0]),
                          "allocated_by_tag": by_tag, "num_ooms": self.ooms},
                "history": {"max_entries": 1000, "events": len(self.events), "dropped": 0},
                "live": live, "cached": cached, "events": list(self.events)}


def training_step(rank=0, limit=0):
    """A parameter, three activations of a forward, a gradient, an OOM, then frees."""
    r = Replay(rank, limit)
    w = r.alloc(3 * MiB, "parameter", "randn", "fc1")
    acts = [r.alloc(MiB + 100 * i, "activation", op, f"blocks.{i}.mlp.0")
            for i, op in enumerate(("linear", "gelu", "linear"))]
    g = r.alloc(3 * MiB, "gradient", "MmBackward0", None)
    r.oom(5 * MiB, "matmul", "blocks.2.mlp.0")
    for a in acts[:2]:
        r.free(a)
    r.alloc(MiB, "optimizer_state", "adamw.step", None)  # from the cache
    r.alloc(200, "other", None, None)
    del w, g
    return r


class ToTorch(unittest.TestCase):
    def test_layout(self):
        snap = training_step().snapshot()
        data = ms.to_torch(snap)
        segs = data["segments"]
        self.assertEqual(len(segs), len(snap["live"]) + len(snap["cached"]))
        self.assertEqual(sum(s["total_size"] for s in segs), snap["stats"]["reserved_bytes"])
        active = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertEqual(sum(b["size"] for b in active), snap["stats"]["allocated_bytes"])
        trace = data["device_traces"][0]
        actions = [e["action"] for e in trace]
        self.assertEqual(actions.count("free_requested"), 2)
        self.assertEqual(actions.count("free_completed"), 2)
        self.assertEqual(actions.count("oom"), 1)
        self.assertEqual(actions[-1], "snapshot")
        alloc = next(e for e in trace if e["action"] == "alloc" and e["category"] == "gradient")
        self.assertEqual(alloc["frames"][0], {"filename": "<no module>", "line": 0, "name": "MmBackward0"})
        linear = next(e for e in trace if e["action"] == "alloc" and e["frames"][0]["name"] == "linear")
        self.assertEqual(linear["frames"][0]["filename"], "blocks.0.mlp.0")
        self.assertIn("unknown", {e.get("category") for e in trace})

    def test_pickle_is_protocol_4_and_round_trips(self):
        snap = training_step().snapshot()
        with tempfile.TemporaryDirectory() as d:
            out = ms.write_pickle(snap, Path(d) / "s.pickle")
            raw = out.read_bytes()
        self.assertEqual(raw[:2], b"\x80\x04", "MemoryViz.js reads pickle protocols 2 to 4")
        self.assertEqual(pickle.loads(raw), ms.to_torch(snap))
        # Only opcodes the unpickler in PyTorch's MemoryViz.js (pytorch.org/memory_viz) handles.
        js_reads = {"APPENDS", "BINGET", "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME",
                    "LONG1", "LONG_BINGET", "MARK", "MEMOIZE", "PROTO", "SETITEMS", "SHORT_BINUNICODE", "STOP",
                    "TUPLE2", "APPEND", "NEWFALSE", "BINPUT", "BINUNICODE", "EMPTY_TUPLE", "NEWTRUE", "NONE",
                    "BINFLOAT", "TUPLE", "TUPLE1", "TUPLE3", "LONG_BINPUT", "LIST", "DICT", "SETITEM"}
        used = {op.name for op, _, _ in pickletools.genops(raw)}
        self.assertLessEqual(used, js_reads)

    @unittest.skipIf(viz is None, "needs the project's venv (torch)")
    def test_pytorch_memory_viz_reads_it(self):
        for snap in (training_step().snapshot(),) + ((ms.load(SAMPLE),) if SAMPLE.exists() else ()):
            data = pickle.loads(pickle.dumps(ms.to_torch(snap), protocol=4))
            text = viz.segsum(data)  # checks allocated + free == reserved per segment and overall
            self.assertIn(f"total_reserved: {viz._format_size(snap['stats']['reserved_bytes'])}", text)
            trace = viz.trace(data)
            self.assertIn("raise OutOfMemoryError", trace) if any(
                e["action"] == "oom" for e in snap["events"]) else None
            self.assertIn(f"{len(data['device_traces'][0])} entries", trace)
            flame = viz.segments(data, format_flamegraph=lambda lines: lines)
            self.assertIn("active_allocated", flame)
            viz.memory(data, format_flamegraph=lambda lines: lines)
            html = viz.trace_plot(data)
            self.assertIn("Active Memory Timeline", html)
            self.assertIn("Allocator State History", viz.segment_plot(data))
            viz.filter_alloc_free_pairs(pickle.loads(pickle.dumps(data)))

    def test_command_line(self):
        env = dict(os.environ, PYTHONPATH=str(HERE.parent))
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "memory_snapshot_rank0.json"
            src.write_text(json.dumps(training_step().snapshot()))
            out = Path(d) / "out.pickle"
            p = subprocess.run([sys.executable, "-m", "trainbench_reports.memory_snapshot", str(src), str(out)],
                               env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("segments", pickle.loads(out.read_bytes()))
            bad = Path(d) / "bad.json"
            bad.write_text('{"schema": "trainbench.result/1"}')
            p = subprocess.run([sys.executable, "-m", "trainbench_reports.memory_snapshot", str(bad), str(out)],
                               env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 2)
            self.assertIn("not a trainbench memory snapshot", p.stderr)


class Timeline(unittest.TestCase):
    def test_allocated_by_tag_follows_the_events(self):
        r = training_step()
        xs, ys = ms.timeline(r.snapshot())
        allocs = [e for e in r.events if e["action"] in ("alloc", "free")]
        self.assertEqual(len(xs), len(allocs))
        self.assertEqual(xs[0], 0.0)
        # Replayed from zero, so each point is the sum of the events so far, by tag.
        running = {t: 0 for t in ms.TAGS}
        for i, e in enumerate(allocs):
            running[e["tag"]] += e["size"] if e["action"] == "alloc" else -e["size"]
            for t in ms.TAGS:
                self.assertEqual(ys[t][i], running[t], (i, t))

    def test_window_after_dropped_events_starts_from_what_was_live(self):
        r = training_step()
        snap = r.snapshot()
        snap["events"] = snap["events"][6:]  # the ring dropped the parameter's and first events
        xs, ys = ms.timeline(snap)
        first = next(e for e in snap["events"] if e["action"] in ("alloc", "free"))
        self.assertGreater(ys["parameter"][0], 0, "the parameter allocated before the window is counted")
        self.assertEqual(sum(ys[t][-1] for t in ys), snap["stats"]["allocated_bytes"])
        self.assertEqual(first["action"], "alloc")

    def test_retagged_blocks_keep_their_allocation_tag_and_nothing_goes_negative(self):
        r = training_step()
        snap = r.snapshot()
        a = next(e for e in snap["events"] if e["action"] == "alloc" and e["tag"] == "other")
        for b in snap["live"]:  # registered as a parameter after it was made
            if b["address"] == a["address"]:
                b["tag"] = "parameter"
        xs, ys = ms.timeline(snap)
        self.assertTrue(all(v >= 0 for t in ys for v in ys[t]))
        self.assertEqual(sum(ys[t][-1] for t in ys), snap["stats"]["allocated_bytes"])
        if SAMPLE.exists():  # the engine's own: parameters retagged from other, a window after drops
            real = ms.load(SAMPLE)
            xs, ys = ms.timeline(real)
            self.assertTrue(all(v >= 0 for t in ys for v in ys[t]))
            self.assertEqual(sum(ys[t][-1] for t in ys), real["stats"]["allocated_bytes"])

    def test_report_plots_snapshots_among_its_inputs(self):
        env = dict(os.environ, PYTHONPATH=str(HERE.parent), MPLBACKEND="Agg")
        with tempfile.TemporaryDirectory() as d:
            inputs = []
            for rank in (0, 1):
                p = Path(d) / f"memory_snapshot_rank{rank}.json"
                p.write_text(json.dumps(training_step(rank, limit=12 * MiB).snapshot()))
                inputs.append(str(p))
            out = Path(d) / "report"
            p = subprocess.run([sys.executable, "-m", "trainbench_reports", "--quiet", "--out", str(out),
                                str(HERE / "sample.json")] + inputs, env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue((out / "memory_timeline.png").stat().st_size > 1000)
            self.assertTrue("Memory timeline per rank" in (out / "report.html").read_text())
            # Without snapshots the plot is gone (no stale file from the run before).
            p = subprocess.run([sys.executable, "-m", "trainbench_reports", "--quiet", "--out", str(out),
                                str(HERE / "sample.json")], env=env, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertFalse((out / "memory_timeline.png").exists())


if __name__ == "__main__":
    unittest.main()
