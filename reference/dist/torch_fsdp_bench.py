#!/usr/bin/env python3
"""PyTorch FSDP2 (torch.distributed.fsdp.fully_shard) on Gloo training the `fsdp` suite's models:
the `torch` peer of the engine's FSDP benchmarks (suites/fsdp, records
`fsdp/<model>/<strategy>/w<world>/engine`).

    <venv>/bin/python reference/dist/torch_fsdp_bench.py --world 2 [--models mlp,gpt]
        [--strategies full_shard,shard_grad_op,no_shard,hybrid_shard] [--target-s 2]
        [--threads N] [--launcher torchrun|spawn] [--timeout S]

Models, batches and data are torch_ddp_bench.py's (the ddp suite's): the MLP 784-1024-1024-10
at global batch 256 and the GPT (vocabulary 1024, d 256, 4 blocks, T 128) at 16 sequences, the
global batch split across ranks. fully_shard is applied as the engine's side does: to each
nn.Linear of the MLP (each Block of the GPT), then to the root. Strategies, in FSDP2's terms:
  full_shard     fully_shard(mesh=1-D world mesh, reshard_after_forward=True)
  shard_grad_op  reshard_after_forward=False (the gathered parameters stay until backward)
  no_shard       a 2-D mesh (replicate=world, shard=1): FSDP2's HSDP with shards of one rank,
                 i.e. every rank holds whole parameters and gradients are all-reduced (FSDP2 has
                 no NO_SHARD; this is how its own `replicate` is built, and it runs on CPU)
  hybrid_shard   a 2-D mesh (replicate=world/2, shard=2), reshard_after_forward=True: shards
                 within rank pairs {0,1}, {2,3}, as the engine's shard_group_size 2
AdamW(lr 1e-3, weight decay 0.01, fused=True) steps the shards (as the DDP peer's default).
Each step: zero_grad, forward + loss, backward, step.

Timing: Note [FSDP bench timing] in suites/fsdp/fsdp_bench.cpp: 2 warm-up steps, one probe step,
then 5 repetitions of max(1, ceil(n / 5)) steps, n = clamp(ceil(target_s / probe), 3, 50), each
between a barrier and the clock, reduced with MAX over ranks; the median repetition gives
step_ms and samples_per_s, the extremes _min/_max. cpu_ms and main_thread_cpu_ms: CPU time per
step of the process (every thread: compute, Gloo's) and of the training thread, averaged over
ranks, as the engine's records give them (steadier than wall time on a loaded machine).

Communication is counted by wrapping the collectives FSDP2 calls (dist.all_gather_into_tensor,
dist.reduce_scatter_tensor, dist.all_reduce) during the timed steps: bytes_per_step counts the
all-gathers' outputs, the reduce-scatters' inputs and the all-reduces' buffers (as the engine's
FSDPStats::bytes), comm_wait_ms the time the training thread spent inside a synchronous call or
waiting on an asynchronous all-gather's Work (foreach_all_gather_copy_out); on CPU FSDP2 issues
its collectives synchronously (it overlaps through CUDA streams, which CPU tensors lack), so
this is the whole of their time. comm_busy_ms and comm_hidden_fraction are not given: Gloo's
worker time for an asynchronous call is not observable from Python.

Memory (Note [FSDP bench memory]): one extra step after the timed ones samples, before forward,
at each unit's forward start (after FSDP2's pre-forward hook gathered it), after forward, after
backward and after the optimizer step: peak_parameter_bytes (every rank's shards, plus the
whole parameters registered at that moment, i.e. gathered), peak_gradient_bytes (the shards'
gradients), peak_optimizer_state_bytes (AdamW's state tensors), and peak_rss_bytes (the resident
set, /proc/self/statm). Activations and communication buffers are not observable on CPU
(torch.cuda's memory statistics have no CPU counterpart) and are not given. Each figure is the
largest over the ranks.
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
from torch_ddp_bench import GLOBAL_BATCH, MODELS, build  # noqa: E402

STRATEGIES = ("full_shard", "shard_grad_op", "no_shard", "hybrid_shard")
WARMUP, MIN_STEPS, MAX_STEPS, REPETITIONS = 2, 3, 50, 5


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class CommCounter:
    """Bytes and blocking time of the collectives FSDP2 issues while `on`."""

    def __init__(self):
        import torch.distributed as dist
        from torch.distributed.fsdp._fully_shard import _fsdp_param_group as pg

        self.on = False
        self.bytes = 0
        self.wait_s = 0.0
        self.calls = {"all_gather": 0, "reduce_scatter": 0, "all_reduce": 0}

        def wrap(fn, kind, tensor_of):
            def call(*args, **kwargs):
                if not self.on:
                    return fn(*args, **kwargs)
                t = tensor_of(args, kwargs)
                self.bytes += t.numel() * t.element_size()
                self.calls[kind] += 1
                t0 = time.perf_counter()
                out = fn(*args, **kwargs)
                if not kwargs.get("async_op", False):
                    self.wait_s += time.perf_counter() - t0
                return out
            return call

        def arg(args, kwargs, i, *names):
            if len(args) > i:
                return args[i]
            for n in names:
                if n in kwargs:
                    return kwargs[n]
            raise TypeError(f"collective called without its tensor ({names})")

        dist.all_gather_into_tensor = wrap(dist.all_gather_into_tensor, "all_gather",
                                           lambda a, k: arg(a, k, 0, "output_tensor"))
        dist.reduce_scatter_tensor = wrap(dist.reduce_scatter_tensor, "reduce_scatter",
                                          lambda a, k: arg(a, k, 1, "input"))
        dist.all_reduce = wrap(dist.all_reduce, "all_reduce", lambda a, k: arg(a, k, 0, "tensor"))
        copy_out = pg.foreach_all_gather_copy_out

        def timed_copy_out(result, *args, **kwargs):
            work = result.all_gather_work
            if self.on and isinstance(work, dist.distributed_c10d.Work):
                t0 = time.perf_counter()
                work.wait()  # copy_out's own wait() then returns at once
                self.wait_s += time.perf_counter() - t0
            return copy_out(result, *args, **kwargs)

        pg.foreach_all_gather_copy_out = timed_copy_out

    def reset(self):
        self.bytes, self.wait_s = 0, 0.0
        self.calls = dict.fromkeys(self.calls, 0)


def shard(model, name: str, strategy: str, world: int):
    """fully_shard on the units, then the root, as the engine's side does."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if strategy in ("full_shard", "shard_grad_op"):
        mesh = init_device_mesh("cpu", (world,))
    elif strategy == "no_shard":
        mesh = init_device_mesh("cpu", (world, 1), mesh_dim_names=("replicate", "shard"))
    else:
        if world % 2:
            raise SystemExit(f"hybrid_shard needs an even world (shard groups of 2), got {world}")
        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("replicate", "shard"))
    reshard = strategy != "shard_grad_op"
    unit_type = torch.nn.Linear if name == "mlp" else None
    units = [m for m in model.modules()
             if (isinstance(m, unit_type) if unit_type else type(m).__name__ == "Block")]
    for m in units:
        fully_shard(m, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return units


def local_bytes(t) -> int:
    from torch.distributed.tensor import DTensor

    if isinstance(t, DTensor):
        t = t.to_local()
    return t.numel() * t.element_size()


def run_case(args, name: str, strategy: str, comm: CommCounter, reduce):
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    start = time.perf_counter()
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = GLOBAL_BATCH[name] // world
    model, x, y, loss_fn = build(name, per_rank, rank)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    units = shard(model, name, strategy, world)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    shard_bytes = sum(local_bytes(p) for p in model.parameters())
    # forward, backward, optimizer, wait in forward, wait in backward, steps, CPU s, main thread CPU s
    acc = [0.0] * 8
    sampler = {"on": False, "param": 0, "grad": 0, "opt": 0, "rss": 0}

    def sample():
        if not sampler["on"]:
            return
        gathered = sum(p.numel() * p.element_size() for p in model.parameters()
                       if not isinstance(p, DTensor))
        grads = sum(local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
        state = sum(local_bytes(v) for s in opt.state.values() for v in s.values()
                    if torch.is_tensor(v))
        for k, v in (("param", shard_bytes + gathered), ("grad", grads), ("opt", state),
                     ("rss", rss_bytes())):
            sampler[k] = max(sampler[k], v)

    def step():
        t0 = time.perf_counter()
        w0 = comm.wait_s
        opt.zero_grad(set_to_none=True)
        sample()
        loss = loss_fn(model(x), y)
        sample()
        t1 = time.perf_counter()
        w1 = comm.wait_s
        loss.backward()
        t2 = time.perf_counter()
        w2 = comm.wait_s
        sample()
        opt.step()
        t3 = time.perf_counter()
        sample()
        acc[0] += t1 - t0 - (w1 - w0)
        acc[1] += t2 - t1 - (w2 - w1)
        acc[2] += t3 - t2
        acc[3] += w1 - w0
        acc[4] += w2 - w1
        acc[5] += 1
        return loss

    def timed(n):
        dist.barrier()
        comm.on = True
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        for _ in range(n):
            loss = step()
        per_step = (time.perf_counter() - t0) / n
        acc[6] += time.process_time() - c0
        acc[7] += time.thread_time() - m0
        comm.on = False
        return reduce([per_step], dist.ReduceOp.MAX)[0], loss.item()

    for _ in range(WARMUP):
        step()
    probe, _ = timed(1)
    n = min(MAX_STEPS, max(MIN_STEPS, math.ceil(args.target_s / max(probe, 1e-9))))
    per_rep = max(1, math.ceil(n / REPETITIONS))
    acc[:] = [0.0] * 8
    comm.reset()
    reps = []
    for _ in range(REPETITIONS):
        s, last_loss = timed(per_rep)
        reps.append(s)
    steps = acc[5]
    step_bytes, calls = comm.bytes / steps, {k: v / steps for k, v in comm.calls.items()}

    # The memory step (Note [FSDP bench memory]): samples at each unit's forward start too.
    hooks = [m.register_forward_pre_hook(lambda *_: sample()) for m in units]
    dist.barrier()
    sampler["on"] = True
    step()
    sampler["on"] = False
    for h in hooks:
        h.remove()

    sums = reduce(acc[:5] + acc[6:], dist.ReduceOp.SUM)
    fwd, bwd, opt_s, wait_f, wait_b, cpu, main_cpu = (v / world / steps for v in sums)
    peaks = reduce([sampler["param"], sampler["grad"], sampler["opt"], sampler["rss"]],
                   dist.ReduceOp.MAX)
    reps_sorted = sorted(reps)
    step_s = (reps_sorted[len(reps) // 2] if len(reps) % 2
              else 0.5 * (reps_sorted[len(reps) // 2 - 1] + reps_sorted[len(reps) // 2]))
    batch = per_rank * world
    wait = wait_f + wait_b
    ok = math.isfinite(last_loss)
    metrics = {"samples_per_s": batch / step_s, "samples_per_s_min": batch / max(reps),
               "samples_per_s_max": batch / min(reps),
               "step_ms": step_s * 1e3, "step_min_ms": min(reps) * 1e3,
               "step_max_ms": max(reps) * 1e3,
               "forward_ms": fwd * 1e3, "backward_ms": bwd * 1e3, "comm_wait_ms": wait * 1e3,
               "comm_wait_forward_ms": wait_f * 1e3, "comm_wait_backward_ms": wait_b * 1e3,
               "optimizer_ms": opt_s * 1e3, "comm_exposed_fraction": wait / step_s,
               "cpu_ms": cpu * 1e3, "main_thread_cpu_ms": main_cpu * 1e3,
               "bytes_per_step": step_bytes, "all_gathers": calls["all_gather"],
               "reduce_scatters": calls["reduce_scatter"], "all_reduces": calls["all_reduce"],
               "peak_parameter_bytes": peaks[0], "peak_gradient_bytes": peaks[1],
               "peak_optimizer_state_bytes": peaks[2], "peak_rss_bytes": peaks[3],
               "batch": batch, "per_rank_batch": per_rank, "parameters": params,
               "repetitions": REPETITIONS, "steps_per_repetition": per_rep,
               "steps": REPETITIONS * per_rep, "world": world, "threads": args.threads,
               "units": len(units) + 1, "strategy": strategy, "adamw": "fused"}
    if strategy == "hybrid_shard":
        metrics["shard_group_size"] = 2
    rec = {
        "suite": "fsdp", "case": f"fsdp/{name}/{strategy}/w{world}/torch", "kind": "benchmark",
        "status": "pass" if ok else "fail", "rank": 0, "metrics": metrics, "tolerances": {},
        "duration_s": time.perf_counter() - start,
        "message": "" if ok else f"the loss went non-finite ({last_loss})",
    }
    if strategy == "no_shard":
        rec["message"] = ("no_shard as FSDP2's 2-D mesh (replicate=world, shard=1): FSDP2 has no "
                          "NO_SHARD") + ("" if ok else "; " + rec["message"])
    del opt, model
    return rec


def run_worker(args) -> int:
    torch_launch.die_with_parent()
    torch_launch.pin_to_rank_cpus()  # before torch starts its threads
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.collective_timeout))
    rank = dist.get_rank()
    comm = CommCounter()

    def reduce(values, op):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=op)  # comm.on is False here: not counted
        return t.tolist()

    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        for strategy in args.strategies.split(","):
            if strategy not in STRATEGIES:
                raise SystemExit(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
            rec = run_case(args, name, strategy, comm, reduce)
            if rank == 0:
                torch_launch.write_record(args.out, rec)
    dist.destroy_process_group()
    torch_launch.exit_worker(0)  # Note [Worker exit] in torch_launch.py
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    torch_launch.common_arguments(p)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated (default mlp,gpt)")
    p.add_argument("--strategies", default="full_shard,shard_grad_op,no_shard",
                   help="comma-separated, of " + ", ".join(STRATEGIES)
                        + " (default the first three; hybrid_shard needs an even world)")
    p.add_argument("--target-s", type=float, default=2.0,
                   help="seconds of timed steps per case (default 2)")
    p.add_argument("--collective-timeout", type=float, default=300.0,
                   help="Gloo's timeout for one collective, seconds (default 300)")
    args = p.parse_args(argv)
    if args.worker:
        args.threads = args.threads or torch_launch.rank_threads()
        return run_worker(args)
    forwarded = ["--models", args.models, "--strategies", args.strategies,
                 "--target-s", str(args.target_s),
                 "--collective-timeout", str(args.collective_timeout)]
    return torch_launch.main_launcher(os.path.abspath(__file__), args, forwarded)


if __name__ == "__main__":
    sys.exit(main())
