"""The distributed part of the report: collectives (busbw/time vs size, the engine-over-MPI
table), DDP scaling and step split, the DDP Fashion-MNIST curves, and the FSDP throughput, memory
and communication plots and table, on synthetic results built here (records named and shaped as
suites/comm, suites/ddp and suites/fsdp write them). Run from this folder
with PYTHONPATH=<repo>/reports:
    python -m unittest -v test_dist_report"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample.json"
sys.path.insert(0, str(HERE.parent))

from trainbench_reports import dist_plots, scenario_plots  # noqa: E402
from trainbench_reports.load import load_schema, validate  # noqa: E402

DIST_PNGS = ("comm_busbw.png", "comm_time.png", "ddp_scaling.png", "ddp_step.png",
             "fashion_mnist.png", "fsdp_throughput.png", "fsdp_memory.png", "fsdp_comm.png")
FACTOR = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p,
          "reduce_scatter": lambda p: (p - 1) / p, "broadcast": lambda p: 1.0}
# Synthetic cost model per impl: latency (s) + bytes / bandwidth (B/s).
IMPLS = {"engine": (6e-6, 3.0e9), "mpi": (4e-6, 3.2e9), "engine-gloo": (4e-4, 1.2e9),
         "torch-gloo": (6e-4, 1.0e9)}


def record(suite, case, metrics, status="pass", series=None, kind="benchmark"):
    r = {"suite": suite, "case": case, "kind": kind, "status": status, "rank": 0,
         "metrics": metrics, "tolerances": {}, "duration_s": 0.5, "message": ""}
    if series:
        r["series"] = series
    return r


def comm_records(worlds=(2, 4), sizes=(8, 1024, 1 << 20, 64 << 20)):
    out = []
    for op in FACTOR:
        for w in worlds:
            for b in sizes:
                for impl, (lat, bw) in IMPLS.items():
                    t = lat + b / bw
                    out.append(record("comm", f"{op}/float32/{b}/w{w}/{impl}", {
                        "time_s": t, "algbw_gbps": b / t / 1e9,
                        "busbw_gbps": b / t / 1e9 * FACTOR[op](w), "bytes": b, "world": w,
                        "iterations": 100, "threads": 1}))
    return out


def ddp_records():
    out = []
    for model, base in (("mlp", 4000.0), ("gpt", 15.0)):
        for w in (1, 2, 4):
            for impl, eff in (("engine", 0.9), ("torch-gloo", 0.6)):
                sps = base * (1 if impl == "engine" else 0.5) * (1 + eff * (w - 1))
                step = 256 / sps * 1e3
                out.append(record("ddp", f"ddp/{model}/w{w}/{impl}", {
                    "samples_per_s": sps, "step_ms": step, "forward_ms": step * 0.3,
                    "backward_ms": step * 0.45, "comm_wait_ms": step * 0.1 * (w > 1),
                    "optimizer_ms": step * 0.1, "comm_hidden_fraction": 0.8,
                    "bytes_per_step": 7454760, "world": w, "threads": 1}))
    return out


def fsdp_records(estimate=False):
    """fsdp/<model>/<strategy>/w<world>/<impl> as suites/fsdp and torch_fsdp_bench.py write them:
    the engine at 2x torch's samples/s and 0.9x its DDP's; memory shrinking with the world."""
    out = []
    params = {"mlp": 1863690, "gpt": 3670016}
    for model, base in (("mlp", 4000.0), ("gpt", 20.0)):
        for w in (1, 2, 4):
            strategies = ["full_shard", "shard_grad_op", "no_shard"] + (["hybrid_shard"] if w == 4 else [])
            cases = [(s, "engine") for s in strategies] + [(s, "torch") for s in strategies]
            cases.append(("ddp", "engine-ddp"))
            for strategy, impl in cases:
                sps = base * w * {"engine": 0.9, "engine-ddp": 1.0, "torch": 0.45}[impl]
                step = 256 / sps * 1e3
                shard = 1 if strategy in ("no_shard", "ddp") else w
                p4 = params[model] * 4
                m = {"samples_per_s": sps, "step_ms": step, "step_min_ms": step * 0.95,
                     "step_max_ms": step * 1.1, "forward_ms": step * 0.3, "backward_ms": step * 0.45,
                     "comm_wait_ms": step * 0.2 * (w > 1), "optimizer_ms": step * 0.05,
                     "comm_exposed_fraction": 0.2 * (w > 1), "bytes_per_step": 3 * p4 * (w > 1),
                     "peak_parameter_bytes": p4 / shard + p4 / 4, "peak_gradient_bytes": p4 / shard,
                     "peak_optimizer_state_bytes": 2 * p4 / shard, "peak_rss_bytes": 5e8,
                     "world": w, "threads": 1, "strategy": strategy}
                if impl != "torch":
                    m.update(peak_activation_bytes=3e6 / w, peak_communication_bytes=p4 / 4,
                             peak_other_bytes=1e5, comm_busy_ms=step * 0.5 * (w > 1))
                if estimate and impl == "engine":
                    m.update(estimate_parameter_bytes=p4 / shard, estimate_gradient_bytes=p4 / shard,
                             estimate_optimizer_state_bytes=2 * p4 / shard)
                out.append(record("fsdp", f"fsdp/{model}/{strategy}/w{w}/{impl}", m))
    return out


def fashion_records():
    return [
        record("training", "fashion_mnist/mlp", {"test_accuracy": 0.88}, kind="correctness",
               series={"engine_epoch_val_accuracy": [0.82, 0.86, 0.88],
                       "reference_epoch_val_accuracy": [0.82, 0.85, 0.88],
                       "engine_epoch_train_loss": [0.6, 0.4, 0.35]}),
        record("ddp", "mpi/fashion_mnist/mlp/w2", {"test_accuracy": 0.87}, kind="correctness",
               series={"engine_epoch_val_accuracy": [0.81, 0.85, 0.87],
                       "engine_epoch_train_loss": [0.62, 0.41, "nan"]}),
    ]


def write_doc(path, records):
    doc = json.loads(SAMPLE.read_text())
    doc["records"] = records
    path.write_text(json.dumps(doc))
    return path


def run_report(out, *inputs):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    return subprocess.run([sys.executable, "-m", "trainbench_reports", "--out", str(out),
                           *map(str, inputs)], env=env, capture_output=True, text=True, timeout=240)


class DistributedReport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_synthetic_records_fit_the_schema(self):
        doc = json.loads(write_doc(self.dir / "d.json", comm_records() + ddp_records() + fashion_records()
                                   + fsdp_records(estimate=True)).read_text())
        validate(doc, load_schema(), "synthetic")  # raises on a violation

    def test_full_report(self):
        f = write_doc(self.dir / "dist.json",
                      comm_records() + ddp_records() + fashion_records() + fsdp_records())
        out = self.dir / "r"
        p = run_report(out, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        html = (out / "report.html").read_text()
        for png in DIST_PNGS:
            self.assertTrue((out / png).is_file(), png)
            self.assertGreater((out / png).stat().st_size, 5000, png)
        for title in ("Collectives: bus bandwidth vs message size", "DDP scaling",
                      "DDP step split", "Fashion-MNIST: DDP beside one process",
                      "FSDP throughput", "FSDP memory per rank", "FSDP communication: exposed vs hidden",
                      "FSDP: the engine beside its DDP and PyTorch FSDP2"):
            self.assertIn(title, html)
        # Every plot written is embedded (correctness and curves come from the fashion records).
        pngs = [p for p in out.glob("*.png")]
        self.assertEqual(html.count("data:image/png;base64,"), len(pngs))
        self.assertNotIn('src="http', html)
        # The overhead table: engine/mpi from the synthetic cost model, at 8 B and 64 MiB.
        ratio_8 = (6e-6 + 8 / 3.0e9) / (4e-6 + 8 / 3.2e9)
        ratio_64m = (6e-6 + (64 << 20) / 3.0e9) / (4e-6 + (64 << 20) / 3.2e9)
        self.assertIn(f"{ratio_8:.3g}x", html)
        self.assertIn(f"{ratio_64m:.3g}x", html)
        self.assertIn("64 MiB", html)
        md = (out / "summary.md").read_text()
        self.assertIn("## Collectives: all_reduce float32", md)
        self.assertIn(f"| 2 | 8 B | ", md)
        self.assertIn("## DDP", md)
        self.assertRegex(md, r"\| mlp \| 2 \| engine \| 7600 \|")  # 4000 * (1 + 0.9)

    def test_single_process_report_lists_no_distributed_plots(self):
        out = self.dir / "r"
        p = run_report(out, write_doc(self.dir / "a.json", comm_records() + ddp_records()))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((out / "comm_busbw.png").exists())
        p = run_report(out, SAMPLE)  # same folder, no distributed records: stale plots go
        self.assertEqual(p.returncode, 0, p.stderr)
        html = (out / "report.html").read_text()
        for png in DIST_PNGS:
            self.assertFalse((out / png).exists(), png)
        self.assertNotIn("Collectives", html)
        self.assertNotIn("DDP", html)
        self.assertNotIn("FSDP", html)

    def test_failed_and_skipped_comm_records_are_not_plotted(self):
        recs = [dict(r, status="skip", metrics={}) for r in comm_records()]
        out = self.dir / "r"
        p = run_report(out, write_doc(self.dir / "s.json", recs))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse((out / "comm_busbw.png").exists())
        self.assertIn("No passed comm benchmark records", (out / "report.html").read_text())

    def test_two_runs_are_labelled(self):
        a = write_doc(self.dir / "a.json", comm_records(worlds=(2,)))
        b = write_doc(self.dir / "b.json", comm_records(worlds=(2,)))
        items = [("a", r) for r in json.loads(a.read_text())["records"]] + \
                [("b", r) for r in json.loads(b.read_text())["records"]]
        points = dist_plots.comm_points(items)
        self.assertIn("engine [a]", points[("all_reduce", 2)])
        self.assertIn("engine [b]", points[("all_reduce", 2)])
        out = self.dir / "r"
        p = run_report(out, a, b)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((out / "comm_busbw.png").is_file())


class Helpers(unittest.TestCase):
    def test_case_patterns(self):
        m = dist_plots.COMM_CASE.match("all_reduce/float32/1048576/w2/engine-gloo")
        self.assertEqual((m["op"], int(m["bytes"]), int(m["world"]), m["impl"]),
                         ("all_reduce", 1 << 20, 2, "engine-gloo"))
        self.assertIsNone(dist_plots.COMM_CASE.match("matmul/float32/1024"))
        self.assertIsNone(dist_plots.COMM_CASE.match("mpi/all_reduce/sum/float32/n7/w2"))
        m = dist_plots.DDP_CASE.match("ddp/gpt/w4/torch-gloo")
        self.assertEqual((m["model"], m["world"], m["impl"]), ("gpt", "4", "torch-gloo"))
        self.assertIsNone(dist_plots.DDP_CASE.match("equivalence/mlp/w2"))

    def test_fmt_bytes(self):
        self.assertEqual(dist_plots.fmt_bytes(8), "8 B")
        self.assertEqual(dist_plots.fmt_bytes(1024), "1 KiB")
        self.assertEqual(dist_plots.fmt_bytes(256 << 20), "256 MiB")
        self.assertEqual(dist_plots.fmt_bytes(1536), "1.5 KiB")

    def test_overhead_rows(self):
        items = [(None, r) for r in comm_records(worlds=(2,), sizes=(8, 1 << 20))]
        rows = dist_plots.comm_overhead_rows(items)
        self.assertEqual([(w, b) for w, b, _, _ in rows], [(2, 8), (2, 1 << 20)])
        w, b, times, ratio = rows[1]
        self.assertAlmostEqual(ratio, times["engine"] / times["mpi"])
        self.assertEqual(set(times), set(IMPLS))
        # Without the mpi floor there is no ratio.
        items = [(n, r) for n, r in items if not r["case"].endswith("/mpi")]
        self.assertTrue(all(ratio is None for *_, ratio in dist_plots.comm_overhead_rows(items)))

    def test_fashion_case_names(self):
        for case in ("fashion_mnist/mlp", "mpi/fashion_mnist/mlp/w2", "gloo/fashion_mnist/mlp/w4"):
            self.assertTrue(dist_plots.is_fashion(case), case)
        self.assertFalse(dist_plots.is_fashion("mpi/equivalence/mlp/float32/w2"))
        self.assertFalse(dist_plots.is_fashion("my_fashion_mnist/mlp"))

    def test_fashion_needs_two_sources(self):
        recs = fashion_records()
        self.assertIsNone(dist_plots.fashion_curves([(None, recs[1])], Path(self.id() + ".png")))
        with tempfile.TemporaryDirectory() as d:
            path = dist_plots.fashion_curves([(None, r) for r in recs], Path(d) / "f.png")
            self.assertIsNotNone(path)
            self.assertGreater(path.stat().st_size, 5000)

    def test_step_split_skips_records_without_parts(self):
        recs = ddp_records()
        for r in recs:
            for k in ("forward_ms", "backward_ms", "comm_wait_ms", "optimizer_ms"):
                r["metrics"].pop(k)
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(dist_plots.ddp_step_split([(None, r) for r in recs], Path(d) / "s.png"))
            self.assertIsNotNone(dist_plots.ddp_scaling([(None, r) for r in recs], Path(d) / "c.png"))


class Fsdp(unittest.TestCase):
    def items(self, **kw):
        return [(None, r) for r in fsdp_records(**kw)]

    def test_case_pattern(self):
        m = dist_plots.FSDP_CASE.match("fsdp/gpt/hybrid_shard/w4/engine-ddp")
        self.assertEqual((m["model"], m["strategy"], m["world"], m["impl"]),
                         ("gpt", "hybrid_shard", "4", "engine-ddp"))
        self.assertIsNone(dist_plots.FSDP_CASE.match("ddp/gpt/w4/engine"))
        self.assertIsNone(dist_plots.FSDP_CASE.match("fsdp/gpt/w4/engine"))

    def test_table_ratios(self):
        md = "\n".join(dist_plots.fsdp_table_md(self.items()))
        # engine 0.9 * 20 * 2 = 36 samples/s beside torch 18 and the engine's DDP 40.
        self.assertIn("| gpt | full_shard | 2 | 36 | 40 | 18 | 2.00x | 0.90x | 20% |", md)
        # hybrid_shard only at 4 ranks; the DDP row is no strategy of its own.
        self.assertIn("| gpt | hybrid_shard | 4 |", md)
        self.assertNotIn("| gpt | hybrid_shard | 2 |", md)
        self.assertNotIn("| ddp |", md)
        # Failed records leave the table.
        recs = [(n, dict(r, status="fail")) for n, r in self.items()]
        self.assertEqual(dist_plots.fsdp_table_md(recs), [])

    def test_plots(self):
        with tempfile.TemporaryDirectory() as d:
            for fn in (dist_plots.fsdp_throughput, dist_plots.fsdp_memory, dist_plots.fsdp_comm):
                path = fn(self.items(), Path(d) / (fn.__name__ + ".png"))
                self.assertIsNotNone(path, fn.__name__)
                self.assertGreater(path.stat().st_size, 5000, fn.__name__)
                self.assertIsNone(fn([], Path(d) / "none.png"), fn.__name__)

    def test_estimate_only_when_present(self):
        self.assertIsNone(dist_plots._estimate({}, "peak_parameter_bytes"))
        self.assertEqual(dist_plots._estimate({"estimate_parameter_bytes": 8}, "peak_parameter_bytes"), 8)
        with tempfile.TemporaryDirectory() as d:
            # Bars of the estimator make the figure taller: present only with estimate_* metrics.
            import matplotlib.image as mpimg
            a = mpimg.imread(dist_plots.fsdp_memory(self.items(), Path(d) / "a.png"))
            b = mpimg.imread(dist_plots.fsdp_memory(self.items(estimate=True), Path(d) / "b.png"))
            self.assertGreater(b.shape[0], a.shape[0])



class DcpPlots(unittest.TestCase):
    """The distributed-checkpoint figure and table from synthetic dcp records."""

    @staticmethod
    def items():
        recs = []
        for world in (1, 2):
            for impl, gbps in (("engine", 2.0), ("torch", 1.0)):
                m = {"save_gbps": gbps * world, "load_gbps": 2 * gbps * world, "save_ms": 1000 / world,
                     "async_blocking_ms": 50.0, "async_blocking_fraction": 0.05 * world, "world": world}
                if impl == "engine":
                    m["memcpy_gbps"] = 10.0
                    m["plain_write_gbps"] = 3.0
                recs.append((None, {"suite": "dcp", "case": f"dcp/gpt/w{world}/{impl}", "kind": "benchmark",
                                    "status": "pass", "metrics": m}))
        return recs

    def test_plot_and_table(self):
        with tempfile.TemporaryDirectory() as d:
            path = dist_plots.dcp_throughput(self.items(), Path(d) / "dcp.png")
            self.assertIsNotNone(path)
            self.assertGreater(path.stat().st_size, 5000)
            self.assertIsNone(dist_plots.dcp_throughput([], Path(d) / "none.png"))
        md = "\n".join(dist_plots.dcp_table_md(self.items()))
        self.assertIn("| gpt | 2 | 4 | 2 | 2.00x | 8 | 4 | 2.00x | 10% | 10 | 3 |", md)
        failed = [(n, dict(r, status="fail")) for n, r in self.items()]
        self.assertEqual(dist_plots.dcp_table_md(failed), [])


class ScenarioPlots(unittest.TestCase):
    """The scenarios figure and table from a soak record and single scenario runs."""

    @staticmethod
    def items():
        soak = {"suite": "scenarios", "case": "soak/rank_exits/mpi", "kind": "benchmark", "status": "pass",
                "metrics": {"runs": 4, "detection_rate": 0.75, "outer_kills": 1, "timeout_s": 5},
                "series": {"time_to_diagnosis_s": [0.5, 1.0, 2.0, 6.0]}}
        runs = [(None, {"suite": "scenarios", "case": f"hang/op_mismatch/gloo/seed{s}", "kind": "scenario",
                        "status": "pass" if s else "fail",
                        "metrics": {"time_to_diagnosis_s": 0.1 * (s + 1), "outer_kill": 0, "timeout_s": 5}})
                for s in range(2)]
        other = (None, {"suite": "ops", "case": "add/float32/16", "kind": "correctness", "status": "pass",
                        "metrics": {}})
        return [(None, soak), *runs, other]

    def test_points(self):
        p = scenario_plots.scenario_points(self.items())
        self.assertEqual(list(p), ["rank_exits mpi", "op_mismatch gloo"])
        self.assertEqual((p["rank_exits mpi"]["runs"], p["rank_exits mpi"]["detected"]), (4, 3))
        self.assertEqual(p["op_mismatch gloo"]["ttd"], [0.1, 0.2])
        self.assertEqual((p["op_mismatch gloo"]["runs"], p["op_mismatch gloo"]["detected"]), (2, 1))

    def test_plot_and_table(self):
        with tempfile.TemporaryDirectory() as d:
            path = scenario_plots.scenarios_plot(self.items(), Path(d) / "scenarios.png")
            self.assertIsNotNone(path)
            self.assertGreater(path.stat().st_size, 5000)
            self.assertIsNone(scenario_plots.scenarios_plot([], Path(d) / "none.png"))
        md = "\n".join(scenario_plots.scenarios_table_md(self.items()))
        self.assertIn("| rank_exits mpi | 4 | 75% | 1.00 | 6.00 | 6.00 | 1 |", md)
        self.assertIn("| op_mismatch gloo | 2 | 50% | 0.10 | 0.20 | 0.20 | 0 |", md)
        self.assertEqual(scenario_plots.scenarios_table_md([]), [])


if __name__ == "__main__":
    unittest.main()
