"""The scaling projection (trainbench_reports/projection.py): the alpha-beta fit recovers known
parameters from synthetic comm records, the overlap models on hand-computed cases, the
projection's shape, the command's errors, and the validation on a measured sample
(projection_sample_*.json, made as below).

Measured samples (checked in; one build on the shared 2-core CI machine, each file as written by
`trainbench bench` (build/release/harness/trainbench), docs/distributed.md "Scaling projection"):
  projection_sample_comm.json  TRAINBENCH_COMM_SWEEP=quick TRAINBENCH_COMM_MAX_BYTES=64M
                               TRAINBENCH_COMM_TARGET_S=0.1 trainbench bench --suite comm --threads 1
                               --filter '/engine$'
  projection_sample_ddp.json   TRAINBENCH_DDP_BENCH_S=2 trainbench bench --suite ddp --threads 1
                               --filter '/engine$'
  projection_sample_fsdp.json  TRAINBENCH_FSDP_BENCH_S=1 trainbench bench --suite fsdp --threads 1
                               --filter '/(full_shard|shard_grad_op)/w[124]/engine$'
  projection_sample_hosts.json trainbench bench --suite hosts (as root: network-namespace hosts;
                               the whole suite, 16 records, 2026-12-03 15:06 UTC), then at once
  projection_sample_hosts_ddp.json   TRAINBENCH_DDP_BENCH_S=1 trainbench bench --suite ddp --threads 1
                               --filter '^ddp/(mlp|gpt)/w1/engine$'
  projection_sample_hosts_fsdp.json  TRAINBENCH_FSDP_BENCH_S=1 trainbench bench --suite fsdp --threads 1
                               --filter '^fsdp/(mlp|gpt)/full_shard/w[12]/engine$'
  projection_quiet_{comm,ddp,fsdp,hosts}.json  run 14 of docs/distributed.md: its four measuring
                               commands (comm with engine-cold, ddp, fsdp, hosts) one after the other
                               on a quiet machine (nothing else running; 2026-12-07 03:36-03:44 UTC,
                               the 2-core AMD EPYC): the world-1 records with their small_batch_* and
                               one_thread_* figures, the comm and hosts sweeps with engine-cold
                               (Note [Collectives out of cache]), docs/distributed.md "Runs 13 and 14"
"""
from __future__ import annotations

import copy
import io
import json
import math
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainbench_reports import cli, projection as pj, projection_plots  # noqa: E402
from trainbench_reports.load import load_results, load_schema, validate  # noqa: E402

HERE = Path(__file__).resolve().parent
SAMPLE_COMM = HERE / "projection_sample_comm.json"
SAMPLE_DDP = HERE / "projection_sample_ddp.json"
SAMPLE_FSDP = HERE / "projection_sample_fsdp.json"
SAMPLE_HOSTS = HERE / "projection_sample_hosts.json"
# world-1 DDP/FSDP (and FSDP world 2) runs right after the hosts run: the compute model of its points
SAMPLE_HOSTS_DDP = HERE / "projection_sample_hosts_ddp.json"
SAMPLE_HOSTS_FSDP = HERE / "projection_sample_hosts_fsdp.json"
QUIET = [HERE / f"projection_quiet_{name}.json" for name in ("comm", "ddp", "fsdp", "hosts")]
SIZES = [8] + [16 * 4 ** i for i in range(12)]  # the comm sweep's: 8 B, then powers of 4 to 64 MiB


def run_header(cores=64):
    return {"time": "2026-12-03T12:00:00Z", "git_revision": "abc1234", "host": "t", "build_type": "Release",
            "compiler": "GNU 12.2.0", "backends": ["cpu"], "world_size": 1, "command": "synthetic",
            "threads": 1, "logical_cores": cores}


def record(suite, case, metrics):
    return {"suite": suite, "case": case, "kind": "benchmark", "status": "pass", "rank": 0, "metrics": metrics,
            "tolerances": {}, "duration_s": 1.0, "message": ""}


def comm_records(true, worlds=(2, 4, 8), impl="engine", split=None):
    """Comm records timed exactly by `true` = {op: (algorithm, alpha, beta)}; with split = (bytes,
    alpha, beta) the sizes from `bytes` on use the second regime."""
    recs = []
    for op, (alg, alpha, beta) in true.items():
        for p in worlds:
            for n in SIZES:
                a, b = pj.ALGORITHMS[op][alg](n, p)
                al, be = (split[1], split[2]) if split and n >= split[0] else (alpha, beta)
                recs.append(record("comm", f"{op}/float32/{n}/w{p}/{impl}", {"bytes": n, "time_s": a * al + b * be}))
    return recs


def hosts_comm_records(true, profile="10g-50us"):
    """The hosts suite's comm records (2x1 and 2x2 hosts x ranks): one per run, the all_reduce
    times folded in as <op>_<bytes>B_<impl>_time_us; Gloo's twice MPI's."""
    recs = []
    alg, alpha, beta = true["all_reduce"]
    for k in (1, 2):
        metrics = {"nominal_rate_gbit": 10, "link_rtt_us": 100.0}
        for n in SIZES:
            a, b = pj.ALGORITHMS["all_reduce"][alg](n, 2 * k)
            metrics[f"all_reduce_{n}B_engine_time_us"] = (a * alpha + b * beta) * 1e6
            metrics[f"all_reduce_{n}B_engine-gloo_time_us"] = 2 * (a * alpha + b * beta) * 1e6
        recs.append(record("hosts", f"comm/{profile}/inter/2x{k}", metrics))
    return recs


def ring_all_reduce_with(true, n, p):
    alg, alpha, beta = true["all_reduce"]
    a, b = pj.ALGORITHMS["all_reduce"][alg](n, p)
    return a * alpha + b * beta


def ring_all_reduce(n, p):
    return ring_all_reduce_with(TRUE, n, p)


def ddp_records(worlds=(1, 2, 4), params=2_000_000, batch=64, fwd_ms=40.0, bwd_ms=80.0, opt_ms=10.0,
                fixed_ms=(0.0, 0.0), small_batch=False, all_reduce=None):
    """DDP records of a machine that behaves as the model says: compute scaling exactly with the
    per-rank batch (ranks on cores of their own: logical_cores in the run header is large), the
    gradient buckets' all-reduces (TRUE's) overlapping backward. fixed_ms: forward and backward
    time that does not shrink with the batch (fwd_ms and bwd_ms are then the per-sample part at
    the whole batch); small_batch: the world-1 record also times a quarter of the batch, as the
    bench does (Note [Two batches at world 1])."""
    recs = []

    def parts(per):
        return fixed_ms[0] + fwd_ms * per / batch, fixed_ms[1] + bwd_ms * per / batch

    for w in worlds:
        per = batch // w
        f, b = parts(per)
        exposed = 1e3 * pj.overlap_ddp(b / 1e3, pj.ddp_buckets(params * 4), lambda n: (all_reduce or ring_all_reduce)(n, w))
        step = f + b + opt_ms + exposed
        metrics = {"step_ms": step, "forward_ms": f, "backward_ms": b, "optimizer_ms": opt_ms, "comm_wait_ms": exposed,
                   "samples_per_s": batch / (step / 1e3), "per_rank_batch": per, "batch": batch, "threads": 1,
                   "parameters": params, "bytes_per_step": params * 4, "buckets": 2, "world": w,
                   "main_thread_cpu_ms": f + b + opt_ms}
        if small_batch and w == 1:
            sf, sb = parts(batch // 4)
            metrics.update(small_batch=batch // 4, small_batch_forward_ms=sf, small_batch_backward_ms=sb,
                           small_batch_optimizer_ms=opt_ms, small_batch_step_ms=sf + sb + opt_ms,
                           small_batch_main_thread_cpu_ms=sf + sb + opt_ms)
        recs.append(record("ddp", f"ddp/mlp/w{w}/engine", metrics))
    return recs


def fsdp_records(worlds=(1, 2, 4), units=4, params=2_000_000, batch=64, fwd_ms=40.0, bwd_ms=80.0, opt_ms=12.0,
                 serial=False, flag_bytes=0):
    """FULL_SHARD records of a machine that behaves as the model says: each unit gathered twice and
    reduce-scattered once per step (TRUE's ring all-gather and recursive-halving reduce-scatter),
    prefetched behind compute, the optimizer stepping 1/world of the parameters. serial: no core
    to spare for the collectives, which then run after the compute, every one exposed. flag_bytes:
    as the engine, one all-reduce of that many bytes at the end of backward (the used-parameter
    flags), waited on, its bytes counted in bytes_per_step."""
    recs = []
    msg = params * 4 / units
    for w in worlds:
        per = batch // w
        f, b = fwd_ms * per / batch, bwd_ms * per / batch

        def t(op):
            alg, alpha, beta = TRUE[op]
            a, bb = pj.ALGORITHMS[op][alg](msg, w)
            return a * alpha + bb * beta

        _, end = pj.overlap_fsdp(f / 1e3, b / 1e3, units, True, t("all_gather"), t("reduce_scatter"))
        if serial:
            end = (f + b) / 1e3 + units * (2 * t("all_gather") + t("reduce_scatter")) if w > 1 else end
        if flag_bytes and w > 1:
            a, bb = pj.ALGORITHMS["all_reduce"][TRUE["all_reduce"][0]](flag_bytes, w)
            end += a * TRUE["all_reduce"][1] + bb * TRUE["all_reduce"][2]
        exposed = end * 1e3 - f - b
        step = end * 1e3 + opt_ms / w
        recs.append(record("fsdp", f"fsdp/mlp/full_shard/w{w}/engine", {
            "step_ms": step, "forward_ms": f, "backward_ms": b, "optimizer_ms": opt_ms / w, "comm_wait_ms": exposed,
            "samples_per_s": batch / (step / 1e3), "per_rank_batch": per, "batch": batch, "threads": 1,
            "parameters": params, "bytes_per_step": 3 * units * msg + (flag_bytes if w > 1 else 0),
            "all_gathers": 2 * units, "reduce_scatters": units, "all_reduces": 1 if flag_bytes and w > 1 else 0,
            "units": units, "world": w, "strategy": "full_shard"}))
    return recs


class Files:
    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()

    def write(self, name, recs, cores=64):
        p = Path(self.dir.name) / name
        p.write_text(json.dumps({"schema": "trainbench.result/1", "run": run_header(cores), "records": recs}))
        return p


TRUE = {"all_reduce": ("ring", 5e-6, 1 / 10e9), "all_gather": ("ring", 3e-6, 1 / 12e9),
        "reduce_scatter": ("recursive_halving", 4e-6, 1 / 8e9), "broadcast": ("binomial_tree", 2e-6, 1 / 20e9)}


class FitTest(unittest.TestCase):
    def setUp(self):
        self.files = Files()

    def tearDown(self):
        self.files.dir.cleanup()

    def test_fit_recovers_known_alpha_beta_and_algorithm(self):
        path = self.files.write("comm.json", comm_records(TRUE))
        fits = pj.fit_links(load_results([path]))
        self.assertEqual(set(fits), {"shm"})
        for op, (alg, alpha, beta) in TRUE.items():
            best, every = fits["shm"][op]
            self.assertEqual(best.algorithm, alg, op)
            self.assertEqual(len(best.segments), 1, op)
            self.assertAlmostEqual(best.alpha_s / alpha, 1.0, places=6, msg=op)
            self.assertAlmostEqual(best.beta_s_per_byte / beta, 1.0, places=6, msg=op)
            self.assertLess(best.max_rel_err, 1e-6, op)
            self.assertEqual(len(best.points), 3 * len(SIZES))
            # The other algorithms cannot fit these times exactly.
            self.assertTrue(all(f.rms_rel_err > 1e-3 for f in every if f.algorithm != alg), op)

    def test_fit_finds_a_second_regime(self):
        true = {"all_reduce": ("ring", 5e-6, 1 / 10e9)}
        path = self.files.write("comm.json", comm_records(true, split=(1 << 20, 40e-6, 1 / 2e9)))
        best, _ = pj.fit_links(load_results([path]))["shm"]["all_reduce"]
        self.assertEqual(best.algorithm, "ring")
        self.assertEqual(len(best.segments), 2)
        self.assertEqual(best.segments[1][0], 1 << 20)
        self.assertAlmostEqual(best.segments[0][1] / 5e-6, 1.0, places=5)
        self.assertAlmostEqual(best.segments[1][1] / 40e-6, 1.0, places=5)
        self.assertAlmostEqual(best.segments[1][2] * 2e9, 1.0, places=5)

    def test_oversubscribed_runs_are_normalised(self):
        # 4 ranks on 2 cores take turns: their times are twice the link's.
        recs = comm_records(TRUE, worlds=(2,)) + [
            dict(r, metrics=dict(r["metrics"], time_s=2 * r["metrics"]["time_s"]))
            for r in comm_records(TRUE, worlds=(4,))]
        path = self.files.write("comm.json", recs, cores=2)
        best, _ = pj.fit_links(load_results([path]))["shm"]["all_reduce"]
        self.assertAlmostEqual(best.alpha_s / 5e-6, 1.0, places=6)

    def test_each_measured_rank_count_keeps_its_own_fit(self):
        # A link whose 4-rank times are not what the algorithm makes of its 2-rank ones (2 hosts x 2
        # ranks: half the steps on shared memory, the link between): the joint fit misses the 4-rank
        # sweep, the 4-rank fit reproduces it, and rank counts not measured take the joint fit.
        four = {"all_reduce": ("ring", 1e-6, 1 / 40e9)}
        recs = comm_records(TRUE, worlds=(2,)) + comm_records(four, worlds=(4,))
        best, _ = pj.fit_links(load_results([self.files.write("comm.json", recs)]))["shm"]["all_reduce"]
        self.assertEqual(sorted(best.by_world), [2, 4])
        for n in SIZES:
            self.assertAlmostEqual(best.time(n, 4) / ring_all_reduce_with(four, n, 4), 1.0, places=5)
            self.assertAlmostEqual(best.time(n, 2) / ring_all_reduce(n, 2), 1.0, places=5)
        self.assertGreater(best.max_rel_err, 0.5)  # the joint fit, which projects 8 ranks
        joint = pj.Fit(best.op, best.link, best.algorithm, best.segments)
        self.assertEqual(best.time(1 << 20, 8), joint.time(1 << 20, 8))

    def test_gloo_and_hosts_are_their_own_link_classes(self):
        recs = comm_records(TRUE, impl="engine-gloo")
        across = comm_records(TRUE)
        for r in across:
            r["metrics"].update(hosts=2, link_profile="10g50us")
        path = self.files.write("comm.json", recs + across)
        self.assertEqual(set(pj.fit_links(load_results([path]))), {"gloo", "10g50us"})

    def test_too_few_points_is_an_error(self):
        with self.assertRaises(pj.ProjectionError):
            pj.fit_alpha_beta("all_reduce", "ring", [(1024, 2, 1e-5)])


class OverlapTest(unittest.TestCase):
    def test_ddp_buckets(self):
        self.assertEqual(pj.ddp_buckets(3 << 20), [1 << 20, 2 << 20])
        self.assertEqual(pj.ddp_buckets(60 << 20), [1 << 20, 25 << 20, 25 << 20, 9 << 20])

    def test_ddp_overlap_by_hand(self):
        # backward 10 s, buckets of 1 and 9 bytes, 1 s per byte: bucket 0 ready at 1 s, done at 2 s;
        # bucket 1 ready at 10 s, done at 19 s: 9 s exposed.
        self.assertAlmostEqual(pj.overlap_ddp(10.0, [1, 9], lambda b: float(b)), 9.0)
        self.assertEqual(pj.overlap_ddp(10.0, [1, 9], lambda b: 0.0), 0.0)
        # A channel still busy with bucket 0 delays bucket 1: 1 + 20 > 10, then 9 more.
        self.assertAlmostEqual(pj.overlap_ddp(10.0, [1, 9], lambda b: 20.0 if b == 1 else 9.0), 20.0)

    def test_fsdp_overlap_by_hand(self):
        # No communication: the step is its compute.
        self.assertEqual(pj.overlap_fsdp(3.0, 6.0, 3, True, 0.0, 0.0), (3.0, 9.0))
        # Gathers of 2 s behind 1 s of compute per unit, 3 units, no regather, no reduce-scatter:
        # unit i can start at 2(i+1) s; forward ends at 6 + 1 = 7 s.
        fwd, end = pj.overlap_fsdp(3.0, 3.0, 3, False, 2.0, 0.0)
        self.assertAlmostEqual(fwd, 7.0)
        self.assertAlmostEqual(end, 10.0)


class ProjectionTest(unittest.TestCase):
    def setUp(self):
        self.files = Files()
        self.comm = self.files.write("comm.json", comm_records(TRUE))
        self.ddp = self.files.write("ddp.json", ddp_records())

    def tearDown(self):
        self.files.dir.cleanup()

    def models(self):
        res = load_results([self.comm, self.ddp])
        return pj.fit_links(res), pj.step_models(res)

    def test_validation_is_exact_on_a_machine_that_obeys_the_model(self):
        fits, models = self.models()
        vals = pj.validate_points(models, fits)
        self.assertEqual(sorted(v["world"] for v in vals), [1, 2, 4])
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)

    def test_fixed_time_per_step_is_fitted_from_two_world1_batches(self):
        # A step with time that does not shrink with the batch (weights read, copies): predicted
        # exactly, step and CPU time, from the world-1 record's two batches; with the world-1
        # batch alone (proportional scaling) the 4-rank step comes out too fast.
        fixed = dict(fwd_ms=40.0, bwd_ms=80.0, fixed_ms=(6.0, 9.0))
        ddp = self.files.write("ddp2.json", ddp_records(small_batch=True, **fixed))
        res = load_results([self.comm, ddp])
        vals = pj.validate_points(pj.step_models(res), pj.fit_links(res))
        self.assertEqual(sorted(v["world"] for v in vals), [1, 2, 4])
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)
            self.assertAlmostEqual(v["cpu_error"], 0.0, places=9)
        one = self.files.write("ddp1.json", ddp_records(small_batch=False, **fixed))
        res = load_results([self.comm, one])
        w4 = [v for v in pj.validate_points(pj.step_models(res), pj.fit_links(res)) if v["world"] == 4][0]
        self.assertLess(w4["error"], -0.05)
        self.assertLess(w4["cpu_error"], -0.05)

    def test_ranks_on_one_thread_use_the_one_thread_step(self):
        # A 2-core host whose world-1 step on 2 threads is 1.6x (not 2x) its step on one: a serial
        # fraction f = 0.25 of the one-thread time (Amdahl). Its 2 ranks of one thread each (no core
        # to spare: the all-reduces after backward, every one exposed) and 4 ranks on half a core
        # are predicted exactly from the one-thread figures of the world-1 record; without them
        # (the 2-thread step times 2 / cores) the 2-rank step comes out 1 / 1.6 x 2 = 1.25x too slow.
        batch, fwd1, bwd1, opt1, f = 64, 30.0, 60.0, 8.0, 0.25  # one thread, whole batch, ms

        def on(c, per):  # ms of (forward, backward, optimizer) on c cores (a share of one below 1)
            one = (fwd1 * per / batch, bwd1 * per / batch, opt1)
            return tuple(t / c for t in one) if c <= 1 else tuple(t * (f + (1 - f) / c) for t in one)

        def recs(one_thread):
            out = []
            for w, threads, c in ((1, 2, 2.0), (2, 1, 1.0), (4, 1, 0.5)):
                per = batch // w
                fw, bw, op = on(c, per)
                # the sweep's time at w ranks (at 4 it ran on the same shared cores)
                comm = sum(ring_all_reduce(n, w) for n in pj.ddp_buckets(8e6)) * 1e3 if w > 1 else 0.0
                step = fw + bw + op + comm
                m = {"step_ms": step, "forward_ms": fw, "backward_ms": bw, "optimizer_ms": op, "comm_wait_ms": comm,
                     "samples_per_s": batch / (step / 1e3), "per_rank_batch": per, "batch": batch, "threads": threads,
                     "parameters": 2e6, "bytes_per_step": 8e6, "buckets": 2, "world": w}
                if w == 1:
                    sf, sb, so = on(2.0, batch // 4)
                    m.update(small_batch=batch // 4, small_batch_forward_ms=sf, small_batch_backward_ms=sb,
                             small_batch_optimizer_ms=so, small_batch_step_ms=sf + sb + so)
                    if one_thread:
                        (hf, hb, ho), (qf, qb, qo) = on(1.0, batch // 2), on(1.0, batch // 4)
                        m.update(one_thread_batch=batch // 2, one_thread_forward_ms=hf, one_thread_backward_ms=hb,
                                 one_thread_optimizer_ms=ho, one_thread_small_batch_forward_ms=qf,
                                 one_thread_small_batch_backward_ms=qb, one_thread_small_batch_optimizer_ms=qo)
                out.append(record("ddp", f"ddp/mlp/w{w}/engine", m))
            return out

        comm = self.files.write("comm2.json", comm_records(TRUE, worlds=(2, 4)), cores=2)
        for one_thread in (True, False):
            ddp = self.files.write("ddp_threads.json", recs(one_thread), cores=2)
            res = load_results([comm, ddp])
            sm, _ = pj.step_models(res)[("ddp", "mlp")]
            self.assertEqual(sm.one is not None, one_thread)
            vals = {v["world"]: v for v in pj.validate_points(pj.step_models(res), pj.fit_links(res))}
            if one_thread:
                for w in (1, 2, 4):
                    self.assertAlmostEqual(vals[w]["error"], 0.0, places=9, msg=w)
                # between one core and two, Amdahl's law through the two thread counts
                for c in (1.5, 1.25):
                    expect = on(c, 24)
                    got = sm.parts_on(24, c)[:3]
                    for e, g in zip(expect, got):
                        self.assertAlmostEqual(g * 1e3, e, places=9)
            else:
                compute = sum(on(1.0, batch // 2))
                self.assertAlmostEqual(vals[2]["predicted_step_ms"] - vals[2]["measured_step_ms"], 0.25 * compute,
                                       places=6)

    def test_steps_are_predicted_with_collectives_out_of_cache(self):
        # A host whose collectives take 3x the lockstep sweep's time on buffers out of the caches
        # (Note [Collectives out of cache]), and whose steps run them so: with engine-cold records
        # the steps are predicted from them (shm-cold) and exactly; without, from the sweep's (shm).
        cold = {"all_reduce": ("ring", 15e-6, 3 / 10e9)}
        ddp = self.files.write("ddp_cold.json", ddp_records(all_reduce=lambda n, p: ring_all_reduce_with(cold, n, p)))
        both = self.files.write("comm_cold.json", comm_records(TRUE) + comm_records(cold, impl="engine-cold"))
        res = load_results([both, ddp])
        fits = pj.fit_links(res)
        self.assertIn("shm-cold", fits)
        vals = pj.validate_points(pj.step_models(res), fits)
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)
            if v["world"] > 1:
                self.assertEqual(v["comm_link"], "shm-cold")
        res = load_results([self.comm, ddp])
        w4 = [v for v in pj.validate_points(pj.step_models(res), pj.fit_links(res)) if v["world"] == 4][0]
        self.assertEqual(w4["comm_link"], "shm")
        self.assertLess(w4["error"], -0.01)

    def test_fsdp_validation_is_exact_on_a_machine_that_obeys_the_model(self):
        fsdp = self.files.write("fsdp.json", fsdp_records())
        res = load_results([self.comm, fsdp])
        vals = pj.validate_points(pj.step_models(res), pj.fit_links(res))
        self.assertEqual([(v["kind"], v["world"]) for v in vals], [("full_shard", w) for w in (1, 2, 4)])
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)
        self.assertGreater(vals[-1]["predicted_comm_ms"], 0.0)

    def test_fsdp_flags_all_reduce_is_a_latency_not_a_message(self):
        # The engine's FSDP all-reduces 4 bytes per parameter tensor once per step (Note [FSDP's
        # messages]): the units' messages are the bytes over the all-gathers and reduce-scatters
        # alone (divided over the all-reduce too, each was 1/13 short: a step error of 5e-4 on
        # this fast link), and the flags' call costs its latency, exposed.
        for serial, cores in ((False, 64), (True, 2)):
            fsdp = self.files.write(f"fsdp_flags_{serial}.json",
                                    fsdp_records(worlds=(1, 2), serial=serial, flag_bytes=24), cores=cores)
            res = load_results([self.comm, fsdp])
            w2 = [v for v in pj.validate_points(pj.step_models(res), pj.fit_links(res)) if v["world"] == 2][0]
            self.assertLess(abs(w2["error"]), 1e-5, serial)  # the model's flag message is 64 B, not 24
        # A link measured without all_reduce: the flags' call is timed as a small all_gather.
        comm = self.files.write("comm_no_ar.json", comm_records({k: v for k, v in TRUE.items() if k != "all_reduce"}))
        fsdp = self.files.write("fsdp_flags_no_ar.json", fsdp_records(worlds=(1, 2), flag_bytes=24))
        res = load_results([comm, fsdp])
        w2 = [v for v in pj.validate_points(pj.step_models(res), pj.fit_links(res)) if v["world"] == 2][0]
        self.assertLess(abs(w2["error"]), 1e-3)

    def test_fsdp_without_a_spare_core_exposes_every_collective(self):
        # 2 ranks of one thread on 2 cores: no core is left for the collectives, which the model
        # runs after the compute. Its exposed communication is then all of it, so the comm-only
        # error of a machine that obeys the model is 0, as the step's.
        fsdp = self.files.write("fsdp_serial.json", fsdp_records(worlds=(1, 2), serial=True), cores=2)
        res = load_results([self.comm, fsdp])
        vals = pj.validate_points(pj.step_models(res), pj.fit_links(res))
        w2 = [v for v in vals if v["world"] == 2][0]
        self.assertAlmostEqual(w2["error"], 0.0, places=9)
        self.assertAlmostEqual(w2["error_given_compute"], 0.0, places=9)
        self.assertAlmostEqual(w2["predicted_exposed_ms"], w2["predicted_comm_ms"], places=9)

    def test_records_across_hosts_are_checked_on_their_link(self):
        # The hosts fixture's records: metrics hosts > 1 and link_profile name the link class.
        comm = comm_records(TRUE)
        for r in comm:
            r["metrics"].update(hosts=2, link_profile="10g-50us")
        ddp = ddp_records(worlds=(1, 2, 4))
        for r in ddp[1:]:
            r["metrics"].update(hosts=2, link_profile="10g-50us")
        res = load_results([self.files.write("c.json", comm), self.files.write("d.json", ddp)])
        fits = pj.fit_links(res)
        self.assertEqual(set(fits), {"10g-50us"})
        vals = pj.validate_points(pj.step_models(res), fits)
        self.assertEqual([(v["world"], v["hosts"], v["link"]) for v in vals],
                         [(1, 1, "shm"), (2, 2, "10g-50us"), (4, 2, "10g-50us")])
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)
        rows = pj.project(pj.step_models(res), pj.link_model("10g-50us", fits), [8])
        self.assertEqual(rows[0]["link"], "10g-50us")

    def test_hosts_suite_records_are_checked_on_their_link(self):
        # `trainbench bench --suite hosts` folds each run across hosts into one record
        # (suites/hosts/hosts_bench.cpp): comm/<profile>/inter/2x<K> with
        # all_reduce_<bytes>B_<impl>_time_us, ddp/<profile>/2x<K> with <model>_step_ms/_samples_per_s.
        ddp = ddp_records(worlds=(1, 2, 4))
        recs = hosts_comm_records(TRUE) + [ddp[0]]
        for w in (2, 4):
            m = ddp[w // 2]["metrics"]
            recs.append(record("hosts", f"ddp/10g-50us/2x{w // 2}", {
                "mlp_step_ms": m["step_ms"], "mlp_samples_per_s": m["samples_per_s"], "nominal_rate_gbit": 10}))
        # Newer records fold the wait per model too: it reaches the validation.
        recs[-1]["metrics"]["mlp_comm_wait_ms"] = ddp[2]["metrics"]["comm_wait_ms"]
        res = load_results([self.files.write("h.json", recs)])
        fits = pj.fit_links(res)
        self.assertEqual(set(fits), {"10g-50us", "10g-50us-gloo"})
        vals = pj.validate_points(pj.step_models(res), fits)
        self.assertEqual([(v["world"], v["hosts"], v["link"]) for v in vals],
                         [(1, 1, "shm"), (2, 2, "10g-50us"), (4, 2, "10g-50us")])
        for v in vals:
            self.assertAlmostEqual(v["error"], 0.0, places=9)
        self.assertTrue(math.isnan(vals[1]["error_given_compute"]))  # the folded record has no wait time
        self.assertEqual(vals[2]["measured_exposed_ms"], ddp[2]["metrics"]["comm_wait_ms"])
        self.assertTrue(math.isfinite(vals[2]["error_given_compute"]))
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(pj.main(["--results", str(self.files.write("h2.json", recs)), "--ranks", "8",
                                      "--link", "10g-50us"]), 0)
        self.assertIn("10g-50us", out.getvalue())

    def test_fsdp_across_hosts_uses_the_all_reduce_ring_fit(self):
        # The hosts suite measures all_reduce only: FSDP's all_gather and reduce_scatter on that
        # link take the ring algorithm with the all_reduce ring fit's alpha and beta.
        fsdp = fsdp_records(worlds=(1, 2))
        m = fsdp[1]["metrics"]
        recs = hosts_comm_records(TRUE) + comm_records(TRUE) + fsdp + [record(
            "hosts", "fsdp/1g-200us/2x1", {"gpt_step_ms": 1.0, "gpt_samples_per_s": 8.0,
                                           "mlp_step_ms": m["step_ms"], "mlp_samples_per_s": m["samples_per_s"]})]
        for r in recs[:len(hosts_comm_records(TRUE))]:
            r["case"] = r["case"].replace("10g-50us", "1g-200us")
        res = load_results([self.files.write("h.json", recs)])
        fits = pj.fit_links(res)
        _, alpha, beta = TRUE["all_reduce"]
        for op in ("all_gather", "reduce_scatter"):
            f = fits["1g-200us"][op][0]
            self.assertEqual((f.algorithm, f.derived_from), ("ring", "all_reduce"))
            a, b = pj.ALGORITHMS[op]["ring"](1 << 20, 4)
            self.assertAlmostEqual(f.time(1 << 20, 4) / (a * alpha + b * beta), 1.0, places=6)
        vals = pj.validate_points(pj.step_models(res), fits)
        across = [v for v in vals if v["hosts"] == 2]
        # mlp only: gpt has no world-1 record here to build its compute model from
        self.assertEqual([(v["kind"], v["model"], v["world"], v["link"]) for v in across],
                         [("full_shard", "mlp", 2, "1g-200us")])
        self.assertTrue(math.isfinite(across[0]["error"]))
        recs_json = pj.records([], vals, fits, pj.link_model("1g-200us", fits))
        fit_rec = [r for r in recs_json if r["case"] == "fit/all_gather/1g-200us"][0]
        self.assertEqual(fit_rec["metrics"]["derived_from"], "all_reduce")

    def test_projection_shape(self):
        fits, models = self.models()
        eff = {}
        for link in ("nvlink", "ib", "ethernet", "shm"):
            rows = pj.project(models, pj.link_model(link, fits), [1, 8, 64, 1024])
            eff[link] = [r["efficiency"] for r in rows]
            self.assertAlmostEqual(eff[link][0], 1.0)
            self.assertTrue(all(0 < e <= 1.0 + 1e-12 for e in eff[link]), link)
            self.assertTrue(all(a >= b - 1e-12 for a, b in zip(eff[link], eff[link][1:])), link)
            for r in rows:
                self.assertAlmostEqual(r["samples_per_s"], r["ranks"] * r["per_rank_batch"] / (r["step_ms"] / 1e3))
        self.assertGreaterEqual(eff["nvlink"][-1], eff["ib"][-1])
        self.assertGreater(eff["ib"][-1], eff["ethernet"][-1])
        self.assertLess(eff["ethernet"][-1], 0.999)  # 8 MB of gradients over 10 GB/s are not all hidden

    def test_link_profile_time_is_the_faster_algorithm(self):
        link = pj.link_model("ib", {})
        alpha, beta = pj.LINK_PROFILES["ib"]["alpha_s"], 1 / (pj.LINK_PROFILES["ib"]["gbps"] * 1e9)
        n, p = 64 << 20, 1024
        ring = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta
        tree = 2 * 10 * alpha + 2 * n * beta
        self.assertAlmostEqual(link.time("all_reduce", n, p), min(ring, tree))
        rec_doubling = 10 * alpha + 10 * 8 * beta  # the fastest at 8 B
        self.assertAlmostEqual(link.time("all_reduce", 8, p), rec_doubling)
        self.assertEqual(link.time("all_reduce", n, 1), 0.0)

    def run_cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = pj.main(list(argv))
            except SystemExit as e:  # argparse's own errors
                code = e.code
        return code, out.getvalue(), err.getvalue()

    def test_cli_table_and_json(self):
        out_json = Path(self.files.dir.name) / "proj.json"
        code, out, err = self.run_cli("--results", str(self.comm), "--results", str(self.ddp), "--ranks",
                                      "8,64,1024", "--link", "ib", "--json", str(out_json))
        self.assertEqual(code, 0, err)
        self.assertIn("projection (a model, not a measurement)", out)
        for r in ("8", "64", "1024"):
            self.assertRegex(out, rf"mlp\s+DDP\s+{r}\s")
        doc = json.loads(out_json.read_text())
        validate(doc, load_schema(), "proj.json")
        cases = [r["case"] for r in doc["records"]]
        self.assertIn("project/ddp/mlp/w1024/ib", cases)
        self.assertIn("validate/ddp/mlp/w2/h1/shm", cases)
        self.assertIn("fit/all_reduce/shm", cases)
        self.assertIn("link/ib", cases)
        self.assertTrue(all(r["kind"] == "projection" for r in doc["records"]))

    def test_cli_bad_input_exits_2(self):
        base = ["--results", str(self.comm), "--results", str(self.ddp)]
        for argv, words in ((base + ["--link", "infiniband"], "unknown link 'infiniband'"),
                            (base + ["--ranks", "8,x"], "'x' is not a rank count"),
                            (base + ["--ranks", "0"], "'0' is not a rank count"),
                            (base + ["--ranks", ""], "is not a rank count"),
                            (["--results", str(self.comm)], "no passed ddp/"),
                            (["--results", str(self.ddp), "--link", "shm"], "unknown link 'shm'"),
                            (["--results", str(Path(self.files.dir.name) / "none.json")], "no such file")):
            code, out, err = self.run_cli(*argv)
            self.assertEqual(code, 2, argv)
            self.assertIn(words, err, argv)
            self.assertEqual(err.count("\n"), 1, err)
        code, _, _ = self.run_cli("--ranks", "8")  # no --results: argparse's usage error
        self.assertEqual(code, 2)

    def test_records_with_unusable_figures_are_left_out(self):
        recs = ddp_records()
        recs[0]["metrics"]["threads"] = 0  # world 1: would divide by zero
        recs[1]["metrics"]["step_ms"] = 1e308
        ddp = self.files.write("odd.json", recs)
        points = pj.step_points(load_results([self.comm, ddp]))
        self.assertEqual([p.world for p in points], [4])
        code, _, err = self.run_cli("--results", str(self.comm), "--results", str(ddp))
        self.assertEqual(code, 2)
        self.assertIn("no world-1 record", err)
        # A second world-1 batch out of range drops the record as any other figure does.
        recs = ddp_records(small_batch=True)
        recs[0]["metrics"]["small_batch_forward_ms"] = 1e308
        points = pj.step_points(load_results([self.comm, self.files.write("odd2.json", recs)]))
        self.assertEqual([p.world for p in points], [2, 4])

    def test_missing_world_1_is_an_error(self):
        ddp = self.files.write("ddp2.json", ddp_records(worlds=(2, 4)))
        code, _, err = self.run_cli("--results", str(self.comm), "--results", str(ddp))
        self.assertEqual(code, 2)
        self.assertIn("no world-1 record", err)


class MeasuredSampleTest(unittest.TestCase):
    """The validation on real records: every measured DDP point is predicted, the errors printed
    are (predicted - measured) / measured, and the world-1 points reproduce their measurement (the
    compute model is built from them; their communication is 0)."""

    def test_validation_on_measured_records(self):
        res = load_results([SAMPLE_COMM, SAMPLE_DDP, SAMPLE_FSDP])
        fits, models = pj.fit_links(res), pj.step_models(res)
        self.assertIn("shm", fits)
        self.assertEqual(set(fits["shm"]), set(pj.OPS))
        for op, (best, _) in fits["shm"].items():
            self.assertGreaterEqual(len(best.points), 20, op)
            self.assertTrue(math.isfinite(best.rms_rel_err), op)
        vals = pj.validate_points(models, fits)
        measured = [r for f in res[1:] for r in f.records if r["status"] == "pass" and r["case"].endswith("/engine")]
        self.assertEqual(len(vals), len(measured))
        self.assertEqual({v["kind"] for v in vals}, {"ddp", "full_shard", "shard_grad_op"})
        for v in vals:
            self.assertAlmostEqual(v["error"], v["predicted_step_ms"] / v["measured_step_ms"] - 1, places=9)
            if v["world"] == 1:
                self.assertLess(abs(v["error"]), 0.01, v)
                self.assertLess(abs(v["cpu_error"]), 1e-9, v)
            else:
                self.assertGreater(v["predicted_comm_ms"], 0.0, v)

    def test_validation_across_hosts_on_measured_records(self):
        # Every DDP/FSDP step the hosts sample folds is a 2-host validation point on its profile's
        # link, fitted from the same sample's comm records.
        res = load_results([SAMPLE_COMM, SAMPLE_HOSTS_DDP, SAMPLE_HOSTS_FSDP, SAMPLE_HOSTS])
        fits = pj.fit_links(res)
        expected = set()
        for r in res[3].records:
            c = pj.HOSTS_STEP_CASE.match(r["case"])
            if r["status"] == "pass" and c:
                self.assertIn(c["profile"], fits)
                self.assertIn(c["profile"] + "-gloo", fits)
                self.assertEqual(len(fits[c["profile"]]["all_reduce"][0].points), 5)  # 8 B to 4 MiB at 2x1
                world = 2 * int(c["local"])
                kind = "ddp" if c["suite"] == "ddp" else "full_shard"
                expected |= {(kind, k[: -len("_step_ms")], world, c["profile"]) for k in r["metrics"]
                             if k.endswith("_step_ms")}
        self.assertEqual(len(expected), 24)  # 3 profiles x (DDP, FSDP) x (2x1, 2x2) x (mlp, gpt)
        across = [v for v in pj.validate_points(pj.step_models(res), fits) if v["hosts"] == 2]
        self.assertEqual({(v["kind"], v["model"], v["world"], v["link"]) for v in across}, expected)
        self.assertEqual(len(across), len(expected))
        for v in across:
            self.assertAlmostEqual(v["error"], v["predicted_step_ms"] / v["measured_step_ms"] - 1, places=9)
            self.assertGreater(v["predicted_comm_ms"], 0.0, v)

    def test_validation_on_a_quiet_machine(self):
        # The quiet run (docstring above, run 14): 36 multi-rank points, one host and two. Measured
        # with the model as it is: 35 within the 15% goal (33 with the lockstep sweep's collectives
        # and the world-1 step scaled by its threads, the model before), comm-only 35 (32), the
        # worst point -17.6% (-23.0%) (docs/distributed.md "Runs 13 and 14"). Bounds one point
        # looser than measured: a change to the fit, the step model or the record parsing that
        # makes these real points worse fails here.
        res = load_results(QUIET)
        models = pj.step_models(res)
        self.assertTrue(all(sm.small > 0 for sm, _ in models.values()))  # two world-1 batches each
        self.assertTrue(all(sm.one is not None for sm, _ in models.values()))  # and one thread
        fits = pj.fit_links(res)
        vals = pj.validate_points(models, fits)
        multi = [v for v in vals if v["world"] > 1]
        self.assertEqual(len(multi), 36)
        self.assertEqual({v["hosts"] for v in multi}, {1, 2})
        for v in multi:  # every step's collectives from the out-of-cache sweep of its link
            self.assertEqual(v["comm_link"], v["link"] + pj.COLD, v)
        for v in vals:
            if v["world"] == 1:
                self.assertLess(abs(v["error"]), 0.01, v)
        within = [v for v in multi if abs(v["error"]) <= 0.15]
        self.assertGreaterEqual(len(within), 34, [(v["kind"], v["model"], v["world"], v["link"], v["error"])
                                                  for v in multi])
        comm_only = [v for v in multi if abs(v["error_given_compute"]) <= 0.15]
        self.assertGreaterEqual(len(comm_only), 34, [(v["kind"], v["model"], v["world"], v["link"],
                                                      v["error_given_compute"]) for v in multi])
        for v in multi:
            self.assertLess(abs(v["error"]), 0.20, v)
        # The training thread's CPU time: ranks of one thread do the whole step on it, as the
        # world-1 record's one-thread step does (-1% to -8% for the GPT at 2 ranks here; taken
        # from the two-thread world-1 step's training thread, which does half, it was -48%).
        for v in multi:
            if v["model"] == "gpt" and v["world"] == 2:
                self.assertLess(abs(v["cpu_error"]), 0.10, v)
        # FSDP across hosts fitted on measured all_gather and reduce_scatter, not the all_reduce ring's.
        for link in ("unshaped", "10g-50us", "1g-200us"):
            for op in ("all_gather", "reduce_scatter"):
                self.assertEqual(fits[link + pj.COLD][op][0].derived_from, "", (link, op))

    def test_repeated_runs_merge_into_their_median(self):
        # Note [Repeated runs]: the quiet run given three times, once as measured, once with every
        # time 20% longer and once 10% shorter, is the quiet run alone (each figure's median is the
        # measured one), each point once, with its runs and their spread.
        base = load_results(QUIET)

        def scaled(f):
            runs = copy.deepcopy(base)
            for res in runs:
                for rec in res.records:
                    for k, v in rec["metrics"].items():
                        if isinstance(v, float) and (k.endswith("_ms") or k.endswith("_us") or k == pj.TIME_KEY):
                            rec["metrics"][k] = v * f
            return runs

        alone = pj.validate_points(pj.step_models(base), pj.fit_links(base))
        three = base + scaled(1.2) + scaled(0.9)
        fits = pj.fit_links(three)
        merged = pj.validate_points(pj.step_models(three), fits)
        self.assertEqual(len(merged), len(alone))
        key = lambda v: (v["kind"], v["model"], v["world"], v["hosts"], v["link"])  # noqa: E731
        for a, m in zip(sorted(alone, key=key), sorted(merged, key=key)):
            self.assertEqual(key(a), key(m))
            self.assertEqual((a["runs"], m["runs"]), (1, 3))
            self.assertTrue(math.isnan(a["measured_spread"]))
            self.assertAlmostEqual(m["measured_spread"], 0.3, places=9)
            for k in ("measured_step_ms", "predicted_step_ms", "error", "error_given_compute"):
                self.assertAlmostEqual(m[k], a[k], places=9, msg=(key(m), k))
        for link, per_op in pj.fit_links(base).items():  # one sample per measurement, the median
            for op, (f, _) in per_op.items():
                self.assertEqual(len(fits[link][op][0].points), len(f.points), (link, op))
        text = pj.validation_text(merged, fits)
        self.assertIn("spread", text)
        self.assertIn("30.0%", text)
        recs = [r for r in pj.records([], merged, fits, pj.LinkModel("none", {})) if r["case"].startswith("validate/")]
        self.assertTrue(all(r["metrics"]["runs"] == 3 for r in recs))

    def test_report_draws_the_projection(self):
        with tempfile.TemporaryDirectory() as d:
            with redirect_stdout(io.StringIO()):
                code = cli.main(["--quiet", "--out", d, str(SAMPLE_COMM), str(SAMPLE_DDP), str(SAMPLE_FSDP)])
            self.assertEqual(code, 0)
            self.assertGreater(os.path.getsize(Path(d) / "projection.png"), 10_000)
            self.assertGreater(os.path.getsize(Path(d) / "projection_validation.png"), 10_000)
            self.assertIn("Scaling projection: the model at the measured points", (Path(d) / "summary.md").read_text())
            self.assertIn("PROJECTION", (Path(d) / "report.html").read_text())
        # Without DDP records there is nothing to project, and nothing is drawn.
        self.assertEqual(projection_plots.plots(load_results([SAMPLE_COMM]), Path(d)), [])


if __name__ == "__main__":
    unittest.main()
