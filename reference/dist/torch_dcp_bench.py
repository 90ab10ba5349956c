#!/usr/bin/env python3
"""torch.distributed.checkpoint on Gloo saving and loading the `dcp` suite's state: the `torch`
peer of the engine's distributed-checkpoint benchmarks (suites/dcp/dcp_bench.cpp, records
`dcp/<model>/w<world>/engine`).

    <venv>/bin/python reference/dist/torch_dcp_bench.py --world 2 --spec SPEC.json [--models gpt]
        [--repetitions 3] [--threads N] [--launcher torchrun|spawn] [--timeout S]

SPEC.json maps each model to its tensors, [{"name": ..., "shape": [...]}, ...], written by the
engine's side (dcp_bench_spec: nn::GPT's parameters with AdamW's exp_avg, exp_avg_sq and step),
so both sides hold the same state. Each tensor with dimensions is a DTensor sharded on dim 0 over
a 1-D CPU mesh (Shard(0): torch.chunk's rows per rank, as the engine's side splits them), filled
with uniform random float32; the 0-dim steps are plain tensors on every rank. dcp.save and
dcp.load use FileSystemWriter/FileSystemReader with their defaults (one thread per rank, fsync).

Timing (Note [DCP bench timing] in suites/dcp/dcp_bench.cpp): --repetitions times, a save into
a fresh directory under a temporary root (removed afterwards), from a barrier to dcp.save's
return, MAX over the ranks; the local shards are zeroed, loaded back with dcp.load (timed the same
way) and compared with the saved values. save_gbps / load_gbps: the state's bytes over the median
repetition. rank<r>_save_gbps: the bytes of that rank's .distcp files over its own save time;
rank<r>_load_gbps: its shards' bytes over its own load time. Then the same number of
dcp.async_save calls, each waited for before the next: async_blocking_ms is the median time until
async_save returned (MAX over ranks), async_blocking_fraction its ratio to the synchronous save.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_launch  # noqa: E402


def rank_rows(n: int, rank: int, world: int) -> tuple[int, int]:
    """torch.chunk's split of n rows: what Shard(0) gives rank `rank`."""
    per = math.ceil(n / world)
    return min(n, per * rank), min(n, per * (rank + 1))


def build_state(spec, mesh, rank: int, world: int):
    import torch
    from torch.distributed.tensor import DTensor, Shard

    gen = torch.Generator().manual_seed(7000 + rank)
    sd, total = {}, 0
    for t in spec:
        shape = list(t["shape"])
        total += math.prod(shape) * 4
        if not shape:
            sd[t["name"]] = torch.ones(())  # AdamW's step, the same on every rank
            continue
        b, e = rank_rows(shape[0], rank, world)
        local = torch.rand([e - b, *shape[1:]], generator=gen)
        stride = torch.empty(shape, device="meta").stride()
        sd[t["name"]] = DTensor.from_local(local, mesh, [Shard(0)], run_check=False,
                                           shape=torch.Size(shape), stride=stride)
    return sd, total


def locals_of(sd):
    from torch.distributed.tensor import DTensor

    return [v.to_local() if isinstance(v, DTensor) else v for v in sd.values()]


def run_case(args, model: str, spec, root: str, reduce):
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh

    start = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    sd, state_bytes = build_state(spec, mesh, rank, world)
    saved = [t.clone() for t in locals_of(sd)]
    local_bytes = sum(t.numel() * t.element_size() for t in saved)

    save_s, load_s, rank_save, rank_load = [], [], [], []
    ok = True
    for r in range(args.repetitions):
        d = os.path.join(root, f"{model}-sync-{r}")
        dist.barrier()
        t0 = time.perf_counter()
        dcp.save(sd, checkpoint_id=d)
        mine = time.perf_counter() - t0
        save_s.append(reduce([mine], dist.ReduceOp.MAX)[0])
        written = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)
                      if f.startswith(f"__{rank}_") and f.endswith(".distcp"))
        rank_save.append(written / mine / 1e9)

        for t in locals_of(sd):
            t.zero_()
        dist.barrier()
        t0 = time.perf_counter()
        dcp.load(sd, checkpoint_id=d)
        mine = time.perf_counter() - t0
        load_s.append(reduce([mine], dist.ReduceOp.MAX)[0])
        rank_load.append(local_bytes / mine / 1e9)
        ok = ok and all(torch.equal(a, b) for a, b in zip(locals_of(sd), saved))
        dist.barrier()
        if rank == 0:
            shutil.rmtree(d, ignore_errors=True)

    blocking, async_total, async_note = [], [], ""
    try:
        for r in range(args.repetitions):
            d = os.path.join(root, f"{model}-async-{r}")
            dist.barrier()
            t0 = time.perf_counter()
            fut = dcp.async_save(sd, checkpoint_id=d)
            blocked = time.perf_counter() - t0
            fut.result()
            total = time.perf_counter() - t0
            blocking.append(reduce([blocked], dist.ReduceOp.MAX)[0])
            async_total.append(reduce([total], dist.ReduceOp.MAX)[0])
    except Exception as e:  # noqa: BLE001 - reported in the record, the sync figures stand
        async_note = f"dcp.async_save failed: {type(e).__name__}: {e}"

    gb = state_bytes / 1e9
    save_med, load_med = statistics.median(save_s), statistics.median(load_s)
    metrics = {"save_gbps": gb / save_med, "save_gbps_min": gb / max(save_s),
               "save_gbps_max": gb / min(save_s),
               "load_gbps": gb / load_med, "load_gbps_min": gb / max(load_s),
               "load_gbps_max": gb / min(load_s),
               "save_ms": save_med * 1e3, "load_ms": load_med * 1e3,
               "state_bytes": state_bytes, "tensors": len(spec),
               "repetitions": args.repetitions, "world": world, "layout": "dtensor/shard0",
               "threads": args.threads}
    if blocking:
        b = statistics.median(blocking)
        metrics.update(async_blocking_ms=b * 1e3, async_blocking_fraction=b / save_med,
                       async_save_ms=statistics.median(async_total) * 1e3)
    per_rank = [0.0] * (4 * world)
    per_rank[4 * rank:4 * rank + 4] = [statistics.median(rank_save), statistics.median(rank_load),
                                       float(written), float(local_bytes)]
    per_rank = reduce(per_rank, dist.ReduceOp.SUM)
    for r in range(world):
        metrics[f"rank{r}_save_gbps"], metrics[f"rank{r}_load_gbps"] = per_rank[4 * r:4 * r + 2]
        metrics[f"rank{r}_bytes_written"], metrics[f"rank{r}_bytes_read"] = per_rank[4 * r + 2:4 * r + 4]
    ok = reduce([1.0 if ok else 0.0], dist.ReduceOp.MIN)[0] == 1.0
    message = "" if ok else "a dcp.load did not give back the saved values"
    if async_note:
        message = "; ".join(m for m in (message, async_note) if m)
    return {
        "suite": "dcp", "case": f"dcp/{model}/w{world}/torch", "kind": "benchmark",
        "status": "pass" if ok else "fail", "rank": 0, "metrics": metrics, "tolerances": {},
        "duration_s": time.perf_counter() - start, "message": message,
    }


def run_worker(args) -> int:
    torch_launch.die_with_parent()
    torch_launch.pin_to_rank_cpus()  # before torch starts its threads
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.collective_timeout))
    rank = dist.get_rank()
    with open(args.spec) as f:
        specs = json.load(f)

    def reduce(values, op):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=op)
        return t.tolist()

    # One temporary root for every rank: rank 0 makes it and tells the others.
    holder = [tempfile.mkdtemp(prefix="tb_torch_dcp_bench_") if rank == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    root = holder[0]
    try:
        for model in args.models.split(","):
            if model not in specs:
                raise SystemExit(f"model {model!r} is not in {args.spec} (has {', '.join(specs)})")
            rec = run_case(args, model, specs[model], root, reduce)
            if rank == 0:
                torch_launch.write_record(args.out, rec)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)
    dist.destroy_process_group()
    torch_launch.exit_worker(0)  # Note [Worker exit] in torch_launch.py
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    torch_launch.common_arguments(p)
    p.add_argument("--spec", required=True, help="JSON: model -> [{name, shape}, ...]")
    p.add_argument("--models", default="gpt", help="comma-separated models of SPEC (default gpt)")
    p.add_argument("--repetitions", type=int, default=3, help="saves and loads timed (default 3)")
    p.add_argument("--collective-timeout", type=float, default=600.0,
                   help="Gloo's timeout for one collective, seconds (default 600)")
    args = p.parse_args(argv)
    if args.worker:
        args.threads = args.threads or torch_launch.rank_threads()
        return run_worker(args)
    forwarded = ["--spec", os.path.abspath(args.spec), "--models", args.models,
                 "--repetitions", str(args.repetitions),
                 "--collective-timeout", str(args.collective_timeout)]
    return torch_launch.main_launcher(os.path.abspath(__file__), args, forwarded)


if __name__ == "__main__":
    sys.exit(main())
