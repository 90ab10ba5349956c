#!/usr/bin/env python3
"""Converts a checkpoint saved by PyTorch's torch.distributed.checkpoint (dcp.save) into one
safetensors file in trainbench's layout, which checkpoint::load_distributed loads on any world
size and `trainbench checkpoint inspect` shows (docs/checkpoint.md, "From PyTorch").

    <venv>/bin/python reference/dist/torch_dcp_convert.py convert DCP_DIR OUT.safetensors
    <venv>/bin/python reference/dist/torch_dcp_convert.py make DCP_DIR VALUES.safetensors [--world 2]

convert: reads every tensor of DCP_DIR whole (torch.distributed.checkpoint's loader without a
process group, into an empty state dict, as torch's own format_utils.dcp_to_torch_save does) and writes them under
trainbench's names (engine/train/distributed_checkpoint.h):
    model.<fqn>                   ->  model.<fqn>
    optim.state.<fqn>.<key>       ->  optim.<fqn>.<key>      (exp_avg, exp_avg_sq, step, ...)
    any other tensor at a.b.c     ->  a.b.c
Everything that is not a tensor (the optimizer's param_groups, a step counter) goes, as JSON, into
the file's "trainbench.state" metadata: {"step": <"step" of the checkpoint if an integer, else 0>,
"world_size": <the ranks that saved it, from the .distcp file names>,
"layout": "torch.distributed.checkpoint", "state": {"torch": {<non-tensor values by dotted path>}}}.
The optimizer's groups keep PyTorch's form (parameters named by fqn); they are recorded, not
translated. dtypes: float32/64, float16, bfloat16, int32/64 and bool; others are refused. No
checksums are written (the safetensors layout has none; trainbench's loader accepts files without).

make: a PyTorch checkpoint to convert, for the interop test: `--world` ranks (torch.multiprocessing,
Gloo) build the same MLP (Linear 16-32, ReLU, Linear 32-32, ReLU, Linear 32-5, seed 0: the
fqns of the engine's nn::MLP(16, 32, 5)), shard it with FSDP2 (fully_shard on each Linear and the
root), take one AdamW step (lr 1e-2) on each rank's own batch, and dcp.save the model and optimizer
state dicts (torch.distributed.checkpoint.state_dict.get_state_dict) into DCP_DIR. Rank 0 also
writes VALUES.safetensors, from the live model (each DTensor's full_tensor(), not through DCP's
files), under trainbench's names: what a correct conversion must reproduce bit for bit.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys

DTYPES = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16",
          "int64": "I64", "int32": "I32", "bool": "BOOL"}


def write_safetensors(path: str, tensors: dict, metadata: dict[str, str]) -> None:
    """The safetensors layout (engine/checkpoint/safetensors.h, Note [File format]): 8-byte
    little-endian header length, the JSON header padded with spaces to a multiple of 8, then
    each tensor's bytes, row-major, in name order. Written to a temporary file and renamed."""
    import torch

    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        kind = str(t.dtype).removeprefix("torch.")
        if kind not in DTYPES:
            raise SystemExit(f"{name}: dtype {kind} has no safetensors name here ({', '.join(DTYPES)})")
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPES[kind], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def trainbench_name(path: list[str]) -> str:
    if len(path) >= 3 and path[0] == "optim" and path[1] == "state":
        return "optim." + ".".join(path[2:])
    return ".".join(path)


def flatten(obj, path, tensors: dict, rest: dict) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        name = trainbench_name(path)
        if name in tensors:
            raise SystemExit(f"two tensors map to the name {name!r}")
        tensors[name] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, path + [str(k)], tensors, rest)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, (dict, torch.Tensor)) for v in obj):
        for i, v in enumerate(obj):
            flatten(v, path + [str(i)], tensors, rest)
    else:
        rest[".".join(path)] = obj


def convert(dcp_dir: str, out: str) -> int:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    if not os.path.isfile(os.path.join(dcp_dir, ".metadata")):
        print(f"torch_dcp_convert: {dcp_dir} is not a torch.distributed.checkpoint directory "
              "(no .metadata file)", file=sys.stderr)
        return 2
    state: dict = {}
    # No process group: every chunk is read in this process, into a state dict the planner builds
    # from the checkpoint's metadata (what torch's format_utils.dcp_to_torch_save does).
    _load_state_dict(state, storage_reader=FileSystemReader(dcp_dir), planner=_EmptyStateDictLoadPlanner(),
                     no_dist=True)
    tensors, rest = {}, {}
    flatten(state, [], tensors, rest)
    step = rest.get("step", 0)
    # The ranks that saved it, from FileSystemWriter's file names (__<rank>_<n>.distcp).
    ranks = {f.split("_")[2] for f in os.listdir(dcp_dir) if f.startswith("__") and f.endswith(".distcp")}
    meta = {"step": step if isinstance(step, int) else 0, "layout": "torch.distributed.checkpoint",
            "world_size": len(ranks), "state": {"torch": rest}}
    write_safetensors(out, tensors, {"trainbench.state": json.dumps(meta, default=str)})
    print(f"converted {len(tensors)} tensors from {dcp_dir} into {out}")
    return 0


def make_worker(rank: int, world: int, store: str, dcp_dir: str, values: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    # Rendezvous through a file, not a TCP port: a port picked free here can be taken by another
    # program (ctest runs tests side by side) before rank 0 listens on it, and rank 1 then talks
    # to that program and aborts.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, 5))
    mesh = init_device_mesh("cpu", (world,))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(8, 16, generator=gen), torch.randint(0, 5, (8,), generator=gen)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=dcp_dir)

    # The live values, gathered whole (a collective: every rank takes part).
    def full(t):
        return t.full_tensor() if isinstance(t, DTensor) else t

    expected = {f"model.{k}": full(v) for k, v in msd.items()}
    for fqn, s in osd["state"].items():
        for k, v in s.items():
            if torch.is_tensor(v):
                expected[f"optim.{fqn}.{k}"] = full(v)
    if rank == 0:
        write_safetensors(values, expected, {"source": "torch_dcp_convert.py make: live values"})
    dist.barrier()
    dist.destroy_process_group()


def make(dcp_dir: str, values: str, world: int) -> int:
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="tb_dcp_make_") as tmp:
        mp.start_processes(make_worker, args=(world, os.path.join(tmp, "store"), dcp_dir, values),
                           nprocs=world, start_method="spawn")
    print(f"saved a {world}-rank torch.distributed.checkpoint into {dcp_dir}, live values in {values}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("convert", help="a dcp.save directory -> one trainbench safetensors file")
    c.add_argument("dcp_dir")
    c.add_argument("out")
    m = sub.add_parser("make", help="save a test checkpoint from --world ranks (Gloo)")
    m.add_argument("dcp_dir")
    m.add_argument("values", help="safetensors file of the live values, trainbench's names")
    m.add_argument("--world", type=int, default=2)
    args = p.parse_args(argv)
    if args.mode == "convert":
        return convert(args.dcp_dir, args.out)
    return make(args.dcp_dir, args.values, args.world)


if __name__ == "__main__":
    sys.exit(main())
