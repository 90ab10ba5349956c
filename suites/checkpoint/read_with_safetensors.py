#!/usr/bin/env python3
"""Reads a safetensors file with the `safetensors` package itself (Hugging Face's reader, from
PyPI, pinned in ci/requirements-extra.txt), for the interop checks: a file we write must open in
the reader the rest of the ecosystem uses, not only in our own.

  read_with_safetensors.py FILE -> JSON on stdout: {"tensors": {name: {"dtype", "shape", "hex"}},
                                   "metadata": {...}} (dtype as the format names it: F32, BF16, ...;
                                   hex: the tensor's little-endian bytes)
Exits non-zero with a message on stderr when the package refuses the file.
"""
import json
import sys

import torch
from safetensors import safe_open

FORMAT_NAME = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}


def main(argv):
    if len(argv) != 2:
        print("usage: read_with_safetensors.py FILE", file=sys.stderr)
        return 2
    out = {"tensors": {}}
    # framework "pt": numpy has no bfloat16, and torch is in the venv anyway.
    with safe_open(argv[1], framework="pt") as f:
        out["metadata"] = f.metadata() or {}
        for name in f.keys():
            t = f.get_tensor(name).contiguous()
            raw = t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
            out["tensors"][name] = {"dtype": FORMAT_NAME.get(t.dtype, str(t.dtype)), "shape": list(t.shape),
                                    "hex": raw.numpy().tobytes().hex()}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # the package's own error, e.g. a header it refuses
        print(f"read_with_safetensors.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
