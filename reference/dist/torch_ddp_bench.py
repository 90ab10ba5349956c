#!/usr/bin/env python3
"""PyTorch DDP on Gloo training the `ddp` suite's models: the `torch-gloo` peer of the engine's
DDP benchmarks (suites/ddp, records `ddp/<model>/w<world>/engine`).

    <venv>/bin/python reference/dist/torch_ddp_bench.py --world 2 [--models mlp,gpt]
        [--target-s 2] [--threads N] [--launcher torchrun|spawn] [--timeout S]
        [--gradient-as-bucket-view] [--adamw fused|foreach|for-loop]

Models and batches are those of suites/training/training_bench.cpp, the global batch split
across ranks (global // world per rank):
  mlp: Linear(784,1024) ReLU Linear(1024,1024) ReLU Linear(1024,10), global batch 256,
       cross-entropy;
  gpt: the GPT of engine/nn/models.h (vocabulary 1024, d 256, 4 pre-norm blocks of 8 heads,
       T 128, tanh GELU, no dropout, bias-free head), global batch 16 sequences.
Both train with AdamW(lr 1e-3, weight decay 0.01) under DistributedDataParallel with its
defaults (25 MiB buckets, the first 1 MiB; broadcast_buffers), gradient_as_bucket_view as
--gradient-as-bucket-view says (the harness passes it when the engine's side uses it). AdamW
runs as --adamw says: `fused` (default; AdamW(fused=True), one kernel per parameter, as the
engine's AdamW is one pass per parameter), `foreach`, or `for-loop` (PyTorch's own default for
CPU tensors, several ops per parameter: about 5x slower on the MLP). Each step: zero_grad,
forward + loss, backward (DDP's all-reduces overlap it and backward returns once they are
done), step.

Timing: 2 warm-up steps, one probe step, then clamp(ceil(target_s / probe), 3, 50) steps agreed
by all ranks, between barriers. One JSON record per model on stdout, case
`ddp/<model>/w<world>/torch-gloo`, metrics:
  step_ms          the largest per-rank mean step time; samples_per_s = global batch / step
  forward_ms, backward_ms, comm_wait_ms, optimizer_ms   per-step means averaged over ranks:
                   comm_wait_ms is how long the all-reduces ran on after backward's last
                   gradient (DDP's own runtime statistics, Note [DDP's own comm timing]),
                   backward_ms the wall time of loss.backward() less that wait
  comm_busy_ms     first all-reduce start to last all-reduce end, per step
  comm_hidden_fraction   the share of comm_busy_ms that overlapped backward compute
                   (= 1 - comm_wait / comm_busy, as the engine's suites/ddp/ddp_bench.cpp)
  bytes_per_step   gradient bytes each rank all-reduces per step (parameters x 4)
  batch, per_rank_batch, parameters, steps, world, threads, gradient_as_bucket_view (1/0),
  adamw (fused, foreach or for-loop)
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

MODELS = ("mlp", "gpt")
GLOBAL_BATCH = {"mlp": 256, "gpt": 16}
WARMUP, MIN_STEPS, MAX_STEPS = 2, 3, 50
# torch.optim.AdamW's implementations on CPU tensors (`for-loop` is what it picks by default there).
ADAMW_IMPLS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}


def build(name: str, per_rank: int, rank: int):
    """(model, inputs, targets, loss_fn) for one rank; data differ per rank, as DDP's would."""
    import torch
    from torch import nn

    torch.manual_seed(0)  # same initial parameters on every rank (DDP broadcasts rank 0's anyway)
    gen = torch.Generator().manual_seed(1000 + rank)
    if name == "mlp":
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                              nn.Linear(1024, 10))
        x = torch.randn(per_rank, 784, generator=gen)
        y = torch.randint(0, 10, (per_rank,), generator=gen)
        return model, x, y, nn.functional.cross_entropy

    vocab, d, layers, heads, seq = 1024, 256, 4, 8, 128

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                     nn.Linear(4 * d, d))

        def forward(self, x):
            t = x.size(1)
            mask = torch.full((t, t), float("-inf")).triu(1)
            h = self.ln1(x)
            y = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return y + self.mlp(self.ln2(y))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, d)
            self.pos_emb = nn.Embedding(seq, d)
            self.drop = nn.Dropout(0.0)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            t = idx.size(1)
            x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(t)))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    def loss(logits, targets):
        return nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    idx = torch.randint(0, vocab, (per_rank, seq), generator=gen)
    tgt = torch.randint(0, vocab, (per_rank, seq), generator=gen)
    return GPT(), idx, tgt, loss


def run_worker(args) -> int:
    torch_launch.die_with_parent()
    torch_launch.pin_to_rank_cpus()  # before torch starts its threads
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.collective_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()

    def reduce(values, op):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=op)
        return t.tolist()

    for name in args.models.split(","):
        if name not in MODELS:
            raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        start = time.perf_counter()
        per_rank = GLOBAL_BATCH[name] // world
        model, x, y, loss_fn = build(name, per_rank, rank)
        ddp = DDP(model, gradient_as_bucket_view=args.gradient_as_bucket_view)
        opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, weight_decay=0.01, **ADAMW_IMPLS[args.adamw])
        # Note [DDP's own comm timing]: with sample rate 1 DDP's reducer timestamps every
        # iteration (backward compute end, first all-reduce start, last all-reduce end); the next
        # forward publishes them, so step k reads step k-1's. Reading them costs ~0.1 ms.
        ddp._set_ddp_runtime_logging_sample_rate(1)
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        # forward, backward (wall, incl. the all-reduce wait), optimizer, comm wait, comm time,
        # comm overlapped with compute (seconds), comm samples
        acc = [0.0] * 7

        def step(read_comm: bool):
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x), y)
            t1 = time.perf_counter()
            if read_comm:
                d = ddp._get_ddp_logging_data()
                comm = d.get("backward_comm_time", 0) * 1e-9
                overlap = d.get("backward_compute_comm_overlap_time", 0) * 1e-9
                if comm > 0:
                    acc[3] += max(0.0, comm - overlap)
                    acc[4] += comm
                    acc[5] += min(overlap, comm)
                    acc[6] += 1
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            opt.step()
            t4 = time.perf_counter()
            acc[0] += t1 - t0
            acc[1] += t3 - t2
            acc[2] += t4 - t3
            return loss

        def timed(n):
            acc[:] = [0.0] * 7
            dist.barrier()
            t0 = time.perf_counter()
            for i in range(n):
                loss = step(read_comm=i > 0)  # step 0 would read the untimed step before
            per_step = (time.perf_counter() - t0) / n
            return reduce([per_step], dist.ReduceOp.MAX)[0], loss.item()

        for _ in range(WARMUP):
            step(read_comm=False)
        probe, _ = timed(1)
        steps = min(MAX_STEPS, max(MIN_STEPS, math.ceil(args.target_s / max(probe, 1e-9))))
        step_s, last_loss = timed(steps)
        sums = reduce(acc, dist.ReduceOp.SUM)  # over ranks
        fwd, bwd_wall, opt_s = (v / world / steps for v in sums[:3])
        samples = sums[6]  # comm samples over all ranks (steps - 1 per rank)
        wait = sums[3] / samples if samples else 0.0
        hidden = sums[5] / sums[4] if sums[4] > 0 else 1.0
        batch = per_rank * world
        ok = math.isfinite(last_loss)
        metrics = {"samples_per_s": batch / step_s, "step_ms": step_s * 1e3,
                   "forward_ms": fwd * 1e3, "backward_ms": max(0.0, bwd_wall - wait) * 1e3,
                   "comm_wait_ms": wait * 1e3, "optimizer_ms": opt_s * 1e3,
                   "comm_hidden_fraction": hidden,
                   "comm_busy_ms": (sums[4] / samples if samples else 0.0) * 1e3,
                   "bytes_per_step": params * 4, "batch": batch, "per_rank_batch": per_rank,
                   "parameters": params, "steps": steps, "world": world,
                   "threads": args.threads,
                   "gradient_as_bucket_view": 1.0 if args.gradient_as_bucket_view else 0.0,
                   "adamw": args.adamw}
        rec = {
            "suite": "ddp", "case": f"ddp/{name}/w{world}/torch-gloo", "kind": "benchmark",
            "status": "pass" if ok else "fail", "rank": 0,
            "metrics": metrics,
            "tolerances": {}, "duration_s": time.perf_counter() - start,
            "message": "" if ok else f"the loss went non-finite ({last_loss})",
        }
        if rank == 0:
            torch_launch.write_record(args.out, rec)
        del ddp, opt, model
    dist.destroy_process_group()
    torch_launch.exit_worker(0)  # Note [Worker exit] in torch_launch.py
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    torch_launch.common_arguments(p)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated (default mlp,gpt)")
    p.add_argument("--target-s", type=float, default=2.0,
                   help="seconds of timed steps per model (default 2)")
    p.add_argument("--collective-timeout", type=float, default=300.0,
                   help="Gloo's timeout for one collective, seconds (default 300)")
    p.add_argument("--gradient-as-bucket-view", action="store_true",
                   help="DDP(gradient_as_bucket_view=True), as the engine's side runs by default")
    p.add_argument("--adamw", choices=list(ADAMW_IMPLS), default="fused",
                   help="AdamW's implementation (default fused, like the engine's one pass per "
                        "parameter; for-loop is PyTorch's default for CPU tensors)")
    args = p.parse_args(argv)
    if args.worker:
        args.threads = args.threads or torch_launch.rank_threads()
        return run_worker(args)
    forwarded = ["--models", args.models, "--target-s", str(args.target_s),
                 "--collective-timeout", str(args.collective_timeout)]
    if args.gradient_as_bucket_view:
        forwarded.append("--gradient-as-bucket-view")
    forwarded += ["--adamw", args.adamw]
    return torch_launch.main_launcher(os.path.abspath(__file__), args, forwarded)


if __name__ == "__main__":
    sys.exit(main())
