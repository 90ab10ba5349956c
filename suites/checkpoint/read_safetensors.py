#!/usr/bin/env python3
"""An independent reader and writer of the safetensors layout, for the checkpoint suite.

Written from the format description alone (json + struct + numpy; neither the `safetensors`
package nor trainbench code), so a file that passes through it and the engine both ways is
readable by third parties, not merely by ourselves.

  read_safetensors.py read FILE    -> JSON on stdout: per tensor dtype, shape, the raw bytes (hex),
                                      XXH64 of the bytes (computed here, in pure Python) and the
                                      checksum the file stores; plus the user metadata
  read_safetensors.py write FILE   -> writes a file of every dtype (0-dim and zero-size included),
                                      header keys sorted, no checksums, no padding; prints the
                                      bytes written per tensor as JSON
Exits non-zero with a message on stderr when the file breaks the format.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {  # format name -> (numpy dtype of the raw little-endian elements, itemsize)
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "I32": ("<i4", 4), "BOOL": ("u1", 1),
}

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    acc = (acc + lane * P2) & M64
    return (_rotl(acc, 31) * P1) & M64


def _merge(acc, val):
    acc ^= _round(0, val)
    return (acc * P1 + P4) & M64


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 from its specification (github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for k in range(4):
                v[k] = _round(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for k in range(4):
            h = _merge(h, v[k])
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * P1) & M64
        h = (_rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (_rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def _finite_or_none(x):
    return x if np.isfinite(x) else None  # JSON has no NaN/inf


def die(msg):
    print(f"read_safetensors.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        die("file shorter than 8 bytes")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if n > len(raw) - 8:
        die(f"header length {n} past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    ranges, out = [], {}
    for name, info in header.items():
        np_dtype, size = DTYPES[info["dtype"]]
        shape = [int(d) for d in info["shape"]]
        begin, end = info["data_offsets"]
        numel = int(np.prod(shape)) if shape else 1
        if end - begin != numel * size or end > len(data):
            die(f"tensor {name}: offsets {begin, end} do not fit shape {shape} x {size}")
        ranges.append((begin, end))
        arr = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape)
        if info["dtype"] == "BF16":  # no numpy bfloat16: widen the bits to float32 for the sum
            values = (arr.astype("<u4") << 16).view("<f4")
        else:
            values = arr
        out[name] = {
            "dtype": info["dtype"],
            "shape": shape,
            "hex": data[begin:end].hex(),
            "xxh64": f"{xxh64(data[begin:end]):016x}",
            "stored_checksum": meta.get("checksum." + name),
            "sum": _finite_or_none(float(np.sum(values.astype(np.float64)))),
        }
    pos = 0
    for begin, end in sorted(ranges):
        if begin != pos:
            die(f"data section not tiled: range starting at {begin}, expected {pos}")
        pos = end
    if pos != len(data):
        die(f"{len(data) - pos} bytes after the last tensor")
    user_meta = {k: v for k, v in meta.items() if not k.startswith("checksum.")}
    print(json.dumps({"header_len": n, "data_start": 8 + n, "metadata": user_meta, "tensors": out}))


def write(path):
    rng = np.random.default_rng(1234)
    f32 = rng.standard_normal(12).astype("<f4")
    tensors = {
        "f64": rng.standard_normal((3, 2)).astype("<f8"),
        "f32": f32.reshape(3, 4),
        "f16": rng.standard_normal(5).astype("<f2"),
        "bf16": (rng.standard_normal((2, 3)).astype("<f4").view("<u4") >> 16).astype("<u2"),  # truncated bf16 bits
        "i64": rng.integers(-2**62, 2**62, size=(4,), dtype="<i8"),
        "i32": rng.integers(-2**31, 2**31 - 1, size=(2, 2), dtype="<i4"),
        "bool": (rng.integers(0, 2, size=(7,)) == 1).astype("u1"),
        "scalar": np.array(3.25, dtype="<f4"),
        "empty": np.zeros((0, 3), dtype="<f4"),
    }
    kinds = {"f64": "F64", "f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64", "i32": "I32",
             "bool": "BOOL", "scalar": "F32", "empty": "F32"}
    header, blobs, pos = {"__metadata__": {"writer": "numpy"}}, [], 0
    for name in sorted(tensors):  # sorted by name, not in the order above
        b = tensors[name].tobytes()
        header[name] = {"dtype": kinds[name], "shape": list(tensors[name].shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print(json.dumps({name: {"dtype": kinds[name], "shape": list(t.shape), "hex": t.tobytes().hex()}
                      for name, t in tensors.items()}))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "write"):
        die("usage: read_safetensors.py read|write FILE")
    (read if sys.argv[1] == "read" else write)(sys.argv[2])
