"""reports_history: `python -m trainbench_reports` over a folder of runs (results with different run
times) draws each suite's benchmark history and lists the cases whose status changed, in run
order; one run draws none. Run from this folder with PYTHONPATH=<repo>/reports:
    python -m unittest -v test_history"""
import base64
import copy
import csv
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


def run_report(out, *inputs):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    return subprocess.run([sys.executable, "-m", "trainbench_reports", "--out", str(out), *map(str, inputs)],
                          env=env, capture_output=True, text=True, timeout=240)


def run_doc(time: str, matmul_ms: float, softmax_status: str):
    """sample.json as run at `time`: matmul/float32/1024 with repetition times around matmul_ms."""
    doc = copy.deepcopy(json.loads(SAMPLE.read_text()))
    doc["run"]["time"] = time
    for rec in doc["records"]:
        if rec["case"] == "matmul/float32/1024":
            rec["series"] = {"engine_time_s": [matmul_ms * k * 1e-3 for k in (1.0, 1.02, 0.98, 1.01, 0.99)],
                             "reference_time_s": [10.7e-3] * 5}
        if rec["case"] == "softmax/float32/last_dim":
            rec["status"] = softmax_status
    return doc


class History(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def folder_of_runs(self):
        runs = self.dir / "runs"
        runs.mkdir()
        # File names sort in another order than the run times: the history follows the times.
        (runs / "a.json").write_text(json.dumps(run_doc("2026-12-03T12:00:00Z", 24.0, "fail")))
        (runs / "b.json").write_text(json.dumps(run_doc("2026-12-01T09:00:00Z", 12.0, "pass")))
        (runs / "c.json").write_text(json.dumps(run_doc("2026-12-02T09:30:00Z", 12.5, "pass")))
        (runs / "notes.txt").write_text("not a result")
        return runs

    def test_folder_of_runs_draws_history(self):
        out = self.dir / "report"
        p = run_report(out, self.folder_of_runs())
        self.assertEqual(p.returncode, 0, p.stderr)
        png = out / "history_ops.png"
        self.assertTrue(png.is_file())
        self.assertGreater(png.stat().st_size, 5000)
        html = (out / "report.html").read_text()
        self.assertIn("History across runs", html)
        self.assertIn("History: ops benchmarks over 3 runs", html)
        # Columns in run order (12-01, 12-02, 12-03), whatever the file names.
        self.assertLess(html.index("12-01 09:00"), html.index("12-02 09:30"))
        self.assertLess(html.index("12-02 09:30"), html.index("12-03 12:00"))
        # matmul/float32/1024 went from 12 ms to 24 ms: last / first 2.00x; the medians are listed.
        row = html[html.index("<tr><td>matmul/float32/1024</td>"):]
        row = row[:row.index("</tr>")]
        self.assertIn("12 ms", row)
        self.assertIn("24 ms", row)
        self.assertIn("2.00x", row)
        # The correctness case that began failing in the last run, statuses in run order.
        changed = html[html.index("Cases whose status changed (1)"):]
        self.assertIn("softmax/float32/last_dim", changed)
        cells = changed[changed.index("softmax/float32/last_dim"):]
        self.assertLess(cells.index(">pass<"), cells.index(">fail<"))
        # Repetition times are not training curves.
        self.assertFalse((out / "curves.png").exists())

    def test_one_run_has_no_history_and_stale_plots_go(self):
        out = self.dir / "report"
        self.assertEqual(run_report(out, self.folder_of_runs()).returncode, 0)
        self.assertTrue((out / "history_ops.png").exists())
        self.assertTrue((out / "history.csv").exists())
        p = run_report(out, SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse((out / "history_ops.png").exists())
        self.assertFalse((out / "history.csv").exists())  # its runs are not this report's
        self.assertNotIn("History across runs", (out / "report.html").read_text())

    def test_suites_with_one_slug_get_their_own_plots(self):
        # "a/b" and "a_b" both wrote history_a_b.png, "A" and "a" one file on a case-insensitive
        # file system: each suite's section showed the last one drawn. A 300-character name was
        # a file name too long to write (exit 2).
        suites = ["a/b", "a_b", "A", "a", "s" * 300]
        runs = self.dir / "runs"
        runs.mkdir()
        for i, when in enumerate(("2026-12-01T09:00:00Z", "2026-12-02T09:00:00Z")):
            doc = json.loads(SAMPLE.read_text())
            bench = next(r for r in doc["records"] if r["kind"] == "benchmark")
            doc["run"]["time"] = when
            # Each suite moves by its own factor, so no two plots are alike.
            doc["records"] = [dict(copy.deepcopy(bench), suite=s, case=f"case{k}",
                                   metrics={"engine_median_s": 1e-3 * (1 + i * (k + 1))})
                              for k, s in enumerate(suites)]
            (runs / f"r{i}.json").write_text(json.dumps(doc))
        out = self.dir / "report"
        p = run_report(out, runs)
        self.assertEqual(p.returncode, 0, p.stderr)
        html = (out / "report.html").read_text()
        files = {}
        for s in suites:
            m = re.search(re.escape(f"<h3>History: {s} benchmarks over 2 runs</h3>") +
                          r'\s*<img alt="([^"]+)" src="data:image/png;base64,([^"]+)">', html)
            self.assertIsNotNone(m, s)
            png = out / f"{m.group(1)}.png"
            self.assertTrue(png.is_file(), png)
            self.assertLessEqual(len(png.name), 255)
            self.assertEqual(base64.b64decode(m.group(2)), png.read_bytes(), s)
            files[s] = png.name
        self.assertEqual(len({f.lower() for f in files.values()}), len(suites), files)
        self.assertEqual(files["a_b"], "history_a_b.png")  # a plain name keeps its slug
        self.assertEqual(files["a"], "history_a.png")
        self.assertEqual(len({(out / f).read_bytes() for f in files.values()}), len(suites))
        # Deterministic: a second report writes the same files, and leaves no other history plot.
        (out / "history_stale.png").write_bytes(b"old")
        self.assertEqual(run_report(out, runs).returncode, 0)
        self.assertEqual(sorted(p.name for p in out.glob("history_*.png")), sorted(files.values()))
        with open(out / "history.csv", newline="") as f:
            self.assertEqual(sorted(row[0] for row in list(csv.reader(f))[1:]), sorted(suites))

    def test_empty_folder_is_a_clear_error(self):
        empty = self.dir / "empty"
        empty.mkdir()
        p = run_report(self.dir / "r", empty)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertIn(f"{empty}: is a directory with no *.json result files", p.stderr)

    def test_bad_file_in_folder_is_named(self):
        runs = self.folder_of_runs()
        (runs / "d.json").write_text('{"schema": "trainbench.result/1", "run": {}, "rec')
        p = run_report(self.dir / "r", runs)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("d.json: not JSON", p.stderr)


if __name__ == "__main__":
    unittest.main()
