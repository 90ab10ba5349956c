"""reports_smoke: runs `python -m trainbench_reports` on sample.json (and on edge cases) and checks
the files it writes. Run from this folder with PYTHONPATH=<repo>/reports:
    python -m unittest -v test_report"""
import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
os.environ.setdefault("MPLBACKEND", "Agg")
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

    def test_bad_peak_is_a_usage_error(self):
        from trainbench_reports.cli import main
        for value in ("0", "-1", "nan", "inf", "x"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as ex:
                main(["--out", str(self.dir / "r"), "--peak-gflops", value, str(SAMPLE)])
            self.assertEqual(ex.exception.code, 2, value)
            self.assertIn("--peak-gflops: must be a positive number", err.getvalue())

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



def run_in_process(out, *inputs):
    """main() as `python -m trainbench_reports` runs it, without a process per case: an exception
    escaping it is what would have been a traceback."""
    from trainbench_reports.cli import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--out", str(out), *map(str, inputs)])
    return SimpleNamespace(returncode=code, stderr=err.getvalue())


class BadInputs(unittest.TestCase):
    """Every way an input file or --out can be bad ends in one line on stderr naming the file and
    the problem, exit status 2, and no traceback (cli.py's docstring lists the cases). In process;
    test_end_to_end checks the same through `python -m`."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def file(self, name, content: bytes) -> Path:
        f = self.dir / name
        f.write_bytes(content)
        return f

    def assertOneLineError(self, p, *needles):
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("trainbench_reports: error: "), p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])

    def input_error(self, path, *needles):
        out = self.dir / "r"
        p = run_in_process(out, path)
        self.assertOneLineError(p, str(path), *needles)
        self.assertFalse((out / "report.html").exists())  # nothing half-made

    def test_not_utf8(self):
        good = SAMPLE.read_bytes()
        at = good.index(b"matmul")
        self.input_error(self.file("latin1.json", good[:at] + b"\xe9" + good[at:]),
                         "not UTF-8", f"offset {at}")
        self.input_error(self.file("utf16.json", SAMPLE.read_text().encode("utf-16")), "not UTF-8")

    def test_not_json(self):
        self.input_error(self.file("junk.json", b"{not json"), "not JSON", "line 1 column 2")
        self.input_error(self.file("trailing.json", SAMPLE.read_bytes() + b"]"), "not JSON")
        self.input_error(self.file("nan.json", b'{"schema": NaN}'), "not JSON", "NaN")
        self.input_error(self.file("bigint.json", b"[" + b"9" * 5000 + b"]"), "not JSON")

    def test_empty_and_blank(self):
        self.input_error(self.file("empty.json", b""), "empty file")
        self.input_error(self.file("blank.json", b" \n\t\n"), "empty file")

    def test_nested_too_deeply(self):
        self.input_error(self.file("deep.json", b"[" * 200000 + b"]" * 200000), "nested too deeply")
        doc = json.loads(SAMPLE.read_text())
        doc["run"]["extra"] = json.loads("[" * 900 + "]" * 900)
        p = run_in_process(self.dir / "r", self.file("deep_run.json", json.dumps(doc).encode()))
        if p.returncode != 0:  # either reported, or nested deep enough to be refused cleanly
            self.assertOneLineError(p, "deep_run.json")

    def test_wrong_top_level(self):
        self.input_error(self.file("array.json", b"[1, 2]"), "top level is an array")
        self.input_error(self.file("number.json", b"42"), "top level is a number")
        self.input_error(self.file("null.json", b"null"), "top level is null")

    def test_other_schema_version(self):
        doc = json.loads(SAMPLE.read_text())
        doc["schema"] = "trainbench.result/2"
        self.input_error(self.file("v2.json", json.dumps(doc).encode()), "trainbench.result/2",
                         "trainbench.result/1")

    def test_missing_fields(self):
        doc = json.loads(SAMPLE.read_text())
        del doc["records"][0]["status"]
        del doc["run"]["time"]
        self.input_error(self.file("missing.json", json.dumps(doc).encode()),
                         "not a valid trainbench result", "'status' is a required property",
                         "'time' is a required property")
        self.input_error(self.file("bare.json", b"{}"), "'records' is a required property")

    def test_huge_field_is_clipped(self):
        doc = json.loads(SAMPLE.read_text())
        doc["records"][0]["status"] = "x" * 100000
        f = self.file("huge.json", json.dumps(doc).encode())
        p = run_in_process(self.dir / "r", f)
        self.assertOneLineError(p, "records/0/status")
        self.assertLess(len(p.stderr), 1000)

    def test_directory_missing_and_unreadable(self):
        self.input_error(self.dir, "is a directory")
        self.input_error(self.dir / "nope.json", "no such file")
        f = self.file("secret.json", SAMPLE.read_bytes())
        f.chmod(0)
        if os.access(f, os.R_OK):
            self.skipTest("running as root: a file without read permission is still readable")
        self.input_error(f, "cannot read", "ermission denied")

    def test_end_to_end(self):
        bad = self.file("latin1.json", b'{"schema": "caf\xe9"}')
        p = run_report(self.dir / "r", bad)
        self.assertOneLineError(p, str(bad), "not UTF-8")
        out = self.file("out", b"keep me")
        p = run_report(out, SAMPLE)
        self.assertOneLineError(p, "--out", str(out), "not a folder")

    def test_out_is_an_existing_file(self):
        out = self.file("out", b"keep me")
        p = run_in_process(out, SAMPLE)
        self.assertOneLineError(p, "--out", str(out), "not a folder")
        self.assertEqual(out.read_bytes(), b"keep me")
        p = run_in_process(out / "sub", SAMPLE)
        self.assertOneLineError(p, "--out", "cannot create the folder")

    def test_out_not_writable(self):
        out = self.dir / "ro"
        out.mkdir()
        out.chmod(0o555)
        if os.access(out, os.W_OK):
            self.skipTest("running as root: a read-only folder is still writable")
        p = run_in_process(out, SAMPLE)
        self.assertOneLineError(p, "--out", str(out), "not writable")

    def test_report_file_that_is_a_directory(self):
        out = self.dir / "r"
        (out / "summary.md").mkdir(parents=True)
        p = run_in_process(out, SAMPLE)
        self.assertOneLineError(p, "summary.md", "is a directory")


class MutatedInputs(unittest.TestCase):
    """The loader on seeded random mutations of sample.json (bytes flipped, inserted, deleted,
    spans duplicated or cut): each either loads or raises LoadError, never anything else (which
    would reach the user as a traceback). TRAINBENCH_FUZZ_ITERS sets the count (default 1500)."""

    def test_loader_never_raises_anything_but_load_error(self):
        import random
        from trainbench_reports.load import LoadError, load_results
        seed = int(os.environ.get("TRAINBENCH_SEED", "1234"))
        iters = int(os.environ.get("TRAINBENCH_FUZZ_ITERS", "1500"))
        rng = random.Random(seed)
        good = SAMPLE.read_bytes()
        tokens = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"\xff", b"\xc3", b"NaN",
                  b"-", b"1e999", b"null", b"true", b"9" * 400, b"[" * 3000]
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "m.json"
            for i in range(iters):
                data = bytearray(good)
                for _ in range(rng.randint(1, 4)):
                    at = rng.randrange(len(data) + 1)
                    op = rng.randrange(5)
                    if op == 0 and data:
                        data[min(at, len(data) - 1)] = rng.randrange(256)
                    elif op == 1:
                        data[at:at] = rng.choice(tokens)
                    elif op == 2:
                        del data[at:at + rng.randint(1, 64)]
                    elif op == 3:
                        end = min(len(data), at + rng.randint(1, 200))
                        data[at:at] = data[at:end]
                    else:
                        data = data[:at]
                f.write_bytes(bytes(data))
                try:
                    load_results([f])
                except LoadError as e:
                    self.assertNotIn("\n", str(e), f"seed {seed} iteration {i}")
                except Exception as e:  # noqa: BLE001 - the point of the test
                    self.fail(f"seed {seed} iteration {i}: {type(e).__name__}: {e}")


class OddButValidValues(unittest.TestCase):
    """A result the schema accepts is reported, whatever its numbers: zero, negative, tiny, huge,
    and the strings the harness writes for non-finite values. A crash here is the report's bug."""

    def test_every_metric_and_series_value(self):
        from test_dist_report import comm_records, ddp_records
        base = json.loads(SAMPLE.read_text())
        base["records"] += comm_records(worlds=(2,), sizes=(8, 1024)) + ddp_records()
        odd = [0, -1, 1e-320, 1e308, -1e308, 10 ** 400, "nan", "inf", "-inf", "label", ""]
        # Mixed (each metric a different odd value, twice with a shift), then all one value for
        # the extremes where every speedup or throughput is unusable at once.
        docs = []
        for shift in (0, 5):
            doc = json.loads(json.dumps(base))
            for i, rec in enumerate(doc["records"]):
                rec["metrics"] = {k: odd[(i + j + shift) % len(odd)]
                                  for j, k in enumerate(rec["metrics"])}
                rec["series"] = {"engine_loss": odd, "reference_loss": odd[::-1]}
            docs.append((f"mixed+{shift}", doc))
        for value in (0, 1e299):  # every speedup unusable; every figure as large as allowed
            doc = json.loads(json.dumps(base))
            for rec in doc["records"]:
                rec["metrics"] = {k: value for k in rec["metrics"]}
            docs.append((repr(value), doc))
        for value, doc in docs:
            with tempfile.TemporaryDirectory() as tmp:
                f = Path(tmp) / "odd.json"
                f.write_text(json.dumps(doc))
                p = run_in_process(Path(tmp) / "r", f)
                self.assertEqual(p.returncode, 0, f"{value!r}: {p.stderr}")
                self.assertTrue((Path(tmp) / "r" / "report.html").is_file(), value)


class OutputFiles(unittest.TestCase):
    """The report's files follow the harness's rules (Note [Output files]): regular files are
    replaced atomically, symlinks written through, devices and FIFOs written in place."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_symlinked_report_writes_through(self):
        out = self.dir / "r"
        out.mkdir()
        target = self.dir / "elsewhere.html"
        target.write_text("old")
        target.chmod(0o640)
        (out / "report.html").symlink_to(target)
        p = run_report(out, SAMPLE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue((out / "report.html").is_symlink())
        self.assertIn("trainbench report", target.read_text())
        self.assertEqual(target.stat().st_mode & 0o777, 0o640)
        self.assertEqual(sorted(x.name for x in self.dir.iterdir()), ["elsewhere.html", "r"])

    def test_devices_and_fifos_in_place(self):
        from trainbench_reports.output import OutputError, write_output
        write_output("/dev/null", b"x" * 100)
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
        fifo = self.dir / "fifo"
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
        reader.start()
        write_output(fifo, b"through the fifo")
        reader.join(30)
        self.assertEqual(got, [b"through the fifo"])
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        with self.assertRaisesRegex(OutputError, "is a directory"):
            write_output(self.dir, b"x")
        self.assertEqual([x.name for x in self.dir.iterdir()], ["fifo"])  # no temporary left


if __name__ == "__main__":
    unittest.main()
