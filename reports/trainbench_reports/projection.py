"""Scaling projection: a latency-bandwidth (alpha-beta) model of each collective fitted to the
`comm` sweeps, a compute model from the measured DDP/FSDP steps, and the step time, samples/s and
scaling efficiency they project to many ranks for a link class; validated against every measured
point (docs/distributed.md, "Scaling projection").

`trainbench project --results R.json --ranks 8,64,1024 --link ib` runs `python -m
trainbench_reports.projection` with the same arguments (harness/project_cmd.cpp). Exit status: 0
printed; 2 a bad command line or input (one line on stderr); 3 this interpreter lacks numpy.

The model, in short (the docs section says why each assumption):
  collective time  T(n, P) = a_A(P) * alpha + b_A(n, P) * beta for algorithm A (ALGORITHMS);
  DDP step         compute (forward + backward scaled by the per-rank batch, optimizer, rest) +
                   the all-reduce time of the gradient buckets not hidden behind backward
                   (one communication channel, buckets ready as backward produces their bytes);
  FSDP step        the same with each unit's all-gather prefetched behind the previous unit's
                   compute and its reduce-scatter behind the next unit's backward."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .load import MAX_RANKS, LoadError, _clip, load_results, number, whole_number
from .output import OutputError, check_output, write_output

COMM_CASE = re.compile(r"^(?P<op>all_reduce|all_gather|reduce_scatter|broadcast)/float32/\d+/w(?P<world>\d+)/"
                       r"(?P<impl>[A-Za-z0-9_.-]+)$")
DDP_CASE = re.compile(r"^ddp/(?P<model>[^/]+)/w(?P<world>\d+)/engine$")
FSDP_CASE = re.compile(r"^fsdp/(?P<model>[^/]+)/(?P<strategy>full_shard|shard_grad_op|ddp)/w(?P<world>\d+)/"
                       r"(?P<impl>engine|engine-ddp)$")
# The hosts suite (`trainbench bench --suite hosts`, suites/hosts/hosts_bench.cpp) folds each run
# across hosts into one record: comm/<profile>/<intra|inter>/<H>x<K> with one
# <op>_<bytes>B_<impl>_time_us metric per comm point (the comm record's time_s), and
# <ddp|fsdp>/<profile>/<H>x<K> with <model>_step_ms and <model>_samples_per_s (FSDP: FULL_SHARD).
# Its hosts are network namespaces of one machine: every rank of every host shares its cores.
HOSTS_COMM_CASE = re.compile(r"^comm/(?P<profile>[A-Za-z0-9_.-]+)/(?:intra|inter)/(?P<hosts>\d+)x(?P<local>\d+)$")
HOSTS_COMM_KEY = re.compile(r"^(?P<op>all_reduce|all_gather|reduce_scatter|broadcast)_(?P<bytes>\d+)B_"
                            r"(?P<impl>[A-Za-z0-9.-]+)_time_us$")
HOSTS_STEP_CASE = re.compile(r"^(?P<suite>ddp|fsdp)/(?P<profile>[A-Za-z0-9_.-]+)/(?P<hosts>\d+)x(?P<local>\d+)$")
# The comm records' median repetition, as the DDP/FSDP step times are medians (fitting the
# fastest repetition, time_min_s, would model a quieter machine than the steps ran on).
TIME_KEY = "time_s"
GOAL_REL_ERROR = 0.15  # issue 19: the prediction within 15% of every measured point
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
# The records of runs across hosts say where they ran in these metrics (the names proposed to the
# `hosts` fixture's benchmarks): the host count and the name of the link profile between hosts.
LINK_KEYS = ("hosts", "link_profile")
# Locally measured link classes: the engine's MPI backend within one host (shared memory) and its
# Gloo backend (TCP over loopback). Across hosts: "<profile>" and "<profile>-gloo".
IMPL_LINK = {"engine": "", "engine-gloo": "-gloo", "engine-cold": "-cold"}
LOCAL_LINK = {"engine": "shm", "engine-gloo": "gloo", "engine-cold": "shm-cold"}
# The engine's collectives timed on buffers out of the caches (Note [Collectives out of cache] in
# suites/comm/comm_bench.cpp), as a training step's are: a measured step on link L is predicted
# with L + COLD where the records have that class, with L's lockstep sweep otherwise.
COLD = "-cold"


class ProjectionError(Exception):
    """Bad input for the projection; the message says what and how to fix it."""


def log2c(p: int) -> float:
    return float(math.ceil(math.log2(p))) if p > 1 else 0.0


# Cost of one call of `op` with algorithm A on P ranks: (latency terms, bytes crossing the
# slowest link) for a message of n bytes, n as nccl-tests counts it (docs/results.md "comm": the
# buffer for all_reduce and broadcast, the whole gathered output / scattered input otherwise).
ALGORITHMS = {
    "all_reduce": {
        "ring": lambda n, p: (2 * (p - 1), 2 * (p - 1) / p * n),
        "recursive_doubling": lambda n, p: (log2c(p), log2c(p) * n),
        "tree": lambda n, p: (2 * log2c(p), 2 * n if p > 1 else 0.0),  # NCCL's double binary tree
    },
    "all_gather": {
        "ring": lambda n, p: (p - 1, (p - 1) / p * n),
        "recursive_doubling": lambda n, p: (log2c(p), (p - 1) / p * n),
    },
    "reduce_scatter": {
        "ring": lambda n, p: (p - 1, (p - 1) / p * n),
        "recursive_halving": lambda n, p: (log2c(p), (p - 1) / p * n),
    },
    "broadcast": {
        "binomial_tree": lambda n, p: (log2c(p), log2c(p) * n),
        "scatter_allgather": lambda n, p: (log2c(p) + p - 1, 2 * (p - 1) / p * n),
    },
}


@dataclass
class Fit:
    """alpha/beta of one collective on one link class, per size regime: segments [(from_bytes,
    alpha_s, beta_s_per_byte)], the first from 0. Two regimes where the sweep shows a protocol or
    cache switch (MPI's eager/rendezvous limit, NCCL's LL/Simple protocols, a working set that
    leaves the cache), one otherwise."""
    op: str
    link: str
    algorithm: str
    segments: list
    points: list = field(default_factory=list)  # [(bytes, world, measured_s, predicted_s)]
    derived_from: str = ""  # the op whose fit this one reuses (derive_ring), "" when fitted
    by_world: dict = field(default_factory=dict)  # world -> Fit of that rank count's sweep alone

    @property
    def alpha_s(self) -> float:
        return self.segments[0][1]

    @property
    def beta_s_per_byte(self) -> float:
        return self.segments[-1][2]  # the large-message bandwidth

    def time(self, n: float, p: int) -> float:
        if p in self.by_world:
            return self.by_world[p].time(n, p)
        seg = [s for s in self.segments if n >= s[0]][-1] if n >= 0 else self.segments[0]
        a, b = ALGORITHMS[self.op][self.algorithm](n, p)
        return a * seg[1] + b * seg[2]

    @property
    def rms_rel_err(self) -> float:
        errs = [(pr - m) / m for _, _, m, pr in self.points]
        return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else math.nan

    @property
    def max_rel_err(self) -> float:
        return max((abs(pr - m) / m for _, _, m, pr in self.points), default=math.nan)

    @property
    def rms_log_err(self) -> float:
        errs = [math.log(pr / m) for _, _, m, pr in self.points if pr > 0]
        return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else math.inf


def _lstsq_nonneg(rows):
    """(alpha, beta) >= 0 minimising the relative error of rows [((latency terms, bytes term),
    seconds)]: the linear starting point of _fit_log."""
    import numpy as np

    a = np.array([[ab[0] / t, ab[1] / t] for ab, t in rows])
    y = np.ones(len(rows))
    best = None
    for cols in ((0, 1), (0,), (1,)):  # the full fit, else the best fit with one term at 0
        sol, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
        if np.any(sol < 0):
            continue
        coef = [0.0, 0.0]
        for c, v in zip(cols, sol):
            coef[c] = float(v)
        res = float(np.sum((a @ np.array(coef) - y) ** 2))
        if best is None or res < best[2] - 1e-15:
            best = (coef[0], coef[1], res)
    return best


def _fit_log(rows):
    """(alpha, beta, sum of squared log errors) minimising sum (log(predicted / measured))^2 over
    rows [((latency terms, bytes term), seconds)] (Levenberg-Marquardt on log alpha, log beta, so
    both stay positive). Log errors weigh a prediction 10x too small as much as one 10x too large
    (a relative error caps the first at -1, and a fit fed mostly small messages would then
    sacrifice the large ones)."""
    import numpy as np

    la = np.array([ab[0] for ab, _ in rows], dtype=float)
    lb = np.array([ab[1] for ab, _ in rows], dtype=float)
    lt = np.log(np.array([t for _, t in rows], dtype=float))
    alpha, beta, _ = _lstsq_nonneg(rows) or (0.0, 0.0, 0.0)
    t = np.exp(lt)
    if alpha <= 0:
        alpha = 1e-3 * float(np.min(t / np.where(la > 0, la, np.inf)))
    if beta <= 0:
        beta = 1e-3 * float(np.min(t / np.where(lb > 0, lb, np.inf)))
    x = np.clip(np.log([alpha, beta]), math.log(1e-30), math.log(1e3))

    def resid(x):
        s = la * math.exp(x[0]) + lb * math.exp(x[1])
        return np.log(s) - lt, s

    bound = (math.log(1e-30), math.log(1e3))  # seconds (per byte): far outside any real link

    r, s = resid(x)
    cost, lam = float(r @ r), 1e-3
    for _ in range(200):
        j = np.column_stack([la * math.exp(x[0]) / s, lb * math.exp(x[1]) / s])
        h, g = j.T @ j, j.T @ r
        step = np.linalg.solve(h + lam * np.diag(np.diag(h)) + 1e-12 * np.eye(2), -g)
        x2 = np.clip(x + step, *bound)
        r2, s2 = resid(x2)
        c2 = float(r2 @ r2)
        if c2 < cost:
            x, r, s, lam = x2, r2, s2, lam / 3
            done = cost - c2 < 1e-14 * max(1.0, cost)
            cost = c2
            if done:
                break
        else:
            lam *= 4
            if lam > 1e12:
                break
    return math.exp(x[0]), math.exp(x[1]), cost


MIN_SEGMENT_POINTS = 4  # points on each side of a regime switch
MIN_SHAPE_SIZES = 4     # sizes a rank count's own fit needs
SPLIT_GAIN = 0.8        # a second regime must cut the squared error by a fifth or more


def fit_alpha_beta(op: str, algorithm: str, samples, link: str = "", split: bool = True) -> Fit:
    """Least squares of log(predicted / measured) (so 8 B and 64 MiB weigh alike, and too slow as
    too fast) over samples [(bytes, world, seconds)]; alpha and beta > 0. With `split`,
    the sizes are cut into two regimes where that cuts the error by SPLIT_GAIN (the cut between two measured
    sizes, each side with MIN_SEGMENT_POINTS points or more)."""
    cost = ALGORITHMS[op][algorithm]
    pts = sorted((n, p, t) for n, p, t in samples if p > 1 and t > 0)
    if len(pts) < 2:
        raise ProjectionError(f"{op} on {link or 'this link'}: {len(pts)} measured point(s) at 2 or more "
                              "ranks; the fit needs at least 2 (run `trainbench bench --suite comm`)")
    rows = [(cost(n, p), t) for n, p, t in pts]
    al, be, res = _fit_log(rows)
    segments = [(0.0, al, be)]
    if split and res > 1e-8 * len(rows):  # an exact fit needs no second regime
        best = res * SPLIT_GAIN
        for i in range(MIN_SEGMENT_POINTS, len(pts) - MIN_SEGMENT_POINTS + 1):
            if pts[i][0] == pts[i - 1][0]:
                continue  # the cut falls between two sizes
            lo, hi = _fit_log(rows[:i]), _fit_log(rows[i:])
            if lo[2] + hi[2] < best:
                best = lo[2] + hi[2]
                segments = [(0.0, lo[0], lo[1]), (pts[i][0], hi[0], hi[1])]
    fit = Fit(op, link, algorithm, segments)
    fit.points = [(n, p, t, fit.time(n, p)) for n, p, t in pts]
    return fit


def best_fit(op: str, samples, link: str = "") -> tuple[Fit, list[Fit]]:
    """Every algorithm's fit, and the one with the smallest RMS log error (the fit's own measure):
    the algorithm the backend behaves like over the measured sizes."""
    fits = [fit_alpha_beta(op, alg, samples, link) for alg in ALGORITHMS[op]]
    return min(fits, key=lambda f: f.rms_log_err), fits


# Link classes beyond this machine: per-link latency alpha (s) and time per byte beta (s/B, 1 /
# unidirectional bandwidth per rank). Every link of the ring/tree is assumed alike (a flat
# fabric): the figures are per-rank injection bandwidth and one-hop latency. Sources in
# docs/distributed.md, "Scaling projection"; "busbw" = NCCL-tests' all_reduce bus bandwidth, an
# achieved figure; "vendor" = a datasheet's line rate.
LINK_PROFILES = {
    "nvlink": dict(alpha_s=2.0e-6, gbps=450.0,
                   source="NVLink 4 (H100 SXM): 450 GB/s per direction (vendor); alpha assumed"),
    "ib": dict(alpha_s=6.0e-6, gbps=45.0,
               source="InfiniBand NDR 400 Gb/s, one HCA per rank: 50 GB/s line rate (vendor) at the 90% "
                      "NCCL-tests reach; alpha from a published NCCL-tests small-message time"),
    "ethernet": dict(alpha_s=30.0e-6, gbps=10.0,
                     source="100 GbE, TCP sockets: 12.5 GB/s line rate (vendor) at an assumed 80%; alpha assumed"),
}


@dataclass
class LinkModel:
    """How long each collective takes on one link class: fitted per collective (measured classes)
    or from a profile's alpha/beta, taking the faster algorithm per call as NCCL's tuner does."""
    name: str
    fits: dict  # op -> Fit (measured)
    profile: dict | None = None

    def time(self, op: str, n: float, p: int) -> float:
        if p <= 1 or n <= 0:
            return 0.0
        if self.profile is None:
            return self.fits[op].time(n, p)
        alpha, beta = self.profile["alpha_s"], 1.0 / (self.profile["gbps"] * 1e9)
        return min(a * alpha + b * beta for a, b in (f(n, p) for f in ALGORITHMS[op].values()))

    def describe(self) -> str:
        if self.profile is not None:
            return (f"{self.name}: alpha {self.profile['alpha_s'] * 1e6:g} us, {self.profile['gbps']:g} GB/s per "
                    f"link ({self.profile['source']})")
        parts = [f"{op} {f.algorithm} alpha {f.alpha_s * 1e6:.3g} us beta^-1 "
                 f"{(1e-9 / f.beta_s_per_byte) if f.beta_s_per_byte > 0 else math.inf:.3g} GB/s"
                 + (f" (from the {f.derived_from} fit)" if f.derived_from else "")
                 for op, f in self.fits.items()]
        return f"{self.name} (fitted to the comm records): " + "; ".join(parts)


def _link_name(hosts: float | None, profile, impl: str) -> str | None:
    if hosts is not None and hosts > 1:
        name = profile if isinstance(profile, str) and profile else "tcp"
        return name + IMPL_LINK.get(impl, "-" + impl)
    return LOCAL_LINK.get(impl)


def _link_of(rec, impl: str) -> str | None:
    m = rec["metrics"]
    return _link_name(number(m.get(LINK_KEYS[0])), m.get(LINK_KEYS[1]), impl)


def _records(results):
    for res in results:
        for rec in res.records:
            if rec["kind"] == "benchmark" and rec["status"] == "pass":
                yield res, rec


def oversubscription(world: int, hosts: int, cores: int) -> float:
    """How many ranks share each core of a host (at least 1): with more ranks than cores, ranks
    take turns, and a collective, which needs every rank to progress, slows by that factor. The
    fits divide measured times by it, and predictions for such runs multiply it back."""
    local = world / max(hosts, 1)
    return max(1.0, local / max(cores, 1))


def median(values) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def comm_samples(results) -> dict:
    """{link: {op: [(bytes, world, time_s)]}} of the passed comm records, each time divided by
    its run's oversubscription (ranks per core of the host). The same measurement in several runs'
    files (one case, one metric) is one sample, the runs' median (Note [Repeated runs])."""
    runs: dict = {}  # (link, op, bytes, world, source) -> [time_s per run]
    for res, rec in _records(results):
        if rec["suite"] == "hosts":
            _hosts_comm_samples(res, rec, runs)
            continue
        m = COMM_CASE.match(rec["case"])
        if not m or rec["suite"] != "comm" or not _usable(rec["metrics"], COMM_RANGES, ("bytes", TIME_KEY)):
            continue
        link = _link_of(rec, m["impl"])
        n, t = number(rec["metrics"].get("bytes")), number(rec["metrics"].get(TIME_KEY))
        world, cores = whole_number(m["world"], 1, MAX_RANKS), _logical_cores(res, 1)
        if link is None or n is None or t is None or world is None or cores is None:
            continue
        hosts = int(number(rec["metrics"].get(LINK_KEYS[0])) or 1)
        t /= oversubscription(world, hosts, cores)
        runs.setdefault((link, m["op"], n, world, rec["case"]), []).append(t)
    out: dict = {}
    for (link, op, n, world, _), times in runs.items():
        out.setdefault(link, {}).setdefault(op, []).append((n, world, median(times)))
    return out


def _hosts_comm_samples(res, rec, runs: dict) -> None:
    """The comm points a hosts-suite comm record folds (HOSTS_COMM_CASE) into `runs`, keyed as
    comm_samples keys them; the hosts share one machine's cores."""
    c = HOSTS_COMM_CASE.match(rec["case"])
    shape, cores = _hosts_shape(c) if c else None, _logical_cores(res, 1)
    if shape is None or cores is None:
        return
    hosts, world = shape
    slow = oversubscription(world, 1, cores)
    for key, value in rec["metrics"].items():
        k = HOSTS_COMM_KEY.match(key)
        t = number(value)
        link = _link_name(hosts, c["profile"], k["impl"]) if k else None
        n = whole_number(k["bytes"], *COMM_RANGES["bytes"]) if k else None  # the key's bytes: as a comm record's
        lo, hi = COMM_RANGES[TIME_KEY]
        if link is None or n is None or t is None or not lo <= t / 1e6 <= hi:
            continue
        runs.setdefault((link, k["op"], float(n), world, rec["case"] + "/" + key), []).append(t / 1e6 / slow)


def _hosts_shape(c):
    """(hosts, world) of a hosts-suite case's <H>x<K> (HOSTS_COMM_CASE, HOSTS_STEP_CASE), or None
    when it names no run: 0 hosts or 0 ranks a host (a world of 0 ranks divides by zero), or more
    ranks than MAX_RANKS in all (400 digits overflow a float)."""
    hosts, local = whole_number(c["hosts"], 1, MAX_RANKS), whole_number(c["local"], 1, MAX_RANKS)
    if hosts is None or local is None or hosts * local > MAX_RANKS:
        return None
    return hosts, hosts * local


# A machine's logical cores: a run header's logical_cores outside makes its records unusable (the
# schema bounds it below only, and 10^400 cores overflow a float).
CORES_RANGE = (1, 1 << 20)


def _logical_cores(res, default):
    """The run header's logical_cores, `default` where it has none; None where it says a count no
    machine has (CORES_RANGE): the file's records are then left out, as records with a figure
    out of its range are (_usable)."""
    if "logical_cores" not in res.run:
        return default
    v = number(res.run["logical_cores"])
    return int(v) if v is not None and CORES_RANGE[0] <= v <= CORES_RANGE[1] else None


def derive_ring(op: str, all_reduce_fits: list, link: str) -> Fit:
    """all_gather or reduce_scatter on a link measured with all_reduce alone (the hosts suite's
    comm sweep): the ring algorithm with the all_reduce ring fit's alpha and beta (a ring
    all_reduce is a ring reduce_scatter followed by a ring all_gather over the same links)."""
    ring = next(f for f in all_reduce_fits if f.algorithm == "ring")
    return Fit(op, link, "ring", list(ring.segments), derived_from="all_reduce")


def fit_links(results) -> dict:
    """{link: {op: (best Fit, [every algorithm's Fit])}} for every link class with comm records."""
    out = {}
    for link, per_op in comm_samples(results).items():
        out[link] = {}
        for op, samples in per_op.items():
            try:
                out[link][op] = best_fit(op, samples, link)
            except ProjectionError:
                continue  # too few points for this op here; using it is the error
            best = out[link][op][0]
            worlds = sorted({p for _, p, _ in samples if p > 1})
            for p in worlds if len(worlds) > 1 else ():
                at = [s for s in samples if s[1] == p]
                if len({n for n, _, _ in at}) >= MIN_SHAPE_SIZES:
                    best.by_world[p] = fit_alpha_beta(op, best.algorithm, at, link)
        if "all_reduce" in out[link]:
            for op in ("all_gather", "reduce_scatter"):
                if op not in out[link]:
                    f = derive_ring(op, out[link]["all_reduce"][1], link)
                    out[link][op] = (f, [f])
    return out


@dataclass
class StepPoint:
    """One measured DDP/FSDP benchmark: what the compute model is built from and checked against."""
    kind: str       # "ddp", "full_shard", "shard_grad_op"
    model: str
    world: int
    hosts: int
    link: str
    metrics: dict
    logical_cores: int
    ranks_per_machine: int = 0  # ranks sharing logical_cores; 0: world / hosts (a machine per host)
    source: str = ""            # the record's case (and the hosts record's model): the same in every run
    runs: tuple = ()            # the step_ms of each run merged into this point (Note [Repeated runs])

    @property
    def local(self) -> float:
        return self.ranks_per_machine or self.world / max(self.hosts, 1)

    def m(self, key: str, default: float = 0.0) -> float:
        v = number(self.metrics.get(key))
        return default if v is None else v


# The figures the model reads, with the range a usable one lies in: records may hold any number
# (docs/results.md), and 0 threads or a step of 1e308 ms would divide by zero or overflow. A record
# with a figure outside is left out, as a failed one is; so is one whose case names a world of 0
# ranks or more than MAX_RANKS (whole_number), and the records of a file whose run header says
# logical_cores outside CORES_RANGE. parameters: at most 10^12, 4 TB of float32 gradients on every
# rank, which no DDP replica holds (a larger model is sharded, and 10^14 made 15 million buckets).
# units (and an FSDP step's reduce-scatters, one a unit, and all-gathers, two): at most 10^4 wrapped
# modules; overlap_fsdp steps through every unit, a second per prediction at 10^6, minutes a report.
STEP_RANGES = {"step_ms": (1e-6, 1e9), "forward_ms": (0, 1e9), "backward_ms": (0, 1e9), "optimizer_ms": (0, 1e9),
               "comm_wait_ms": (0, 1e9), "comm_busy_ms": (0, 1e9), "threads": (1, 1e5), "per_rank_batch": (1e-6, 1e9),
               "batch": (1e-6, 1e9), "parameters": (0, 1e12), "bytes_per_step": (0, 1e16), "all_gathers": (0, 2e4),
               "reduce_scatters": (0, 1e4), "all_reduces": (0, 1e6), "units": (0, 1e4), "samples_per_s": (0, 1e15),
               "small_batch": (1e-6, 1e9), "small_batch_forward_ms": (0, 1e9), "small_batch_backward_ms": (0, 1e9),
               "small_batch_main_thread_cpu_ms": (0, 1e9), "one_thread_batch": (1e-6, 1e9),
               **{f"one_thread{b}_{k}_ms": (0, 1e9) for b in ("", "_small_batch") for k in ("forward", "backward", "optimizer")},
               LINK_KEYS[0]: (1, 1e6)}
# bytes from 1: a 0-byte message has no bandwidth to fit (it fitted 10^21 GB/s).
COMM_RANGES = {"bytes": (1, 1e13), TIME_KEY: (1e-9, 1e5), LINK_KEYS[0]: (1, 1e6)}


def _usable(metrics: dict, ranges: dict, required: tuple) -> bool:
    for key, (lo, hi) in ranges.items():
        if key not in metrics:
            if key in required:
                return False
            continue
        v = number(metrics[key])
        if v is None or not lo <= v <= hi:
            return False
    return True


def _left_out(results) -> int:
    """How many passed ddp/fsdp records step_points leaves out as unusable."""
    used = {p.source for p in step_points(results)}
    return sum(1 for _, rec in _records(results)
               if (rec["suite"] == "ddp" and DDP_CASE.match(rec["case"])
                   or rec["suite"] == "fsdp" and (m := FSDP_CASE.match(rec["case"])) and m["strategy"] != "ddp")
               and rec["case"] not in used)


def step_points(results) -> list[StepPoint]:
    out = []
    for res, rec in _records(results):
        if rec["suite"] == "hosts":
            out += _hosts_step_points(res, rec)
            continue
        if not _usable(rec["metrics"], STEP_RANGES, ("step_ms",)):
            continue
        suite, case = rec["suite"], rec["case"]
        if suite == "ddp" and (m := DDP_CASE.match(case)):
            kind, model = "ddp", m["model"]
        elif suite == "fsdp" and (m := FSDP_CASE.match(case)) and m["strategy"] != "ddp":
            kind, model = m["strategy"], m["model"]
        else:
            continue
        met = rec["metrics"]
        hosts = int(number(met.get(LINK_KEYS[0])) or 1)
        link = _link_of(rec, "engine")
        world, cores = whole_number(m["world"], 1, MAX_RANKS), _logical_cores(res, int(number(met.get("threads")) or 1))
        if world is None or cores is None:
            continue
        if world == 1 and not number(met["step_ms"]) > (number(met.get("comm_wait_ms")) or 0.0):
            continue  # a world-1 step that only waited has no compute to scale (it predicted 0 s)
        out.append(StepPoint(kind, model, world, hosts, link, met, cores, source=case))
    return _merge_runs(out)


# Note [Repeated runs]
# On a shared 2-core machine one launch of a multi-rank benchmark moves by 5-15% from the next
# (docs/distributed.md, "Scaling projection": the same point in runs of one build), about the 15%
# goal itself. Given several runs' files, the projection takes each measurement's median over the
# runs, as a benchmark takes the median of its repetitions: a step point's every figure (the
# world-1 point's too, so the compute model is the runs' median) and each comm sample. The point
# keeps its runs' step times, and the validation prints their spread beside the error.
def _merge_runs(points: list[StepPoint]) -> list[StepPoint]:
    groups: dict = {}
    for p in points:
        groups.setdefault((p.kind, p.model, p.world, p.hosts, p.link, p.logical_cores, p.ranks_per_machine,
                           p.source), []).append(p)
    out = []
    for same in groups.values():
        first = same[0]
        metrics = {}
        for key, value in first.metrics.items():
            nums = [number(p.metrics.get(key)) for p in same]
            nums = [v for v in nums if v is not None]
            metrics[key] = median(nums) if number(value) is not None and nums else value
        out.append(StepPoint(first.kind, first.model, first.world, first.hosts, first.link, metrics,
                             first.logical_cores, first.ranks_per_machine, first.source,
                             tuple(p.m("step_ms") for p in same)))
    return out


def _hosts_step_points(res, rec) -> list[StepPoint]:
    """The DDP or FSDP (FULL_SHARD) steps a hosts-suite record folds (HOSTS_STEP_CASE), one per
    model: step_ms, samples_per_s and the per-rank batch they imply (samples/s = the global batch
    over the step), comm_wait_ms and main_thread_cpu_ms where folded; the hosts share one machine's
    cores."""
    c = HOSTS_STEP_CASE.match(rec["case"])
    shape, cores = _hosts_shape(c) if c else None, _logical_cores(res, 1)
    if shape is None or cores is None:
        return []
    hosts, world = shape
    link = _link_name(hosts, c["profile"], "engine")
    out = []
    for key in rec["metrics"]:
        if not key.endswith("_step_ms"):
            continue
        model = key[: -len("_step_ms")]
        step, rate = number(rec["metrics"][key]), number(rec["metrics"].get(model + "_samples_per_s"))
        if step is None or rate is None:
            continue
        met = {"step_ms": step, "samples_per_s": rate, "per_rank_batch": rate * step / 1e3 / world,
               LINK_KEYS[0]: float(hosts), LINK_KEYS[1]: c["profile"]}
        for extra in ("comm_wait_ms", "comm_busy_ms", "main_thread_cpu_ms"):  # folded per model where measured
            if (v := number(rec["metrics"].get(model + "_" + extra))) is not None:
                met[extra] = v
        if not _usable(met, STEP_RANGES, ("step_ms", "samples_per_s", "per_rank_batch")):
            continue
        out.append(StepPoint("ddp" if c["suite"] == "ddp" else "full_shard", model, world, hosts, link, met,
                             cores, ranks_per_machine=world,
                             source=rec["case"] + "/" + model))
    return out


def ddp_buckets(total_bytes: float, first: float = 1 << 20, cap: float = 25 << 20) -> list[float]:
    """PyTorch's (and the engine's) default bucket layout: the first bucket 1 MiB, then 25 MiB,
    filled in the order backward produces gradients (parameter boundaries ignored)."""
    out, left = [], total_bytes
    size = first
    while left > 0:
        out.append(min(size, left))
        left -= out[-1]
        size = cap
    return out


def overlap_ddp(backward_s: float, buckets: list[float], comm) -> float:
    """Exposed all-reduce time after backward: bucket i is ready when backward has produced its
    bytes (gradients at an even rate over backward), the all-reduces run one at a time in order
    (one communication channel, the engine's worker / NCCL's stream). One step per bucket: the
    model itself runs overlap_ddp_runs, the same in a few steps (Note [Equal buckets])."""
    total = sum(buckets)
    free, done = 0.0, 0.0
    for b in buckets:
        done += b
        ready = backward_s * done / total if total else backward_s
        free = max(free, ready) + comm(b)
    return max(0.0, free - backward_s)


# Note [Equal buckets]
# ddp_buckets' layout is a run of equal buckets between the first and the last: 4 TB of gradients
# are 152,000 buckets of 25 MiB, and overlap_ddp's loop over them (with a collective's time per
# bucket) took seconds per prediction, a report of hundreds. Over a run of m equal buckets, each
# all-reduce taking c, ready at r_j = r_1 + (j - 1) d (d: backward's time to produce one bucket),
# the channel, free at F when the run starts, is free after it at
#     F_m = max(F + m c, max over j of (r_j + (m - j + 1) c))
# (unrolling F_j = max(F_{j-1}, r_j) + c: the channel last waited for bucket j, or never). The
# inner term is r_1 + m c + (j - 1)(d - c), affine in j, so its maximum over 1 <= j <= m is at an
# end: F_m = max(F + m c, r_1 + m c, r_m + c). overlap_ddp_runs takes that step per run; it equals
# overlap_ddp's loop to rounding (the loop adds c m times; EqualBuckets in
# reports/tests/test_hostile_inputs.py checks both, exactly where the sums are whole numbers).
def ddp_bucket_runs(total_bytes: float, first: float = 1 << 20, cap: float = 25 << 20) -> list[tuple[float, int]]:
    """ddp_buckets(total_bytes) as runs [(bucket bytes, how many)] in order, in a few steps
    whatever the size: the first bucket, the full ones, the remainder."""
    if total_bytes <= 0:
        return []
    head = min(first, total_bytes)
    left = total_bytes - head
    full = math.floor(left / cap)
    while full > 0 and full * cap > left:  # the quotient rounded up to a whole number
        full -= 1
    while (full + 1) * cap <= left:
        full += 1
    rest = left - full * cap
    return [(b, n) for b, n in ((head, 1), (float(cap), full), (rest, 1)) if n and b > 0]


def overlap_ddp_runs(backward_s: float, runs: list[tuple[float, int]], comm) -> float:
    """overlap_ddp over runs [(bucket bytes, how many)] of equal buckets (ddp_bucket_runs), one
    step per run (Note [Equal buckets])."""
    total = sum(b * n for b, n in runs)
    free, done = 0.0, 0.0
    for b, n in runs:
        c = comm(b)
        first_ready = backward_s * (done + b) / total
        done += b * n
        last_ready = backward_s * done / total
        free = max(free + n * c, first_ready + n * c, last_ready + c)
    return max(0.0, free - backward_s)


# Note [FSDP's messages]
# An FSDP step's collectives are its units' all-gathers and reduce-scatters, of the unit's bytes,
# and one all-reduce at the end of backward: the used-parameter flags, 4 bytes per parameter tensor
# (engine/dist/fsdp/fsdp.cpp), waited on at once. The records count all three and their bytes
# together (bytes_per_step). The model spreads the bytes over the all-gathers and reduce-scatters
# (the flags' few bytes with them: 24 of the MLP's 22.4 MB) and charges the flags' all-reduce as an
# exposed small call. It had divided by the all-reduce too: every message a tenth too small for
# the MLP (three units: 2.24 MB instead of 2.49), a fifteenth for the GPT (five).
FLAG_BYTES = 64.0


def overlap_fsdp(forward_s: float, backward_s: float, units: int, regather: bool, ag, rs) -> tuple[float, float]:
    """(forward end, backward end) of an FSDP step of `units` equal units: each unit's all-gather
    prefetched when the previous unit starts computing, its reduce-scatter issued when its
    backward ends, all on one channel in issue order; regather: FULL_SHARD gathers again in
    backward."""
    k = max(units, 1)
    fc, bc = forward_s / k, backward_s / k
    chan = 0.0
    gathered = []  # end of unit i's gather

    def issue(at, dur):
        nonlocal chan
        chan = max(chan, at) + dur
        return chan

    gathered.append(issue(0.0, ag))
    t = 0.0
    for i in range(k):
        start = max(t, gathered[i])
        if i + 1 < k:
            gathered.append(issue(start, ag))
        t = start + fc
    fwd_end = t
    if regather:
        g = {k - 1: issue(t, ag)}
    last_rs = t
    for i in reversed(range(k)):
        start = max(t, g[i]) if regather else t
        if regather and i > 0:
            g[i - 1] = issue(start, ag)
        t = start + bc
        last_rs = issue(t, rs)
    return fwd_end, max(t, last_rs)


@dataclass
class Prediction:
    step_s: float
    compute_s: float
    comm_s: float         # all communication time per step (hidden or not)
    exposed_s: float      # the part not hidden behind compute
    per_rank_batch: float
    ranks: int

    @property
    def samples_per_s(self) -> float:
        return self.ranks * self.per_rank_batch / self.step_s

    @property
    def comm_fraction(self) -> float:
        return self.exposed_s / self.step_s


class StepModel:
    """The compute model of one (kind, model): its world-1 step on this host, scaled to a per-rank
    batch and to the share of the host's cores a rank gets when ranks share a host."""

    def __init__(self, points: list[StepPoint]):
        base = [p for p in points if p.world == 1]
        if not base:
            p0 = points[0]
            raise ProjectionError(f"{p0.kind} {p0.model}: no world-1 record to build the compute model from "
                                  f"(run `trainbench bench --suite {'ddp' if p0.kind == 'ddp' else 'fsdp'}` with "
                                  "world 1 in its filter; a record with a figure outside its range is left out)")
        self.base = base[0]
        self.kind, self.model = self.base.kind, self.base.model
        b = self.base
        self.batch1 = b.m("per_rank_batch", b.m("batch", 1.0))
        self.fwd_s = b.m("forward_ms") / 1e3
        self.bwd_s = b.m("backward_ms") / 1e3
        self.opt_s = b.m("optimizer_ms") / 1e3
        busy = b.m("step_ms") / 1e3 - b.m("comm_wait_ms") / 1e3
        parts = self.fwd_s + self.bwd_s + self.opt_s
        if parts > busy > 0:
            # The parts are means over the steps, step_ms a median (fsdp): a slow outlier step
            # inflates the means. The step is the headline figure; the parts keep their shares.
            self.fwd_s, self.bwd_s, self.opt_s = (x * busy / parts for x in (self.fwd_s, self.bwd_s, self.opt_s))
        self.rest_s = max(0.0, busy - self.fwd_s - self.bwd_s - self.opt_s)
        # Forward and backward as fixed + per-sample time (Note [Two batches at world 1] in
        # suites/ddp/ddp_bench.cpp): fitted through the world-1 step at its batch and at the
        # record's small_batch where it has one, else proportional to the batch.
        self.small = b.m("small_batch", 0.0)
        two = 0 < self.small < self.batch1 and all(
            f"small_batch_{k}_ms" in b.metrics for k in ("forward", "backward", "main_thread_cpu"))
        if not two:
            self.small = 0.0
        self.fwd_fixed, self.fwd_per = self._affine(self.fwd_s, b.m("small_batch_forward_ms") / 1e3 if two else None)
        self.bwd_fixed, self.bwd_per = self._affine(self.bwd_s, b.m("small_batch_backward_ms") / 1e3 if two else None)
        self.cores1 = min(b.m("threads", 1.0), b.logical_cores)
        # The step on one thread at two batches (Note [One thread at world 1] in
        # suites/ddp/ddp_bench.cpp): forward and backward fixed + per sample, the optimizer's mean.
        self.one = None
        keys = [f"{pre}_{k}_ms" for pre in ("one_thread", "one_thread_small_batch")
                for k in ("forward", "backward", "optimizer")]
        b1, b2 = b.m("one_thread_batch"), self.small or b.m("small_batch")
        if self.cores1 > 1 and 0 < b2 < b1 and all(k in b.metrics for k in keys):
            def line(part):
                hi, lo = b.m(f"one_thread_{part}_ms") / 1e3, b.m(f"one_thread_small_batch_{part}_ms") / 1e3
                return _line_through(b1, hi, b2, lo)
            self.one = dict(forward=line("forward"), backward=line("backward"),
                            optimizer=(b.m("one_thread_optimizer_ms") + b.m("one_thread_small_batch_optimizer_ms")) / 2e3)
        self.grad_bytes = b.m("parameters") * 4.0
        # Collective counts per step and bytes per message come from a multi-rank record (world 1
        # may skip collectives); they do not depend on the world size.
        multi = [p for p in points if p.world > 1 and "bytes_per_step" in p.metrics]
        ref = multi[0] if multi else b
        self.units = int(ref.m("reduce_scatters") or ref.m("units", 1.0))
        self.regather = ref.m("all_gathers") > ref.m("reduce_scatters")
        # FSDP's bytes are its all-gathers' and reduce-scatters'; its all-reduce per step is the
        # used-parameter flags (4 bytes per parameter tensor), a latency: Note [FSDP's messages].
        # DDP's messages are its buckets (ddp_buckets), from the gradient bytes.
        calls = ref.m("all_gathers") + ref.m("reduce_scatters")
        self.msg_bytes = ref.m("bytes_per_step") / calls if calls else 0.0
        self.flag_reduces = ref.m("all_reduces") if self.kind != "ddp" else 0.0

    def _affine(self, at_batch1: float, at_small: float | None) -> tuple[float, float]:
        """(fixed seconds, seconds per sample) through (batch1, at_batch1) and (small, at_small);
        proportional to the batch without a second point (see _line_through)."""
        if at_small is not None and self.small > 0:
            return _line_through(self.batch1, at_batch1, self.small, at_small)
        return 0.0, at_batch1 / self.batch1

    def forward_backward_s(self, per_rank_batch: float) -> tuple[float, float]:
        """Forward and backward seconds at this per-rank batch, on the world-1 run's cores."""
        return (self.fwd_fixed + self.fwd_per * per_rank_batch, self.bwd_fixed + self.bwd_per * per_rank_batch)

    def parts_on(self, per_rank_batch: float, cores: float) -> tuple[float, float, float, float]:
        """(forward, backward, optimizer, rest) seconds of one rank's step at this batch on `cores`
        cores (a fraction: a share of one). Without the one-thread step, each part of the world-1
        step scaled by its cores over `cores` (perfect thread scaling). With it (Note [One thread at
        world 1]): on one core or less, the one-thread step slowed by the share; between one core and
        the world-1 run's, each part by Amdahl's law, t(c) = t1 * (f + (1 - f) / c), with the serial
        fraction f that takes the one-thread time t1 to the world-1 time at this batch."""
        fwd, bwd = self.forward_backward_s(per_rank_batch)
        full = (fwd, bwd, self.opt_s)
        linear = self.cores1 / cores
        if self.one is None or cores >= self.cores1:
            parts = tuple(x * linear for x in full)
        else:
            one = (self.one["forward"][0] + self.one["forward"][1] * per_rank_batch,
                   self.one["backward"][0] + self.one["backward"][1] * per_rank_batch, self.one["optimizer"])
            if cores <= 1:
                parts = tuple(t1 / cores for t1 in one)
            else:
                k = self.cores1

                def amdahl(t1, tk):  # serial fraction f through t1 (1 core) and tk (k cores)
                    f = min(1.0, max(0.0, (tk / t1 - 1 / k) / (1 - 1 / k))) if t1 > 0 else 0.0
                    return t1 * (f + (1 - f) / cores)
                parts = tuple(amdahl(t1, tk) for t1, tk in zip(one, full))
        # The rest (zero_grad, the loss's item, bookkeeping) runs on the training thread alone: with
        # the one-thread figures it is taken as serial, slowed only below one core (scaled by
        # the threads, a noisy residual of the world-1 step -- 1.7 ms of SHARD_GRAD_OP's in run 13 --
        # came out 4x at 4 ranks on 2 cores).
        return (*parts, self.rest_s * (linear if self.one is None else 1 / min(cores, 1.0)))

    def main_thread_cpu_s(self, ranks: int, per_rank_batch: float, threads: float | None = None) -> float | None:
        """The training thread's CPU seconds per step at `ranks` ranks of `threads` threads
        (communication left out): the world-1 run's, its forward + backward share fixed + per sample
        through the two world-1 batches (proportional to the batch with one) and its optimizer share
        divided by the ranks for FSDP, the shares taken from the world-1 step's split. A rank of one
        thread where world 1 ran several does all the work on that thread: the one-thread step's
        times (one thread alone on a core: its wall time is its CPU time) where the record has
        them."""
        cpu1 = self.base.m("main_thread_cpu_ms") / 1e3
        total = self.fwd_s + self.bwd_s + self.opt_s + self.rest_s
        if cpu1 <= 0 or total <= 0:
            return None
        fb, opt = (self.fwd_s + self.bwd_s) / total, self.opt_s / total
        opt_cpu, rest_cpu = cpu1 * opt, cpu1 * (1 - fb - opt)  # the same at any batch
        share = ranks if self.kind != "ddp" else 1  # FSDP steps 1/P of the parameters per rank
        if self.one is not None and threads is not None and threads <= 1:
            one = self.one
            return (one["forward"][0] + one["backward"][0] + (one["forward"][1] + one["backward"][1]) * per_rank_batch
                    + one["optimizer"] / share + rest_cpu)
        small = self.base.m("small_batch_main_thread_cpu_ms") / 1e3 - opt_cpu - rest_cpu if self.small else None
        fixed, per = self._affine(cpu1 * fb, small)
        return fixed + per * per_rank_batch + opt_cpu / share + rest_cpu

    def predict(self, ranks: int, per_rank_batch: float, link: LinkModel, cores_per_rank: float | None = None,
                comm_slow: float = 1.0, compute_speedup: float = 1.0, overlap: bool = True) -> Prediction:
        """Step on `ranks` ranks with `per_rank_batch` samples each; cores_per_rank: the cores a
        rank computes on (None: a device of its own, as fast as the world-1 run, or
        `compute_speedup` times faster); comm_slow: the oversubscription of the run (collectives
        slow by it); overlap: whether communication can run during compute (False: it runs after
        the compute that precedes it, as on a CPU host with no core to spare for it)."""
        def coll(op, n):
            return link.time(op, n, ranks) * comm_slow

        if cores_per_rank is None:
            fwd, bwd = (x / compute_speedup for x in self.forward_backward_s(per_rank_batch))
            opt, rest = self.opt_s / compute_speedup, self.rest_s / compute_speedup
        else:
            fwd, bwd, opt, rest = self.parts_on(per_rank_batch, cores_per_rank)
        sharded = self.kind != "ddp"
        opt /= ranks if sharded else 1  # FSDP steps its own shard only
        if self.kind == "ddp":
            runs = ddp_bucket_runs(self.grad_bytes)  # Note [Equal buckets]
            comm_total = sum(n * coll("all_reduce", b) for b, n in runs)
            exposed = overlap_ddp_runs(bwd, runs, lambda b: coll("all_reduce", b)) if overlap else comm_total
            fb = fwd + bwd + exposed
        else:
            ag = coll("all_gather", self.msg_bytes)
            rs = coll("reduce_scatter", self.msg_bytes)
            n_ag = self.units * (2 if self.regather else 1)
            # The flags' all-reduce, waited on (never hidden); on a link measured without
            # all_reduce, an all_gather of as few bytes stands in (both a latency there).
            small = "all_reduce" if link.profile is not None or "all_reduce" in link.fits else "all_gather"
            flags = self.flag_reduces * coll(small, FLAG_BYTES) if self.flag_reduces else 0.0
            comm_total = n_ag * ag + self.units * rs + flags
            _, end = overlap_fsdp(fwd, bwd, self.units, self.regather, ag, rs)
            fb = (end + flags) if overlap else fwd + bwd + comm_total
            exposed = max(0.0, end + flags - fwd - bwd) if overlap else comm_total
        compute = fwd + bwd + opt + rest
        return Prediction(fb + opt + rest, compute, comm_total, exposed, per_rank_batch, ranks)


def _line_through(x1: float, y1: float, x2: float, y2: float) -> tuple[float, float]:
    """(fixed, per unit) of the line through (x1, y1) and (x2, y2), x2 < x1; proportional to x
    through (x1, y1) where the line would start below 0 or fall (a small batch measured relatively
    faster: noise, not a negative fixed cost)."""
    per = (y1 - y2) / (x1 - x2)
    fixed = y1 - per * x1
    if fixed >= 0 and per >= 0:
        return fixed, per
    return 0.0, y1 / x1


def step_models(results) -> dict:
    """{(kind, model): (StepModel, [StepPoint])} for every measured DDP/FSDP benchmark family."""
    groups: dict = {}
    for p in step_points(results):
        groups.setdefault((p.kind, p.model), []).append(p)
    out = {}
    for key, pts in sorted(groups.items()):
        pts.sort(key=lambda p: (p.hosts, p.world))
        if all(p.ranks_per_machine for p in pts):
            continue  # only the hosts suite's points, no world-1 run to predict them from: skipped
        out[key] = (StepModel(pts), pts)
    return out


def link_model(name: str, fits: dict) -> LinkModel:
    if name in LINK_PROFILES:
        return LinkModel(name, {}, LINK_PROFILES[name])
    if name in fits:
        missing = [op for op in OPS if op not in fits[name]]
        model = LinkModel(name, {op: f for op, (f, _) in fits[name].items()})
        model.missing = missing
        return model
    known = sorted(LINK_PROFILES) + sorted(fits)
    raise ProjectionError(f"unknown link {name!r}: choose one of {', '.join(known)} (measured classes come from "
                          "`comm` records in the results)")


def _needs(link: LinkModel, kind: str) -> list[str]:
    ops = ["all_reduce"] if kind == "ddp" else ["all_gather", "reduce_scatter"]
    return [op for op in ops if link.profile is None and op not in link.fits]


def validate_points(models: dict, fits: dict) -> list[dict]:
    """Every measured DDP/FSDP point predicted from its world-1 compute and the link class it ran
    on (ranks sharing the host's cores as they did), beside its measurement."""
    out = []
    for (kind, model), (sm, pts) in models.items():
        for p in pts:
            name = p.link
            if name + COLD in fits and not _needs(link_model(name + COLD, fits), kind):
                name += COLD
            if name not in fits and p.world > 1:
                continue  # no comm records of that link class: nothing to predict with
            link = link_model(name, fits) if name in fits else LinkModel("none", {})
            if p.world > 1 and _needs(link, kind):
                continue
            local = p.local
            cores = min(p.m("threads", 1.0), p.logical_cores / local)
            # Collectives over shared memory or TCP need a core to progress: they overlap
            # compute only where the host has a core that no rank's compute thread holds.
            spare = p.logical_cores > local * p.m("threads", 1.0)
            pred = sm.predict(p.world, p.m("per_rank_batch", sm.batch1), link, cores,
                              oversubscription(p.local, 1, p.logical_cores), overlap=spare)
            meas = p.m("step_ms") / 1e3
            cpu_pred, cpu_meas = sm.main_thread_cpu_s(p.world, p.m("per_rank_batch", sm.batch1), p.m("threads", 1.0)), None
            if "main_thread_cpu_ms" in p.metrics:
                cpu_meas = p.m("main_thread_cpu_ms") / 1e3
            steps = [t for t in p.runs if t > 0]
            out.append(dict(kind=kind, model=model, world=p.world, hosts=p.hosts, link=p.link, comm_link=name,
                            # The measurement's own spread over repeated runs (Note [Repeated runs]):
                            # (slowest - fastest) / median of the runs' step times; NaN for one run.
                            runs=max(1, len(steps)), measured_runs_ms=steps,
                            measured_spread=(max(steps) - min(steps)) / median(steps) if len(steps) > 1 else math.nan,
                            # The compute model in CPU time, which the machine's load does not stretch:
                            # the training thread's CPU seconds per step, predicted from world 1's.
                            cpu_error=(cpu_pred / cpu_meas - 1) if cpu_pred and cpu_meas else math.nan,
                            measured_step_ms=meas * 1e3, predicted_step_ms=pred.step_s * 1e3,
                            measured_samples_per_s=p.m("samples_per_s"), predicted_samples_per_s=pred.samples_per_s,
                            error=(pred.step_s - meas) / meas,
                            # The communication and overlap model alone: the measured step with its
                            # measured exposed wait replaced by the predicted one.
                            # NaN where the record lacks the wait (hosts records of before <model>_comm_wait_ms).
                            error_given_compute=(pred.exposed_s - p.m("comm_wait_ms", math.nan) / 1e3) / meas,
                            measured_exposed_ms=p.m("comm_wait_ms", math.nan), predicted_exposed_ms=pred.exposed_s * 1e3,
                            measured_comm_ms=p.m("comm_busy_ms", math.nan),
                            predicted_comm_ms=pred.comm_s * 1e3))
    return out


def project(models: dict, link: LinkModel, ranks: list[int], per_rank_batch: float | None = None,
            compute_speedup: float = 1.0) -> list[dict]:
    """Weak scaling: each rank a device as fast as the measured world-1 run (or `compute_speedup`
    times faster: an accelerator), keeping the world-1 batch per rank (or `per_rank_batch`);
    efficiency = samples/s over ranks x the 1-rank figure."""
    out = []
    for (kind, model), (sm, _) in models.items():
        missing = _needs(link, kind)
        if missing:
            raise ProjectionError(f"link {link.name}: no {', '.join(missing)} records to fit (needed for {kind}); run "
                                  "`trainbench bench --suite comm` on that link")
        b = per_rank_batch or sm.batch1
        one = sm.predict(1, b, link, compute_speedup=compute_speedup)
        for r in ranks:
            pr = sm.predict(r, b, link, compute_speedup=compute_speedup)
            out.append(dict(kind=kind, model=model, ranks=r, link=link.name, per_rank_batch=b,
                            step_ms=pr.step_s * 1e3, compute_ms=pr.compute_s * 1e3, comm_ms=pr.comm_s * 1e3,
                            exposed_comm_ms=pr.exposed_s * 1e3, samples_per_s=pr.samples_per_s,
                            efficiency=pr.samples_per_s / (r * one.samples_per_s), comm_fraction=pr.comm_fraction,
                            compute_speedup=compute_speedup))
    return out


def parse_ranks(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not re.fullmatch(r"[0-9]+", part) or whole_number(part, 1, MAX_RANKS) is None:
            raise ProjectionError(f"--ranks {_clip(repr(text), 60)}: {_clip(repr(part), 40)} is not a rank count "
                                  f"from 1 to {MAX_RANKS} "
                                  "(give a comma-separated list, e.g. 8,64,1024)")
        out.append(int(part))
    return sorted(set(out))


# ---- output ----

def _kind_label(kind: str) -> str:
    return "DDP" if kind == "ddp" else f"FSDP {kind}"


def table_text(rows: list[dict]) -> str:
    lines = [f"{'model':<6} {'strategy':<20} {'ranks':>6} {'step ms':>10} {'samples/s':>12} {'efficiency':>10} "
             f"{'comm frac':>9}"]
    for r in rows:
        lines.append(f"{r['model']:<6} {_kind_label(r['kind']):<20} {r['ranks']:>6} {r['step_ms']:>10.2f} "
                     f"{r['samples_per_s']:>12.1f} {r['efficiency']:>10.3f} {r['comm_fraction']:>9.3f}")
    return "\n".join(lines)


def validation_text(vals: list[dict], fits: dict) -> str:
    several = any(v["runs"] > 1 for v in vals)
    lines = ["validation: measured steps (ranks sharing this host's cores as they ran) against the model; "
             "comm-only: the measured step with the predicted exposed communication in place of the measured; "
             "CPU-time: the training thread's CPU time per step against the compute model (load-independent)"
             + ("; runs: the files' repeats of the point, measured as their median; spread: (slowest - fastest) / "
                "median step over them" if several else ""),
             f"{'model':<6} {'strategy':<20} {'world':>5} {'hosts':>5} {'link':<14} {'measured ms':>11} "
             f"{'predicted ms':>12} {'error':>7} {'comm-only error':>15} {'CPU-time error':>14} "
             f"{'exposed ms meas/pred':>21}" + (f" {'runs':>4} {'spread':>6}" if several else "")]
    for v in vals:
        lines.append(f"{v['model']:<6} {_kind_label(v['kind']):<20} {v['world']:>5} {v['hosts']:>5} {v['comm_link']:<14} "
                     f"{v['measured_step_ms']:>11.2f} {v['predicted_step_ms']:>12.2f} {v['error']:>+7.1%} "
                     f"{v['error_given_compute']:>+15.1%} {v['cpu_error']:>+14.1%} "
                     f"{v['measured_exposed_ms']:>10.2f}/{v['predicted_exposed_ms']:<10.2f}"
                     + (f" {v['runs']:>4} {v['measured_spread']:>6.1%}" if several else ""))
    lines.append("collective fits (relative error over the measured sweep points):")
    for link, per_op in sorted(fits.items()):
        for op in OPS:
            if op in per_op:
                f = per_op[op][0]
                lines.append(f"  {link:<14} {op:<15} {f.algorithm:<19} alpha {f.alpha_s * 1e6:9.3f} us  "
                             f"bw {1e-9 / f.beta_s_per_byte if f.beta_s_per_byte else math.inf:8.3f} GB/s  "
                             + (f"(the {f.derived_from} ring fit's: no {op} records)" if f.derived_from else
                                f"rms {f.rms_rel_err:6.1%}  max {f.max_rel_err:6.1%}  ({len(f.points)} points)"))
    return "\n".join(lines)


def records(rows: list[dict], vals: list[dict], fits: dict, link: LinkModel) -> list[dict]:
    """Result records (kind `projection`, suite `projection`): the projected points, the validation
    points and the fitted parameters (docs/results.md, "Projection records")."""
    out = []

    def json_number(v):  # JSON has no NaN: the harness's strings (docs/results.md)
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return v

    def rec(case, metrics, status="pass", message="", tolerances=None):
        out.append(dict(suite="projection", case=case, kind="projection", status=status, rank=0,
                        metrics={k: json_number(v) for k, v in metrics.items()}, tolerances=tolerances or {},
                        duration_s=0.0, message=message))

    for r in rows:
        name = "ddp" if r["kind"] == "ddp" else f"fsdp/{r['kind']}"
        rec(f"project/{name}/{r['model']}/w{r['ranks']}/{r['link']}",
            {k: r[k] for k in ("ranks", "per_rank_batch", "compute_speedup", "step_ms", "compute_ms", "comm_ms",
                               "exposed_comm_ms", "samples_per_s", "efficiency", "comm_fraction")} | {"link": r["link"]})
    for v in vals:
        name = "ddp" if v["kind"] == "ddp" else f"fsdp/{v['kind']}"
        metrics = {k: v[k] for k in ("world", "hosts", "measured_step_ms", "predicted_step_ms", "error",
                                     "error_given_compute", "cpu_error",
                                     "measured_exposed_ms", "predicted_exposed_ms", "predicted_comm_ms")}
        if math.isfinite(v["measured_comm_ms"]):
            metrics["measured_comm_ms"] = v["measured_comm_ms"]
        if v["runs"] > 1:
            metrics["runs"] = v["runs"]
            metrics["measured_spread"] = v["measured_spread"]
        metrics["link"] = v["link"]
        metrics["comm_link"] = v["comm_link"]  # the fitted class its collectives were predicted with
        ok = abs(v["error"]) <= GOAL_REL_ERROR
        rec(f"validate/{name}/{v['model']}/w{v['world']}/h{v['hosts']}/{v['link']}", metrics,
            "pass" if ok else "fail", "" if ok else f"prediction error {v['error']:+.1%} exceeds the 15% goal",
            {"goal_rel_error": GOAL_REL_ERROR})
    for lname, per_op in sorted(fits.items()):
        for op, (f, _) in sorted(per_op.items()):
            rec(f"fit/{op}/{lname}", {"alpha_s": f.alpha_s, "beta_s_per_byte": f.beta_s_per_byte,
                                      "rms_rel_err": f.rms_rel_err, "max_rel_err": f.max_rel_err,
                                      "points": len(f.points), "algorithm": f.algorithm, "link": lname}
                | ({"derived_from": f.derived_from} if f.derived_from else {}))
    if link.profile is not None:
        rec(f"link/{link.name}", {"alpha_s": link.profile["alpha_s"], "gbps": link.profile["gbps"],
                                  "source": link.profile["source"]})
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="trainbench project",
        description="Project DDP and FSDP step time, samples/s and scaling efficiency to many ranks from measured "
                    "comm, ddp and fsdp benchmarks (docs/distributed.md, 'Scaling projection').")
    p.add_argument("--results", action="append", required=True, metavar="JSON",
                   help="result file(s) with comm records and ddp/fsdp benchmark records (repeatable; the same "
                        "benchmarks from several runs count as their median)")
    p.add_argument("--ranks", default="8,16,32,64,128,256,512,1024",
                   help="comma-separated rank counts (default 8,16,...,1024)")
    p.add_argument("--link", default="ib",
                   help=f"link class: {', '.join(LINK_PROFILES)} (profiles), or a measured class from the comm "
                        "records (shm: the engine's MPI within this host; shm-cold: the same out of cache; gloo: "
                        "its Gloo backend; across hosts the records' link profile, e.g. 10g-50us, 10g-50us-cold or "
                        "10g-50us-gloo from `trainbench bench --suite hosts`)")
    p.add_argument("--per-rank-batch", type=float, default=None,
                   help=f"samples per rank, {BATCH_RANGE[0]:g} to {BATCH_RANGE[1]:g} (default: the world-1 run's "
                        "batch)")
    p.add_argument("--compute-speedup", type=float, default=1.0, metavar="F",
                   help="ranks compute F times faster than the measured world-1 run (e.g. an accelerator "
                        f"against this CPU), {SPEEDUP_RANGE[0]:g} to {SPEEDUP_RANGE[1]:g}; default 1")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the projection as a result file")
    p.add_argument("--schema", type=Path, default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# The command line's figures: a per-rank batch as a record's (STEP_RANGES), a speedup of a million
# either way (1e-308 made every step infinite, then divided by it; a batch of 1e300 printed times of
# 300 digits). Outside is a usage error, 0 included (not "the default").
BATCH_RANGE = STEP_RANGES["per_rank_batch"]
SPEEDUP_RANGE = (1e-6, 1e6)


def _check_options(args) -> None:
    """Usage errors, before a file is read: the ranges above and an --json that cannot be written
    (checked before the projection prints, not after)."""
    for name, value, (lo, hi) in (("--per-rank-batch", args.per_rank_batch, BATCH_RANGE),
                                  ("--compute-speedup", args.compute_speedup, SPEEDUP_RANGE)):
        if value is not None and not lo <= value <= hi:  # NaN fails both comparisons
            raise ProjectionError(f"{name} {value:g}: must be between {lo:g} and {hi:g}")
    if args.json is not None:
        if not args.json:
            raise ProjectionError("--json '': an empty path (leave --json out to print only)")
        try:
            check_output(Path(args.json))
        except OutputError as e:
            raise OutputError(f"--json {e}")


def run(args) -> int:
    ranks = parse_ranks(args.ranks)
    _check_options(args)
    results = load_results(args.results, args.schema)
    fits = fit_links(results)
    models = step_models(results)
    if not models:
        left = _left_out(results)
        raise ProjectionError("no passed ddp/<model>/w<W>/engine or fsdp/<model>/<strategy>/w<W>/engine records in "
                              f"{', '.join(args.results)} (run `trainbench bench --suite ddp` and/or `--suite fsdp`)"
                              + (f"; {left} such record(s) left out for a figure outside its usable range "
                                 "(docs/distributed.md, \"Scaling projection\")" if left else ""))
    link = link_model(args.link, fits)
    rows = project(models, link, ranks, args.per_rank_batch, args.compute_speedup)
    vals = validate_points(models, fits)
    speed = f", compute {args.compute_speedup:g}x the measured world-1 step's" if args.compute_speedup != 1 else ""
    print(f"projection (a model, not a measurement) to {','.join(map(str, ranks))} ranks{speed} on {link.describe()}")
    print(table_text(rows))
    print()
    print(validation_text(vals, fits))
    if args.json is not None:
        doc = dict(schema="trainbench.result/1", run=_run_header(results, args), records=records(rows, vals, fits, link))
        write_output(Path(args.json), (json.dumps(doc, indent=1, allow_nan=False) + "\n").encode())
        print(f"json: {args.json}")
    return 0


def _run_header(results, args) -> dict:
    import datetime
    import socket
    first = results[0].run
    return dict(time=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                git_revision=first.get("git_revision", "unknown"), host=socket.gethostname(),
                build_type=first.get("build_type", "unknown"), compiler=first.get("compiler", "unknown"),
                backends=first.get("backends", ["cpu"]), world_size=1,
                command="trainbench project " + " ".join(sys.argv[1:]), threads=first.get("threads", 1),
                projection_inputs=[str(r.path) for r in results])


def main(argv=None) -> int:
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("trainbench project: error: this Python lacks numpy (use the project's venv: TRAINBENCH_PYTHON)",
              file=sys.stderr)
        return 3
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except BrokenPipeError:  # the reader (head, a pager) stopped reading: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ProjectionError, LoadError, OutputError) as e:
        print(f"trainbench project: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"trainbench project: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
