"""Hostile inputs to `trainbench project` (projection.py) and the report, each built in a temporary
folder: the contract is one clear line and exit status 2 for bad input (or the unusable record
left out, as one with a figure outside its range is), never a traceback, a hang, unbounded memory
or a silently absurd figure. One test class per finding of an adversarial pass:
  WorldZero          a case of world 0 (or hosts 2x0 / 0x2) divided by zero
  NotRegularFiles    a FIFO hung the loader, /dev/zero ran it out of memory, any size was read
  EqualBuckets       parameters 1e14 made 15 million DDP buckets per prediction (a hang)
  HugeIntegers       10^400 cores, local ranks or bytes in a hosts key overflowed or broke the fit
  CommandLine        --per-rank-batch 1e308 / 0, --compute-speedup 1e-308, --json '' passed
  ZeroBytes          comm records of 0 bytes fitted 10^21 GB/s with a numpy warning
  ManyModels         a subplot per DDP model: minutes for hundreds of models
  HistoryTimes       5e-324 s and 1e300 s series made "infx" and "4.94e-315 ns"
  HistoryScale       a history PNG per suite (2000 suites: 6 minutes), an ax.plot per case, a run
                     1.1 inch wide, every case in the HTML (20,000 cases: a 2.7 MB history section)
  OutputAndBom       --json checked after the projection printed; a UTF-8 BOM refused
  LoneSurrogates     a suite named "\\ud800" made the report's plots raise a traceback
  AllWaitWorldOne    a world-1 step of 0 ms compute (all comm_wait) predicted 0 s, then divided by it
Run from this folder with PYTHONPATH=<repo>/reports: python -m unittest -v test_hostile_inputs"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import random
import re
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import warnings
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("MPLBACKEND", "Agg")

from test_projection import (TRUE, comm_records, ddp_records, fsdp_records, hosts_comm_records,  # noqa: E402
                             record, run_header)
from trainbench_reports import cli, dist_plots, history, plots  # noqa: E402
from trainbench_reports import projection as pj  # noqa: E402
from trainbench_reports.load import LoadError, Result, load_results  # noqa: E402

NINES = "9" * 400
MAX_INPUT_BYTES = 64 << 20  # load.MAX_INPUT_BYTES, as `trainbench compare` reads


class Scratch(unittest.TestCase):
    """A temporary folder removed however the test ends, and the two commands run in process."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def write(self, name, recs, run=None, raw: bytes | None = None) -> Path:
        p = self.dir / name
        if raw is not None:
            p.write_bytes(raw)
        else:
            p.write_text(json.dumps({"schema": "trainbench.result/1", "run": run or run_header(), "records": recs}))
        return p

    def project(self, *argv):
        """(exit status, stdout, stderr) of `trainbench project` (projection.main) in process."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = pj.main([str(a) for a in argv])
            except SystemExit as e:  # argparse's own usage errors
                code = e.code
        return code, out.getvalue(), err.getvalue()

    def report(self, *inputs):
        """(exit status, stderr) of the report (cli.main) in process into <tmp>/report."""
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = cli.main(["--quiet", "--out", str(self.dir / "report"), "--", *map(str, inputs)])
        return code, err.getvalue()

    def assertOneLine(self, code, err, *needles):
        self.assertEqual(code, 2, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for n in needles:
            self.assertIn(n, err)


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    env["MPLBACKEND"] = "Agg"
    return env


class WorldZero(Scratch):
    def test_world_zero_records_are_left_out(self):
        comm = self.write("comm.json", comm_records(TRUE))
        ddp = ddp_records()
        w0 = json.loads(json.dumps(ddp[1]))
        w0["case"] = "ddp/mlp/w0/engine"
        fsdp = fsdp_records()
        f0 = json.loads(json.dumps(fsdp[1]))
        f0["case"] = "fsdp/mlp/full_shard/w0/engine"
        ddp_file, fsdp_file = self.write("ddp.json", ddp + [w0]), self.write("fsdp.json", fsdp + [f0])
        worlds = sorted(p.world for p in pj.step_points(load_results([comm, ddp_file, fsdp_file])))
        self.assertEqual(worlds, [1, 1, 2, 2, 4, 4])
        for f in (ddp_file, fsdp_file):
            code, out, err = self.project("--results", comm, "--results", f, "--ranks", "8")
            self.assertEqual(code, 0, err)
            self.assertNotIn("w0", out)
        code, err = self.report(ddp_file)  # ddp_scaling divided by the world of its first point
        self.assertEqual(code, 0, err)
        self.assertTrue((self.dir / "report" / "ddp_scaling.png").is_file())

    def test_hosts_cases_of_no_host_or_no_rank_are_left_out(self):
        ddp = ddp_records(worlds=(1, 2))
        m = ddp[1]["metrics"]
        recs = hosts_comm_records(TRUE) + [ddp[0]]
        for shape in ("2x1", "2x0", "0x2"):
            recs.append(record("hosts", f"ddp/10g-50us/{shape}",
                               {"mlp_step_ms": m["step_ms"], "mlp_samples_per_s": m["samples_per_s"]}))
        recs.append(record("hosts", "comm/10g-50us/inter/0x0", {"all_reduce_1024B_engine_time_us": 5.0}))
        f = self.write("hosts.json", recs)
        res = load_results([f])
        self.assertEqual([(p.world, p.hosts) for p in pj.step_points(res) if p.ranks_per_machine], [(2, 2)])
        self.assertNotIn(0, {w for per_op in pj.comm_samples(res).values() for s in per_op.values() for _, w, _ in s})
        code, _, err = self.project("--results", f, "--ranks", "8", "--link", "10g-50us")
        self.assertEqual(code, 0, err)
        code, err = self.report(f)
        self.assertEqual(code, 0, err)


class NotRegularFiles(Scratch):
    def test_a_fifo_is_refused_not_waited_on(self):
        fifo = self.dir / "fifo.json"
        os.mkfifo(fifo)
        # A child under a timeout: the old loader waited for a writer for ever.
        for argv in (["-m", "trainbench_reports.projection", "--results", str(fifo)],
                     ["-m", "trainbench_reports", "--out", str(self.dir / "r"), str(fifo)]):
            p = subprocess.run([sys.executable, *argv], env=child_env(), capture_output=True, text=True, timeout=120)
            self.assertOneLine(p.returncode, p.stderr, str(fifo), "is a FIFO, not a result file")

    def test_a_device_is_refused_before_reading(self):
        # /dev/zero never ends: the old loader read it until memory ran out (a MemoryError under a
        # limit of address space). The child stays under 2 GiB whatever it does.
        script = ("import sys; from trainbench_reports.load import LoadError, load_results\n"
                  "try:\n    load_results(['/dev/zero'])\nexcept LoadError as e:\n"
                  "    print(e, file=sys.stderr); sys.exit(2)\n")

        def limit():
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

        p = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True, text=True,
                           timeout=120, preexec_fn=limit)
        self.assertOneLine(p.returncode, p.stderr, "/dev/zero: is a character device, not a result file")

    def test_a_file_past_the_limit_is_refused_unread(self):
        big = self.dir / "big.json"
        with open(big, "wb") as f:  # sparse: no disk and no time
            f.truncate(MAX_INPUT_BYTES + 1)
        with self.assertRaisesRegex(LoadError, "is larger than 64 MiB"):
            load_results([big])
        code, _, err = self.project("--results", big)
        self.assertOneLine(code, err, "is larger than 64 MiB")
        code, err = self.report(big)
        self.assertOneLine(code, err, "is larger than 64 MiB")


class EqualBuckets(unittest.TestCase):
    def test_bucket_runs_are_ddp_buckets(self):
        mib = 1 << 20
        for total in (0, 1, mib - 1, mib, mib + 1, 26 * mib, 26 * mib + 1, 51 * mib, 60 * mib, 1863690 * 4,
                      4e9 + 0.5, 7454760.25):
            runs = pj.ddp_bucket_runs(total)
            self.assertEqual([b for b, n in runs for _ in range(n)], pj.ddp_buckets(total), total)

    def test_overlap_over_runs_is_the_loop(self):
        # Exact where every sum is an integer (small buckets, backward = the bytes, whole times) ...
        for total in range(0, 60):
            for c0, c in ((0, 0), (1, 1), (3, 1), (1, 5), (7, 2), (2, 9)):
                def comm(b):
                    return float(c0 + c * b)
                loop = pj.overlap_ddp(float(total), pj.ddp_buckets(total, 1, 4), comm)
                runs = pj.overlap_ddp_runs(float(total), pj.ddp_bucket_runs(total, 1, 4), comm)
                self.assertEqual(runs, loop, (total, c0, c))
        # ... and to rounding on real sizes, with communication faster and slower than backward.
        rng = random.Random(19)
        for _ in range(300):
            total = rng.choice([rng.uniform(1, 3e9), float(rng.randrange(1, 1 << 31)) * 4])
            bwd = 10 ** rng.uniform(-4, 1)
            alpha, gbps = 10 ** rng.uniform(-7, -3), 10 ** rng.uniform(-1, 3)

            def comm(b):
                return alpha + b / (gbps * 1e9)
            loop = pj.overlap_ddp(bwd, pj.ddp_buckets(total), comm)
            runs = pj.overlap_ddp_runs(bwd, pj.ddp_bucket_runs(total), comm)
            self.assertLessEqual(abs(runs - loop), 1e-12 * max(1.0, loop + bwd), (total, bwd, alpha, gbps))

    def test_a_prediction_takes_a_few_collectives_whatever_the_model(self):
        recs = ddp_records()
        recs[0]["metrics"]["parameters"] = 1e12  # 4 TB of gradients: 152,000 buckets of 25 MiB
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "ddp.json"
            f.write_text(json.dumps({"schema": "trainbench.result/1", "run": run_header(), "records": recs}))
            sm, _ = pj.step_models(load_results([f]))[("ddp", "mlp")]
        calls = []

        class Counting(pj.LinkModel):
            def time(self, op, n, p):
                calls.append(n)
                return super().time(op, n, p)

        pred = sm.predict(1024, sm.batch1, Counting("ib", {}, pj.LINK_PROFILES["ib"]))
        self.assertLess(len(calls), 20)
        self.assertTrue(math.isfinite(pred.step_s) and pred.exposed_s > 0)

    def test_more_parameters_than_a_replica_holds_are_left_out(self):
        recs = ddp_records()
        recs[0]["metrics"]["parameters"] = 1e14
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "ddp.json"
            f.write_text(json.dumps({"schema": "trainbench.result/1", "run": run_header(), "records": recs}))
            self.assertEqual([p.world for p in pj.step_points(load_results([f]))], [2, 4])

    def test_fsdp_units_beyond_ten_thousand_are_left_out(self):
        # overlap_fsdp steps through every unit: 10^6 took a second a prediction, minutes a report.
        recs = fsdp_records()
        recs[0]["metrics"].update(units=1e5, reduce_scatters=1e5, all_gathers=2e5)
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "fsdp.json"
            f.write_text(json.dumps({"schema": "trainbench.result/1", "run": run_header(), "records": recs}))
            self.assertEqual([p.world for p in pj.step_points(load_results([f]))], [2, 4])


class HugeIntegers(Scratch):
    """Numbers the schema accepts (JSON integers of any length) read before a range check: an
    OverflowError, or numpy's SVD failing on infinite bytes."""

    def test_logical_cores_no_machine_has(self):
        comm = self.write("comm.json", comm_records(TRUE), run=dict(run_header(), logical_cores=10 ** 400))
        ddp = self.write("ddp.json", ddp_records(), run=dict(run_header(), logical_cores=10 ** 400))
        res = load_results([comm, ddp])
        self.assertEqual(pj.step_points(res), [])
        self.assertEqual(pj.comm_samples(res), {})
        code, out, err = self.project("--results", comm, "--results", ddp, "--ranks", "8")
        self.assertOneLine(code, err, "3 such record(s) left out")
        self.assertEqual(out, "")

    def test_hosts_cases_of_hundreds_of_digits(self):
        ddp = ddp_records(worlds=(1, 2))
        m = ddp[1]["metrics"]
        good = hosts_comm_records(TRUE)
        recs = good + [ddp[0]]
        for shape in ("2x1", f"2x{NINES}", f"{NINES}x2"):
            recs.append(record("hosts", f"ddp/10g-50us/{shape}",
                               {"mlp_step_ms": m["step_ms"], "mlp_samples_per_s": m["samples_per_s"]}))
        huge = json.loads(json.dumps(good[0]))
        huge["case"] = f"comm/10g-50us/inter/2x{NINES}"
        recs.append(huge)
        # A metric key naming 400 digits of bytes, in a record that is otherwise fine.
        recs[0]["metrics"][f"all_reduce_{NINES}B_engine_time_us"] = 5.0
        f = self.write("hosts.json", recs)
        res = load_results([f])
        self.assertEqual([(p.world, p.hosts) for p in pj.step_points(res) if p.ranks_per_machine], [(2, 2)])
        expected = pj.comm_samples(load_results([self.write("good.json", good)]))
        self.assertEqual(pj.comm_samples(res), expected)
        code, _, err = self.project("--results", f, "--ranks", "8", "--link", "10g-50us")
        self.assertEqual(code, 0, err)
        code, err = self.report(f)
        self.assertEqual(code, 0, err)

    def test_comm_case_names_of_hundreds_of_digits(self):
        recs = comm_records(TRUE, worlds=(2,))
        recs[0]["case"] = recs[0]["case"].replace("/8/", f"/{NINES}/")
        recs[1]["case"] = recs[1]["case"].replace("/w2/", f"/w{NINES}/")
        f = self.write("comm.json", recs + ddp_records())
        code, err = self.report(f)  # fmt_bytes divided 10^400 by 1 GiB
        self.assertEqual(code, 0, err)
        code, _, err = self.project("--results", f, "--ranks", "8", "--link", "ib")
        self.assertEqual(code, 0, err)
        code, _, err = self.project("--results", f, "--ranks", "9" * 5000)
        self.assertOneLine(code, err, "is not a rank count")


class CommandLine(Scratch):
    def setUp(self):
        super().setUp()
        self.inputs = ["--results", self.write("comm.json", comm_records(TRUE)),
                       "--results", self.write("ddp.json", ddp_records()), "--ranks", "8"]

    def test_figures_out_of_range_are_usage_errors(self):
        for option, value in (("--per-rank-batch", "0"), ("--per-rank-batch", "1e308"),
                              ("--per-rank-batch", "1e300"), ("--per-rank-batch", "nan"),
                              ("--per-rank-batch", "-5"), ("--compute-speedup", "1e-308"),
                              ("--compute-speedup", "0"), ("--compute-speedup", "1e7"),
                              ("--compute-speedup", "inf")):
            code, out, err = self.project(*self.inputs, option, value)
            self.assertOneLine(code, err, option, "must be between")
            self.assertEqual(out, "", (option, value))
        for option, value in (("--per-rank-batch", "1e-6"), ("--per-rank-batch", "1e9"),
                              ("--compute-speedup", "1e-6"), ("--compute-speedup", "1e6")):
            code, out, err = self.project(*self.inputs, option, value)
            self.assertEqual(code, 0, (option, value, err))
            self.assertIsNone(re.search(r"\b(inf|nan)\b", out), (option, value))

    def test_an_empty_json_path_is_a_usage_error(self):
        code, out, err = self.project(*self.inputs, "--json", "")
        self.assertOneLine(code, err, "--json ''", "an empty path")
        self.assertEqual(out, "")

    def test_the_harness_checks_the_same_ranges(self):
        binary = HERE.parents[1] / "build" / "release" / "harness" / "trainbench"
        if not os.access(binary, os.X_OK):
            self.skipTest(f"no {binary} (build the trainbench target)")
        for argv, words in ((["--per-rank-batch", "0"], "must be between"),
                            (["--compute-speedup", "1e-308"], "must be between"),
                            (["--json", ""], "an empty path")):
            p = subprocess.run([str(binary), "project", *map(str, self.inputs), *argv], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(words, p.stderr)
            self.assertEqual(p.stdout, "")


class ZeroBytes(Scratch):
    def test_messages_of_no_bytes_are_left_out_without_a_warning(self):
        recs = comm_records(TRUE)
        for r in recs:
            if r["case"].startswith("all_reduce/"):
                r["metrics"]["bytes"] = 0
        comm = self.write("comm.json", recs)
        res = load_results([comm])
        self.assertFalse("all_reduce" in pj.comm_samples(res)["shm"], "0-byte all_reduce samples")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's divide-by-zero RuntimeWarning fails the test
            fits = pj.fit_links(res)
        self.assertNotIn("all_reduce", fits["shm"])
        code, out, err = self.project("--results", comm, "--results", self.write("ddp.json", ddp_records()),
                                      "--ranks", "8", "--link", "shm")
        self.assertOneLine(code, err, "no all_reduce records")


class ManyModels(Scratch):
    def test_plots_draw_a_bounded_number_of_panels(self):
        recs = []
        for i in range(40):
            for w in (1, 2):
                recs.append(record("ddp", f"ddp/m{i:02d}/w{w}/engine", {
                    "samples_per_s": 100.0 * w, "step_ms": 10.0, "forward_ms": 3.0, "backward_ms": 4.0,
                    "comm_wait_ms": 1.0, "optimizer_ms": 1.0}))
        items = [(None, r) for r in recs]
        figs = []
        with mock.patch.object(dist_plots, "_save", side_effect=lambda fig, path: figs.append(fig) or path):
            dist_plots.ddp_scaling(items, self.dir / "a.png")
            dist_plots.ddp_step_split(items, self.dir / "b.png")
        for fig in figs:
            drawn = [ax.get_title() for ax in fig.axes]
            self.assertEqual(len(drawn), dist_plots.MAX_PANELS)
            self.assertIn("m00", drawn[0])
            self.assertIn("m11", drawn[-1])
            self.assertIn(f"the first {dist_plots.MAX_PANELS} of 40 models by name; 28 left out",
                          fig._suptitle.get_text() if fig._suptitle else "")
        dist_plots.plt.close("all")


class HistoryTimes(Scratch):
    def test_times_no_clock_measures_are_left_out_and_counted(self):
        def run(name, when, values):
            rec = record("ops", "add/f32/1", {"engine_median_s": "nan"})
            rec["series"] = {"engine_time_s": values}
            other = record("ops", "mul/f32/1", {"engine_median_s": 0.002 if name == "a" else 0.004})
            return self.write(f"{name}.json", [rec, other], run=dict(run_header(), time=when))

        a = run("a", "2026-12-01T00:00:00Z", [5e-324] * 5)
        b = run("b", "2026-12-02T00:00:00Z", [1e300] * 4 + ["nan"])
        res = load_results([a, b])
        self.assertIsNone(history.case_time(res[0].records[0]))
        self.assertIsNone(history.case_time(res[1].records[0]))
        html = history.section_html(res)
        self.assertNotIn("infx", html)
        self.assertNotIn("e-315", html)
        self.assertIn("2.00x", html)  # the usable case still compares
        self.assertIn("1 not a positive number", html)
        self.assertIn("9 outside 1e-12 s to 1e+06 s", html)
        code, err = self.report(self.dir)
        self.assertEqual(code, 0, err)


class HistoryScale(Scratch):
    """A folder of runs with thousands of suites, or a suite of tens of thousands of cases: the
    report draws a bounded number of history plots, each in seconds."""

    def runs(self, cases_of, n_runs=3):
        """n_runs result files, records {suite: [(case, time in run i)]} from cases_of(i)."""
        for i in range(n_runs):
            recs = [record(suite, case, {"engine_median_s": t})
                    for suite, cases in cases_of(i).items() for case, t in cases]
            self.write(f"r{i}.json", recs, run=dict(run_header(), time=f"2026-12-0{i + 1}T00:00:00Z"))
        return self.dir

    def test_thousands_of_suites_draw_the_ones_that_moved(self):
        # 2000 steady suites (a0000...) and three that doubled (zz*), which sort last by name.
        def cases_of(i):
            suites = {f"a{s:04d}": [("add/f32/1", 1e-3)] for s in range(2000)}
            suites.update({f"zz{k}": [("add/f32/1", 1e-3 * (1 + i * (k + 1)))] for k in range(3)})
            return suites
        start = time.perf_counter()
        code, err = self.report(self.runs(cases_of))
        elapsed = time.perf_counter() - start
        self.assertEqual(code, 0, err)
        pngs = sorted(p.name for p in (self.dir / "report").glob("history_*.png"))
        self.assertEqual(len(pngs), history.MAX_SUITE_PLOTS)
        # The movers first, then the steady ones by name.
        self.assertEqual(pngs[:history.MAX_SUITE_PLOTS - 3], [f"history_a{s:04d}.png" for s in range(9)])
        self.assertEqual(pngs[-3:], ["history_zz0.png", "history_zz1.png", "history_zz2.png"])
        html = (self.dir / "report" / "report.html").read_text()
        self.assertIn(f"Trend plots for {history.MAX_SUITE_PLOTS} of the 2003 suites", html)
        self.assertIn(f"not drawn ({2003 - history.MAX_SUITE_PLOTS}): a0009, a0010,", html)
        self.assertIn("a1999.</p>", html)
        self.assertIn(f"History: {2003 - history.MAX_SUITE_PLOTS} more suites not drawn", html)
        self.assertIn("<h3>a1999: time per call</h3>", html)  # every suite's table stays
        self.assertLess(elapsed, 60)  # 6 minutes when every suite was drawn, ~4 s now

    def test_twenty_thousand_cases_draw_in_seconds(self):
        def cases_of(i):
            return {"ops": [(f"c{c:05d}", 1e-3 * (1 + 0.01 * ((c * 13 + i * 5) % 17))) for c in range(20000)]}
        runs = load_results(sorted(self.runs(cases_of).glob("r*.json")))
        _, times, _ = history.collect(runs)
        figs = []
        save = plots._save  # the real one, timed, after keeping the figure
        with mock.patch.object(plots, "_save", side_effect=lambda fig, p: figs.append(fig) or save(fig, p)):
            start = time.perf_counter()
            png = history.trend_plot("ops", times["ops"], history.ordered_runs(runs), self.dir / "h.png")
            elapsed = time.perf_counter() - start
        self.assertTrue(png.is_file())
        ax = figs[0].axes[0]
        # MAX_HIGHLIGHTED lines in colour and the line at 1; the other cases in one collection.
        self.assertEqual(len(ax.lines), history.MAX_HIGHLIGHTED + 1)
        grey = [c for c in ax.collections if c.get_segments()]
        self.assertEqual([len(c.get_segments()) for c in grey], [20000 - history.MAX_HIGHLIGHTED])
        self.assertIn(f"{20000 - history.MAX_HIGHLIGHTED} more in grey", ax.get_title())
        self.assertLess(elapsed, 10)  # 11 s with an ax.plot per case, 1.3 s now

    def test_twenty_thousand_cases_table_the_movers_and_csv_every_case(self):
        # 20,000 steady cases and 61 movers m00..m60 whose spread grows with k // 2: the 50 that
        # moved most are m60 and the pairs down to m12/m13, and of the tied m10/m11 the first by name.
        def time_of(case, i):
            k = int(case[1:])
            return 1e-3 * (1 + i * (1 + k // 2) / 10) if case[0] == "m" else 1e-3
        names = [f"c{c:05d}" for c in range(20000)] + [f"m{k:02d}" for k in range(61)]
        # Results made in memory: validating 60,000 records against the schema took 9 s of 10.
        runs = [Result(Path(f"r{i}.json"), f"r{i}", dict(run_header(), time=f"2026-12-0{i + 1}T00:00:00Z"),
                       [record("ops", n, {"engine_median_s": time_of(n, i)}) for n in names])
                for i in range(3)]
        html = history.section_html(runs)
        self.assertLess(len(html.encode()), 32 << 10)  # 2.7 MB when every case was listed
        shown = re.findall(r"<tr><td>([^<]+)</td><td class=\"num\">", html)
        want = ["m60"] + [f"m{k:02d}" for pair in range(29, 5, -1) for k in (2 * pair, 2 * pair + 1)] + ["m10"]
        self.assertEqual(shown, want)
        self.assertEqual(len(shown), history.MAX_TABLE_ROWS)
        self.assertIn(f"The {history.MAX_TABLE_ROWS} of 20061 cases whose time moved most", html)
        self.assertIn(f"{20061 - history.MAX_TABLE_ROWS} more left out here, every case is in history.csv", html)

        path = history.write_csv(runs, self.dir / "history.csv")
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0][:2], ["suite", "case"])
        self.assertEqual(rows[0][-1], "last/first")
        self.assertEqual(len(rows[0]), 2 + 3 + 1)
        self.assertEqual(sorted(r[1] for r in rows[1:]), names)
        row = {r[1]: r for r in rows[1:]}
        self.assertEqual([float(v) for v in row["m60"][2:5]], [time_of("m60", i) for i in range(3)])
        self.assertAlmostEqual(float(row["m60"][5]), time_of("m60", 2) / 1e-3)
        self.assertEqual(row["c00000"][2:], ["0.001", "0.001", "0.001", "1.0"])

    def test_a_missing_run_breaks_a_grey_line(self):
        self.assertEqual(history._segments([0, 1, 2, 3, 4], [1.0, math.nan, 2.0, 3.0, math.nan]),
                         [[(2, 2.0), (3, 3.0)]])
        self.assertEqual(history._segments([0, 1, 2], [1.0, 2.0, 3.0]), [[(0, 1.0), (1, 2.0), (2, 3.0)]])

    def test_hundreds_of_runs_keep_the_plot_width(self):
        res = load_results([
            self.write(f"r{i:03d}.json", [record("ops", "add/f32/1", {"engine_median_s": 1e-3 * (1 + i % 3)})],
                       run=dict(run_header(), time=f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}Z"))
            for i in range(300)])
        _, times, _ = history.collect(res)
        figs = []
        with mock.patch.object(plots, "_save", side_effect=lambda fig, path: figs.append(fig) or path):
            history.trend_plot("ops", times["ops"], history.ordered_runs(res), self.dir / "h.png")
        fig = figs[0]
        self.assertLessEqual(fig.get_size_inches()[0], history.MAX_WIDTH_IN)  # was 334 inches
        self.assertLessEqual(len(fig.axes[0].get_xticks()), history.MAX_RUN_LABELS)
        dist_plots.plt.close("all")


class OutputAndBom(Scratch):
    def setUp(self):
        super().setUp()
        self.inputs = ["--results", self.write("comm.json", comm_records(TRUE)),
                       "--results", self.write("ddp.json", ddp_records()), "--ranks", "8"]

    def test_json_is_checked_before_the_projection_prints(self):
        for path, words in ((self.dir / "none" / "p.json", "cannot create a file in"),
                            (self.dir, "is a directory")):
            code, out, err = self.project(*self.inputs, "--json", path)
            self.assertOneLine(code, err, f"--json {path}", words)
            self.assertEqual(out, "")
        if os.path.isfile("/proc/version") and stat.S_ISREG(os.stat("/proc/version").st_mode):
            code, out, err = self.project(*self.inputs, "--json", "/proc/version")
            self.assertOneLine(code, err, "--json /proc/version", "cannot create a file in /proc")
            self.assertEqual(out, "")
        code, out, err = self.project(*self.inputs, "--json", self.dir / "p.json")
        self.assertEqual(code, 0, err)
        self.assertTrue((self.dir / "p.json").is_file())
        self.assertEqual(sorted(x.name for x in self.dir.iterdir()), ["comm.json", "ddp.json", "p.json"])

    def test_a_utf8_byte_order_mark_is_skipped(self):
        comm = self.dir / "comm.json"
        bom = self.write("bom.json", None, raw=b"\xef\xbb\xbf" + comm.read_bytes())
        self.assertEqual(len(load_results([bom])[0].records), len(comm_records(TRUE)))
        code, _, err = self.project("--results", bom, "--results", self.dir / "ddp.json", "--ranks", "8")
        self.assertEqual(code, 0, err)
        code, err = self.report(bom)
        self.assertEqual(code, 0, err)


class LoneSurrogates(Scratch):
    def test_a_lone_surrogate_is_refused_and_a_pair_is_a_character(self):
        recs = comm_records(TRUE)
        for lone in ("\ud800", "\udfff", "a\udc00b"):
            recs[0]["suite"] = lone
            path = self.write("lone.json", recs)  # json.dumps writes it as an escape
            self.assertIn("\\u", path.read_text())
            code, err = self.report(path)
            self.assertOneLine(code, err, "lone UTF-16 surrogate")
            code, _, err = self.project("--results", path, "--ranks", "8")
            self.assertOneLine(code, err, "lone UTF-16 surrogate")
        recs[0]["suite"] = "\U0001f600"  # a pair of escapes, one character: fine
        path = self.write("pair.json", recs)
        self.assertIn("\\ud83d\\ude00", path.read_text())
        self.assertEqual(load_results([path])[0].records[0]["suite"], "\U0001f600")


class AllWaitWorldOne(Scratch):
    def test_a_world_one_step_without_compute_is_left_out(self):
        comm = self.write("comm.json", comm_records(TRUE))
        ddp = ddp_records()
        m = ddp[0]["metrics"]  # world 1: every figure in range, but no compute at all
        m.update(forward_ms=0, backward_ms=0, optimizer_ms=0, comm_wait_ms=m["step_ms"])
        f = self.write("ddp.json", ddp)
        self.assertNotIn(1, [p.world for p in pj.step_points(load_results([f]))])
        code, out, err = self.project("--results", comm, "--results", f, "--ranks", "8")
        self.assertOneLine(code, err, "no world-1 record", "left out")
        code, err = self.report(comm, f)
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
