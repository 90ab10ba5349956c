"""Starts the ranks of a PyTorch-distributed peer benchmark and never waits forever.

Used by torch_comm_bench.py and torch_ddp_bench.py (same folder): `launch(script, world, args)`
runs `script --worker args...` in `world` ranks, through torchrun (the project venv's
`torch.distributed.run --standalone`) or, with launcher="spawn", by setting MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK itself (the fallback for a torchrun that does not
start: Debian's 1.13 did not). Rank 0 appends its JSON records to a file; launch() returns them.

Note [Peer timeouts]
Nothing here may hang the harness. The launcher kills what it started after `timeout` seconds
(SIGTERM to its process group, SIGKILL 5 s later). torchrun puts each worker in a session of its
own, out of reach of a process-group kill, so torchrun and every worker ask the kernel for
SIGKILL when their parent dies (prctl PR_SET_PDEATHSIG, `die_with_parent`): killing the
launcher, as the C++ peer does on its own timeout, takes torchrun and the workers with it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent exits (Linux); see Note [Peer timeouts]."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def parse_rank_cpus(value: str, world: int) -> list[list[int]]:
    """TRAINBENCH_RANK_CPUS: one CPU list per rank ("0-1,4;2-3"), as engine/dist/placement.cpp
    parses it: exactly `world` lists of CPUs and ascending ranges, no CPU twice. ValueError else."""
    lists = value.split(";")
    if len(lists) != world:
        raise ValueError(f"TRAINBENCH_RANK_CPUS={value!r}: {len(lists)} CPU list(s) for a world of {world}")
    seen: set[int] = set()
    out = []
    for lst in lists:
        cpus = []
        for piece in lst.split(","):
            lo, _, hi = piece.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()) or (_ and not hi):
                raise ValueError(f"TRAINBENCH_RANK_CPUS={value!r}: {piece!r} is not a CPU or a range")
            a, b = int(lo), int(hi or lo)
            if b < a or b > 1023:
                raise ValueError(f"TRAINBENCH_RANK_CPUS={value!r}: {piece!r} is not a range in [0, 1023]")
            for c in range(a, b + 1):
                if c in seen:
                    raise ValueError(f"TRAINBENCH_RANK_CPUS={value!r}: CPU {c} given twice")
                seen.add(c)
                cpus.append(c)
        out.append(cpus)
    return out


def pin_to_rank_cpus() -> list[int] | None:
    """Pins every thread of this worker to its rank's CPUs when the launcher gave the ranks cores
    of their own (TRAINBENCH_RANK_CPUS, Note [A core of its own] in engine/dist/placement.cpp),
    as the engine's ranks pin themselves; threads started later inherit the mask. Returns the
    CPUs, or None when the variable is unset."""
    value = os.environ.get("TRAINBENCH_RANK_CPUS", "")
    if not value:
        return None
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if not 0 <= rank < world:
        raise ValueError(f"TRAINBENCH_RANK_CPUS: RANK {rank} is outside a world of {world}")
    cpus = parse_rank_cpus(value, world)[rank]
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a thread that just ended
            pass
    return cpus


def exit_worker(code: int = 0) -> None:
    """Ends a worker after destroy_process_group without the interpreter's teardown.

    Note [Worker exit]: with torch 2.11, a DDP-on-Gloo worker that has destroyed its process
    group and returns normally aborts now and then ("terminate called without an active
    exception", SIGABRT: a C++ thread object still joinable in a static destructor; 1 run in
    ~8 here). The records are written by then, but the launcher would see a failed rank; so the
    workers flush and _exit instead."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _child_setup() -> None:
    # A process group of its own (so the launcher can kill torchrun and what it forks in one
    # call) that still dies with the launcher.
    os.setsid()
    die_with_parent()


def rank_threads(default: int = 1) -> int:
    """Threads per rank: TRAINBENCH_RANK_THREADS (set by the trainbench launcher), else default."""
    v = os.environ.get("TRAINBENCH_RANK_THREADS", "")
    try:
        return max(1, int(v)) if v else default
    except ValueError:
        return default


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(p: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            pass


def _wait_all(procs, deadline):
    """Waits for every process until `deadline`; returns (exit codes, timed_out). As soon as one
    rank fails the others are stopped (they would block in a collective until their timeout)."""
    codes = [None] * len(procs)
    while True:
        for i, p in enumerate(procs):
            if codes[i] is None:
                codes[i] = p.poll()
        if all(c is not None for c in codes):
            return codes, False
        if any(c not in (None, 0) for c in codes):
            for p in procs:
                if p.poll() is None:
                    _kill_group(p)
            return [p.poll() for p in procs], False
        if time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    _kill_group(p)
            return [p.poll() for p in procs], True
        time.sleep(0.05)


def launch(script: str, world: int, args: list[str], threads: int, timeout: float,
           launcher: str = "torchrun"):
    """Runs `world` ranks of `script --worker --out FILE args...`.

    Returns (records, ok, diagnosis): the JSON records rank 0 wrote (those written before a
    failure too), whether every rank exited 0 in time, and the tail of the ranks' output when not.
    """
    with tempfile.TemporaryDirectory(prefix="tb_torch_peer_") as tmp:
        out = Path(tmp) / "records.jsonl"
        log = Path(tmp) / "ranks.log"
        env = dict(os.environ)
        # Each rank computes with `threads` threads, as the engine's ranks do.
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
        env["TRAINBENCH_RANK_THREADS"] = str(threads)
        env["PYTHONUNBUFFERED"] = "1"
        worker = [script, "--worker", "--out", str(out), "--threads", str(threads), *args]
        deadline = time.monotonic() + timeout
        with open(log, "w") as logf:
            if launcher == "torchrun":
                cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       "--nproc-per-node", str(world), "--max-restarts", "0", *worker]
                procs = [subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                          preexec_fn=_child_setup)]
            elif launcher == "spawn":
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
                           WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
                procs = []
                for r in range(world):
                    env_r = dict(env, RANK=str(r), LOCAL_RANK=str(r))
                    procs.append(subprocess.Popen([sys.executable, *worker], env=env_r,
                                                  stdout=logf, stderr=subprocess.STDOUT,
                                                  preexec_fn=_child_setup))
            else:
                raise ValueError(f"unknown launcher {launcher!r} (torchrun or spawn)")
            try:
                codes, timed_out = _wait_all(procs, deadline)
            except BaseException:
                for p in procs:
                    _kill_group(p)
                raise
        records = []
        if out.exists():
            for line in out.read_text().splitlines():
                if line.strip():
                    records.append(json.loads(line))
        ok = not timed_out and all(c == 0 for c in codes)
        diagnosis = ""
        if not ok:
            how = (f"timed out after {timeout:g} s" if timed_out
                   else f"exit codes {codes}")
            summary = f"{launcher} with {world} ranks failed ({how})"
            # The summary last too: readers of the tail (the C++ peer) keep its last lines.
            diagnosis = (f"{summary}; last lines of the ranks and {launcher}:\n"
                         + "\n".join(_tail(log.read_text(errors="replace"), 30)) + f"\n{summary}")
        return records, ok, diagnosis


_LAUNCHER_FRAME = re.compile(r'^\s+File ".*/torch/distributed/(elastic|launcher|run\.py)')


def _tail(text: str, n: int) -> list[str]:
    """The last n lines of the ranks' log without torchrun's own traceback frames (which say
    only that torchrun was signalled) and its banner."""
    out, skipping = [], False
    for line in text.splitlines():
        if _LAUNCHER_FRAME.match(line):
            skipping = True
            continue
        if skipping and line.startswith("    "):  # the frame's code line and its ^^^ marks
            continue
        skipping = False
        if line.startswith("W") and ("*****" in line or "OMP_NUM_THREADS" in line
                                     or line.rstrip().endswith("]")):
            continue
        out.append(line)
    return out[-n:]


def write_record(path: str | None, rec: dict) -> None:
    """Appends one record (rank 0 only) and flushes: records survive a later failure."""
    line = json.dumps(rec)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    else:
        print(line, flush=True)


def common_arguments(p) -> None:
    p.add_argument("--world", type=int, default=2, help="ranks to launch (default 2)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads per rank (default: TRAINBENCH_RANK_THREADS, else 1)")
    p.add_argument("--launcher", choices=("torchrun", "spawn"), default="torchrun")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds for the whole run, then every rank is killed (default 1800)")
    # Set by launch() for the ranks it starts.
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)


def main_launcher(script: str, args, forwarded: list[str]) -> int:
    """The launcher side of a peer script: start the ranks, print rank 0's records as JSON lines
    on stdout, the diagnosis on stderr; exit 1 if a rank failed or the run timed out."""
    threads = args.threads or rank_threads()
    records, ok, diagnosis = launch(script, args.world, forwarded, threads, args.timeout,
                                    args.launcher)
    for rec in records:
        print(json.dumps(rec), flush=True)
    if not ok:
        print(diagnosis, file=sys.stderr, flush=True)
        return 1
    return 0
