"""reports_profile: `python -m trainbench_reports` on `trainbench profile` results draws the step
breakdown (profile_step.png) and lists it in summary.md with the record's figures; records of
other suites or a failed profile draw none. Run from this folder with PYTHONPATH=<repo>/reports:
    python -m unittest -v test_profile_report"""
import copy
import json
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from test_history import run_report  # noqa: E402
from trainbench_reports import profile_plots  # noqa: E402

SAMPLE = HERE / "sample.json"


def profile_record(case, step, fwd, bwd, opt, data, comm, status="pass"):
    other = step - fwd - bwd - opt - data
    return {"suite": "profile", "case": case, "kind": "benchmark", "status": status, "rank": 0,
            "metrics": {"step_ms": step, "forward_ms": fwd, "backward_ms": bwd, "optimizer_ms": opt,
                        "data_ms": data, "other_ms": other, "communication_ms": comm, "world": 2,
                        "steps": 5, "trace": "profile/trace.json"},
            "tolerances": {}, "duration_s": 1.0, "message": ""}


class ProfileReport(unittest.TestCase):
    def doc(self, records):
        d = copy.deepcopy(json.loads(SAMPLE.read_text()))
        d["records"] = records
        return d

    def test_breakdown_plot_and_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "profile.json"
            inp.write_text(json.dumps(self.doc([profile_record("mlp/w2", 40.0, 10.0, 20.0, 5.0, 1.0, 12.5),
                                                profile_record("gpt/w1", 200.0, 60.0, 110.0, 20.0, 0.5, 0.0)])))
            res = run_report(Path(tmp) / "out", inp)
            self.assertEqual(res.returncode, 0, res.stderr)
            png = Path(tmp) / "out" / "profile_step.png"
            self.assertTrue(png.is_file() and png.stat().st_size > 1000)
            md = (Path(tmp) / "out" / "summary.md").read_text()
            self.assertIn("## Step breakdown (trainbench profile)", md)
            self.assertIn("| mlp w2 | 40.00 | 10.00 | 20.00 | 5.00 | 1.00 | 4.00 | 12.50 |", md)
            self.assertIn("| gpt w1 | 200.00 | 60.00 | 110.00 | 20.00 | 0.50 | 9.50 | 0.00 |", md)
            self.assertIn('alt="profile_step"', (Path(tmp) / "out" / "report.html").read_text())

    def test_no_profile_records_no_plot(self):
        with tempfile.TemporaryDirectory() as tmp:
            inp = Path(tmp) / "r.json"
            failed = profile_record("mlp/w1", 40.0, 10.0, 20.0, 5.0, 1.0, 0.0, status="error")
            inp.write_text(json.dumps(self.doc([failed])))
            res = run_report(Path(tmp) / "out", inp)
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertFalse((Path(tmp) / "out" / "profile_step.png").exists())
            self.assertNotIn("Step breakdown", (Path(tmp) / "out" / "summary.md").read_text())

    def test_points_skip_other_suites_and_bad_metrics(self):
        other = profile_record("mlp/w1", 40.0, 10.0, 20.0, 5.0, 1.0, 0.0)
        other["suite"] = "training"
        bad = profile_record("mlp/w4", 40.0, 10.0, 20.0, 5.0, 1.0, 0.0)
        bad["metrics"]["step_ms"] = "nan"
        good = profile_record("gpt/w2", 30.0, 10.0, 10.0, 5.0, 1.0, 3.0)
        pts = profile_plots.profile_points([(None, other), (None, bad), ("run b", good)])
        self.assertEqual([p[0] for p in pts], ["gpt w2 [run b]"])
        self.assertAlmostEqual(pts[0][1]["other_ms"], 4.0)


if __name__ == "__main__":
    unittest.main()
