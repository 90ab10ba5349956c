"""reports_smoke: runs `python -m trainbench_reports` on sample.json (and on edge cases) and checks
the files it writes. Run from this folder with PYTHONPATH=<repo>/reports:
    python -m unittest -v test_report"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "sample.json"
PNGS = ("speedup.png", "throughput_gflops.png", "throughput_gbps.png", "correctness.png")


def run_report(out, *inputs, extra=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    return subprocess.run(
        [sys.executable, "-m", "trainbench_reports", "--out", str(out), *extra, *map(str, inputs)],
        env=env, capture_output=True, text=True, timeout=240)


class ReportSmoke(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_sample_report(self):
        out = self.dir / "report"
        p = run_report(out, SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("report.html", p.stdout)
        html = (out / "report.html").read_text()
        for png in PNGS:
            self.assertTrue((out / png).is_file(), png)
            self.assertGreater((out / png).stat().st_size, 1000, png)
        self.assertTrue((out / "summary.md").is_file())
        records = json.loads(SAMPLE.read_text())["records"]
        for rec in records:
            self.assertIn(rec["case"], html, rec["case"])
        # Self-contained: plots inline, nothing fetched from elsewhere.
        self.assertEqual(html.count("data:image/png;base64,"), len(PNGS))
        self.assertNotIn('src="http', html)
        md = (out / "summary.md").read_text()
        self.assertIn("matmul/float32/1024", md)
        self.assertIn("softmax/float32/last_dim", md)  # a failure is listed

    def test_curves(self):
        data = json.loads(SAMPLE.read_text())
        rec = dict(data["records"][0])
        rec.update({"suite": "training", "case": "fashion_mnist/mlp",
                    "series": {"engine_epoch_val_accuracy": [0.8, 0.85, "nan"],
                               "reference_epoch_val_accuracy": [0.79, 0.86, 0.87],
                               "engine_loss": [0.6, 0.4, 0.35]}})
        data["records"].append(rec)
        path = self.dir / "curves.json"
        path.write_text(json.dumps(data))
        out = self.dir / "r"
        p = run_report(out, path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater((out / "curves.png").stat().st_size, 1000)
        self.assertIn("Training curves", (out / "report.html").read_text())
        # Without series there is no curves plot, and a stale one is removed.
        p = run_report(out, SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse((out / "curves.png").exists())

    def test_peak_overrides(self):
        out = self.dir / "r"
        p = run_report(out, SAMPLE, extra=("--peak-gflops", "1234", "--peak-gbps", "77"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("1234 GFLOP/s", (out / "report.html").read_text())

    def test_peak_default_follows_cpu_isa(self):
        doc = json.loads(SAMPLE.read_text())
        for isa, peak in (("avx2", "175 GFLOP/s"), ("avx512", "234 GFLOP/s")):
            doc["run"]["cpu_isa"] = isa
            f = self.dir / f"{isa}.json"
            f.write_text(json.dumps(doc))
            out = self.dir / f"r_{isa}"
            p = run_report(out, f)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(peak, (out / "report.html").read_text())

    def test_two_inputs(self):
        out = self.dir / "r"
        p = run_report(out, SAMPLE, SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("sample#2", (out / "report.html").read_text())

    def test_empty_records(self):
        doc = json.loads(SAMPLE.read_text())
        doc["records"] = []
        f = self.dir / "empty.json"
        f.write_text(json.dumps(doc))
        out = self.dir / "r"
        p = run_report(out, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((out / "report.html").is_file())
        self.assertTrue((out / "summary.md").is_file())
        self.assertFalse((out / "speedup.png").exists())

    def test_correctness_only(self):
        doc = json.loads(SAMPLE.read_text())
        doc["records"] = [r for r in doc["records"] if r["kind"] == "correctness"]
        f = self.dir / "tests.json"
        f.write_text(json.dumps(doc))
        out = self.dir / "r"
        p = run_report(out, f)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((out / "correctness.png").is_file())
        self.assertIn("No passed benchmark records", (out / "report.html").read_text())

    def test_no_inputs(self):
        p = run_report(self.dir / "r")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((self.dir / "r" / "report.html").is_file())

    def test_invalid_input_is_a_clear_error(self):
        doc = json.loads(SAMPLE.read_text())
        doc["records"][0]["status"] = "maybe"
        del doc["run"]["host"]
        f = self.dir / "bad.json"
        f.write_text(json.dumps(doc))
        p = run_report(self.dir / "r", f)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad.json", p.stderr)
        self.assertIn("records/0/status", p.stderr)
        self.assertIn("host", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_not_json_and_missing(self):
        f = self.dir / "junk.json"
        f.write_text("{not json")
        p = run_report(self.dir / "r", f)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not JSON", p.stderr)
        p = run_report(self.dir / "r", self.dir / "missing.json")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no such file", p.stderr)

    def test_validate_script(self):
        ok = subprocess.run([sys.executable, str(HERE / "validate.py"), str(SAMPLE)],
                            capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        doc = json.loads(SAMPLE.read_text())
        doc["records"][0]["metrics"]["bad"] = None
        f = self.dir / "bad.json"
        f.write_text(json.dumps(doc))
        bad = subprocess.run([sys.executable, str(HERE / "validate.py"), str(f)],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("metrics/bad", bad.stderr)


if __name__ == "__main__":
    unittest.main()
