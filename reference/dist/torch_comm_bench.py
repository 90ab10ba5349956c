#!/usr/bin/env python3
"""PyTorch's Gloo backend on the `comm` suite's sweep: the `torch-gloo` peer of the engine's
collectives (suites/comm/comm_bench.cpp times `engine`, `engine-gloo` and `mpi` the same way).

    <venv>/bin/python reference/dist/torch_comm_bench.py --world 2 [--sizes 8,16,64,...]
        [--ops all_reduce,all_gather,reduce_scatter,broadcast] [--target-s 0.2]
        [--threads N] [--launcher torchrun|spawn] [--timeout S]

Starts `--world` ranks through torchrun (torch_launch.py), each with
init_process_group("gloo"), and prints one JSON record per line on stdout, in the result schema
of docs/results.md: case `<op>/float32/<bytes>/w<world>/torch-gloo`, kind "benchmark", metrics
time_s, algbw_gbps, busbw_gbps, bytes, world, iterations, threads. `bytes` and the bandwidths
follow nccl-tests (docs/results.md, "comm"); the iteration policy is the engine side's
(Note [Comm iteration policy] in suites/comm/comm_bench.h):
  2 warm-up calls (the first checked for the right answer), one timed probe call,
  n = clamp(ceil(target_s / probe), 3, 1000), then 5 repetitions of ceil(n / 5) calls between a
  barrier and the clock; each repetition's per-call mean is the slowest rank's (all_reduce MAX);
  time_s is the median repetition, time_min_s / time_max_s the extremes.
Exit status 1 when a rank failed or the run timed out (the records written before are printed).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_launch  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
# The default sweep (the C++ side passes its own with --sizes): 8 B, then powers of 4 from 16 B
# to 256 MiB.
DEFAULT_SIZES = [8] + [16 * 4 ** k for k in range(13)]
WARMUP, MIN_ITERS, MAX_ITERS, REPS = 2, 3, 1000, 5


def bus_factor(op: str, world: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md there)."""
    if op == "all_reduce":
        return 2.0 * (world - 1) / world
    if op in ("all_gather", "reduce_scatter"):
        return (world - 1) / world
    return 1.0


def elements(op: str, nbytes: int, world: int) -> tuple[int, int]:
    """(elements per rank-chunk, bytes measured): all_gather's output and reduce_scatter's input
    are `world` chunks, so the nominal size rounds down to a multiple of world * 4 bytes, as
    nccl-tests' count / nranks does, but never to zero."""
    if op in ("all_gather", "reduce_scatter"):
        chunk = max(1, nbytes // (4 * world))
        return chunk, chunk * world * 4
    n = max(1, nbytes // 4)
    return n, n * 4


def run_worker(args) -> int:
    torch_launch.die_with_parent()
    torch_launch.pin_to_rank_cpus()  # before torch starts its threads
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.collective_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else DEFAULT_SIZES
    ops = args.ops.split(",")

    def agreed_max(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def timed(call, n: int) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        return agreed_max((time.perf_counter() - t0) / n)

    for op in ops:
        if op not in OPS:
            raise SystemExit(f"unknown op {op!r}; known: {', '.join(OPS)}")
        for nominal in sizes:
            start = time.perf_counter()
            chunk, nbytes = elements(op, nominal, world)
            # Every rank sends rank+1, so the first result is known exactly (small integers are
            # exact in float32); later calls run on zeros (no overflow, no denormals).
            if op == "all_reduce":
                buf = torch.full((chunk,), float(rank + 1))
                call = lambda: dist.all_reduce(buf)  # noqa: E731
                expect = lambda: bool((buf == world * (world + 1) / 2).all())  # noqa: E731
                reset = lambda: buf.zero_()  # noqa: E731
            elif op == "broadcast":
                buf = torch.full((chunk,), float(rank + 1))
                call = lambda: dist.broadcast(buf, src=0)  # noqa: E731
                expect = lambda: bool((buf == 1).all())  # noqa: E731
                reset = lambda: buf.zero_()  # noqa: E731
            elif op == "all_gather":
                inp = torch.full((chunk,), float(rank + 1))
                out = torch.empty(chunk * world)
                call = lambda: dist.all_gather_into_tensor(out, inp)  # noqa: E731
                want = torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(chunk)
                expect = lambda: bool((out == want).all())  # noqa: E731
                reset = lambda: inp.zero_()  # noqa: E731
            else:  # reduce_scatter
                inp = torch.full((chunk * world,), float(rank + 1))
                out = torch.empty(chunk)
                call = lambda: dist.reduce_scatter_tensor(out, inp)  # noqa: E731
                expect = lambda: bool((out == world * (world + 1) / 2).all())  # noqa: E731
                reset = lambda: inp.zero_()  # noqa: E731
            name = f"{op}/float32/{nominal}/w{world}/torch-gloo"
            call()
            ok = agreed_max(0.0 if expect() else 1.0) == 0.0
            reset()
            for _ in range(WARMUP - 1):
                call()
            probe = timed(call, 1)
            iters = min(MAX_ITERS, max(MIN_ITERS, math.ceil(args.target_s / max(probe, 1e-9))))
            per = -(-iters // REPS)
            reps = sorted(timed(call, per) for _ in range(REPS))
            t = reps[REPS // 2]
            algbw = nbytes / t / 1e9
            rec = {
                "suite": "comm", "case": name, "kind": "benchmark",
                "status": "pass" if ok else "fail", "rank": 0,
                "metrics": {"time_s": t, "time_min_s": reps[0], "time_max_s": reps[-1],
                            "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, world),
                            "bytes": nbytes, "world": world, "iterations": per * REPS,
                            "repetitions": REPS, "threads": args.threads},
                "tolerances": {}, "duration_s": time.perf_counter() - start,
                "message": "" if ok else
                f"torch-gloo {op} gave a wrong result on some rank (inputs rank+1, {chunk} "
                "elements per chunk)",
            }
            if rank == 0:
                torch_launch.write_record(args.out, rec)
    dist.destroy_process_group()
    torch_launch.exit_worker(0)  # Note [Worker exit] in torch_launch.py
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    torch_launch.common_arguments(p)
    p.add_argument("--sizes", default="",
                   help="comma-separated message sizes in bytes (default 8 B, 16 B .. 256 MiB "
                        "by powers of 4)")
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated ops (default: all four)")
    p.add_argument("--target-s", type=float, default=0.2,
                   help="seconds of timed calls per size and op (default 0.2)")
    p.add_argument("--collective-timeout", type=float, default=300.0,
                   help="Gloo's timeout for one collective, seconds (default 300)")
    args = p.parse_args(argv)
    if args.worker:
        args.threads = args.threads or torch_launch.rank_threads()
        return run_worker(args)
    forwarded = ["--ops", args.ops, "--target-s", str(args.target_s),
                 "--collective-timeout", str(args.collective_timeout)]
    if args.sizes:
        forwarded += ["--sizes", args.sizes]
    return torch_launch.main_launcher(os.path.abspath(__file__), args, forwarded)


if __name__ == "__main__":
    sys.exit(main())
