"""Tests of the PyTorch peers (torch_comm_bench.py, torch_ddp_bench.py, torch_fsdp_bench.py,
torch_launch.py): they
start their ranks, print schema-valid records with the suites' case names and self-consistent
metrics, and never outlive their timeout. Needs the project venv (torch, jsonschema); ~1 min:
    <venv>/bin/python -m unittest -v test_peers        (from reference/dist)"""
import json
import math
import os
import subprocess
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = HERE.parents[1] / "docs" / "result.schema.json"
sys.path.insert(0, str(HERE))
import torch_comm_bench  # noqa: E402


def run(script, *args, timeout=300):
    return subprocess.run([sys.executable, str(HERE / script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def records(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def validate(recs):
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    doc = {"schema": "trainbench.result/1",
           "run": {"time": "2025-01-15T10:20:30Z", "git_revision": "x", "host": "h",
                   "build_type": "Release", "compiler": "GNU", "backends": ["cpu"],
                   "world_size": 1, "command": "test", "threads": 1},
           "records": recs}
    jsonschema.Draft202012Validator(schema).validate(doc)


def our_processes(marker):
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


class CommPeer(unittest.TestCase):
    def test_shapes_follow_nccl_tests(self):
        self.assertEqual(torch_comm_bench.elements("all_reduce", 8, 4), (2, 8))
        self.assertEqual(torch_comm_bench.elements("all_gather", 1024, 4), (64, 1024))
        self.assertEqual(torch_comm_bench.elements("reduce_scatter", 16, 3), (1, 12))
        self.assertEqual(torch_comm_bench.elements("all_gather", 8, 4), (1, 16))  # >= 1 per rank
        self.assertAlmostEqual(torch_comm_bench.bus_factor("all_reduce", 4), 1.5)
        self.assertAlmostEqual(torch_comm_bench.bus_factor("reduce_scatter", 2), 0.5)
        self.assertEqual(torch_comm_bench.bus_factor("broadcast", 4), 1.0)
        self.assertEqual(torch_comm_bench.DEFAULT_SIZES[0], 8)
        self.assertEqual(torch_comm_bench.DEFAULT_SIZES[-1], 256 << 20)

    def test_two_ranks(self):
        for launcher in ("torchrun", "spawn"):
            with self.subTest(launcher=launcher):
                p = run("torch_comm_bench.py", "--world", 2, "--sizes", "8,4096",
                        "--target-s", 0.01, "--launcher", launcher, "--timeout", 240)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                recs = records(p.stdout)
                validate(recs)
                names = [r["case"] for r in recs]
                self.assertEqual(names, [f"{op}/float32/{b}/w2/torch-gloo"
                                         for op in torch_comm_bench.OPS for b in (8, 4096)])
                for r in recs:
                    m = r["metrics"]
                    self.assertEqual(r["status"], "pass", r)  # the first call's output was right
                    self.assertEqual((r["suite"], r["kind"], m["world"]), ("comm", "benchmark", 2))
                    self.assertGreater(m["time_s"], 0)
                    self.assertTrue(math.isclose(m["algbw_gbps"], m["bytes"] / m["time_s"] / 1e9,
                                                 rel_tol=1e-9))
                    op = r["case"].split("/")[0]
                    self.assertTrue(math.isclose(
                        m["busbw_gbps"], m["algbw_gbps"] * torch_comm_bench.bus_factor(op, 2),
                        rel_tol=1e-9))
                    self.assertTrue(5 <= m["iterations"] <= 1000 and m["iterations"] % 5 == 0)
                    self.assertTrue(m["time_min_s"] <= m["time_s"] <= m["time_max_s"])

    def test_timeout_kills_every_rank(self):
        marker = f"--target-s 77.{os.getpid()}"  # finds this test's processes only
        t0 = time.monotonic()
        # 64 MiB all_reduces take tens of ms each: 1000 of them run far past the timeout.
        p = run("torch_comm_bench.py", "--world", 2, "--sizes", "67108864", "--ops", "all_reduce",
                "--target-s", marker.split()[1], "--timeout", 8, timeout=120)
        elapsed = time.monotonic() - t0
        self.assertEqual(p.returncode, 1)
        self.assertIn("timed out after 8 s", p.stderr)
        self.assertLess(elapsed, 8 + 30)
        time.sleep(1)
        self.assertEqual(our_processes(marker), [])


class RankCpus(unittest.TestCase):
    """TRAINBENCH_RANK_CPUS (Note [A core of its own] in engine/dist/placement.cpp)."""

    def test_parse(self):
        import torch_launch

        self.assertEqual(torch_launch.parse_rank_cpus("0;1", 2), [[0], [1]])
        self.assertEqual(torch_launch.parse_rank_cpus("0-1,4;2-3,6", 2), [[0, 1, 4], [2, 3, 6]])
        for bad, world in (("0;1", 3), ("0;1;2", 2), ("", 1), ("0;", 2), ("1-", 1), ("-1", 1),
                           ("3-1", 1), ("0;0", 2), ("0-2;2", 2), ("a", 1), ("0 ", 1), ("1024", 1)):
            with self.subTest(value=bad, world=world), self.assertRaises(ValueError):
                torch_launch.parse_rank_cpus(bad, world)
        # A rank outside the world is named, not an IndexError.
        env = dict(os.environ, RANK="2", WORLD_SIZE="2", TRAINBENCH_RANK_CPUS="0;1")
        p = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); "
                            "import torch_launch; torch_launch.pin_to_rank_cpus()"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("RANK 2 is outside a world of 2", p.stderr)

    def test_a_worker_pins_every_thread(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("one CPU: nothing to pin apart")
        code = (f"import os, sys, threading\nsys.path.insert(0, {str(HERE)!r})\nimport torch_launch\n"
                "go = threading.Event(); ids = []\n"
                "t = threading.Thread(target=lambda: (ids.append(threading.get_native_id()), go.wait()))\n"
                "t.start()\nwhile not ids: pass\n"
                "print(torch_launch.pin_to_rank_cpus(), sorted(os.sched_getaffinity(0)),"
                " sorted(os.sched_getaffinity(ids[0])))\ngo.set(); t.join()\n")
        env = dict(os.environ, RANK="1", WORLD_SIZE="2", TRAINBENCH_RANK_CPUS=f"{cpus[0]};{cpus[1]}")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        # Rank 1 gets the second list; the thread started before the pin moved with it.
        self.assertEqual(p.stdout.split(), [f"[{cpus[1]}]"] * 3)


class DdpPeer(unittest.TestCase):
    def test_mlp_two_ranks(self):
        p = run("torch_ddp_bench.py", "--world", 2, "--models", "mlp", "--target-s", 0.3,
                "--gradient-as-bucket-view")  # as the harness passes it by default
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        recs = records(p.stdout)
        validate(recs)
        self.assertEqual([r["case"] for r in recs], ["ddp/mlp/w2/torch-gloo"])
        m = recs[0]["metrics"]
        self.assertEqual((m["batch"], m["per_rank_batch"], m["world"]), (256, 128, 2))
        self.assertEqual(m["gradient_as_bucket_view"], 1.0)
        self.assertEqual(m["adamw"], "fused")  # the default, like-for-like with the engine's
        self.assertEqual(m["parameters"], 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
        self.assertEqual(m["bytes_per_step"], 4 * m["parameters"])
        self.assertTrue(math.isclose(m["samples_per_s"], 256 / (m["step_ms"] / 1e3), rel_tol=1e-9))
        parts = m["forward_ms"] + m["backward_ms"] + m["comm_wait_ms"] + m["optimizer_ms"]
        # The parts are per-rank means, the step the slowest rank's: close, never far above it.
        self.assertLess(parts, m["step_ms"] * 1.05)
        self.assertGreater(parts, m["step_ms"] * 0.5)
        self.assertTrue(0 <= m["comm_hidden_fraction"] <= 1)
        self.assertGreater(m["comm_busy_ms"], 0)


class FsdpPeer(unittest.TestCase):
    def test_mlp_two_ranks(self):
        p = run("torch_fsdp_bench.py", "--world", 2, "--models", "mlp",
                "--strategies", "full_shard,no_shard", "--target-s", 0.3)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        recs = records(p.stdout)
        validate(recs)
        self.assertEqual([r["case"] for r in recs],
                         ["fsdp/mlp/full_shard/w2/torch", "fsdp/mlp/no_shard/w2/torch"])
        params = 784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10
        full, none = (r["metrics"] for r in recs)
        for m in (full, none):
            self.assertEqual((m["batch"], m["per_rank_batch"], m["world"], m["parameters"]),
                             (256, 128, 2, params))
            self.assertTrue(math.isclose(m["samples_per_s"], 256 / (m["step_ms"] / 1e3), rel_tol=1e-9))
            self.assertLessEqual(m["step_min_ms"], m["step_ms"])
            self.assertLessEqual(m["step_ms"], m["step_max_ms"])
            self.assertTrue(0 <= m["comm_exposed_fraction"] <= 1)
            # AdamW's two moments of this rank's shards (plus a scalar step per parameter).
            self.assertGreaterEqual(m["peak_optimizer_state_bytes"], 2 * 4 * params / (2 if m is full else 1))
        # full_shard: the 3 Linear units gathered in forward and again in backward, their gradients
        # reduce-scattered; a unit's all-gather output and reduce-scatter input are its whole
        # parameters, so the model's bytes go out twice gathered and once reduced.
        self.assertEqual((full["all_gathers"], full["reduce_scatters"]), (6, 3))
        self.assertEqual(full["bytes_per_step"], 3 * 4 * params)
        # no_shard (replicate x shard-of-1): gradients all-reduced, nothing gathered.
        self.assertEqual((none["all_gathers"], none["all_reduces"]), (0, 3))
        self.assertEqual(none["bytes_per_step"], 4 * params)
        self.assertIn("FSDP2 has no NO_SHARD", recs[1]["message"])
        self.assertLess(full["peak_gradient_bytes"], none["peak_gradient_bytes"])


if __name__ == "__main__":
    unittest.main()
