#!/usr/bin/env python3
"""check_cpu.py on hand-made result files: records it must hold to their bound (exit 0), impossible
ones it must name (exit 1: a world of 0 or below made ranks x cpu_s never positive, so any CPU
passed; a JSON true passed as 1 s), and files that are no result (exit 2, one line, no traceback).
usage: check_cpu_test.py (run by ctest comm.check_cpu_checker)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def doc(metrics, run=None, suite="comm", case="all_reduce/float32/8/w2/engine"):
    return {"schema": "trainbench.result/1", "run": {"logical_cores": 2} if run is None else run,
            "records": [{"suite": suite, "case": case, "kind": "benchmark", "status": "pass", "rank": 0,
                         "metrics": metrics}]}


def hosts(h, k, time_us, cpu_us):
    return doc({"hosts": h, "ranks_per_host": k, "all_reduce_8B_engine_time_us": time_us,
                "all_reduce_8B_engine_cpu_us": cpu_us}, suite="hosts", case="comm/unshaped/inter/2x1")


CASES = {  # name: (document, expected exit status)
    "holds": (doc({"time_s": 1e-3, "cpu_s": 0.9e-3, "world": 2}), 0),
    "hosts_holds": (hosts(2, 1, 100, 90), 0),
    "sum_over_ranks": (doc({"time_s": 1e-3, "cpu_s": 1.9e-3, "world": 2}), 1),
    "world_zero": (doc({"time_s": 1e-6, "cpu_s": 1.0, "world": 0}), 1),
    "world_negative": (doc({"time_s": 1e-6, "cpu_s": 1.0, "world": -2}), 1),
    "hosts_negative": (hosts(-2, 1, 10, 500000), 1),
    "time_zero": (doc({"time_s": 0, "cpu_s": 5e-6, "world": 2}), 1),
    "cpu_true": (doc({"time_s": 1.0, "cpu_s": True, "world": 1}), 1),
    "no_run": ({"records": []}, 2),
    "cores_text": (doc({"time_s": 1e-6, "cpu_s": 1e-6, "world": 2}, run={"logical_cores": "two"}), 2),
    "not_json": ("{", 2),
}


def main() -> int:
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, (content, want) in CASES.items():
            path = os.path.join(tmp, name + ".json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(content if isinstance(content, str) else json.dumps(content))
            r = subprocess.run([sys.executable, os.path.join(HERE, "check_cpu.py"), path],
                               capture_output=True, text=True, timeout=60)
            ok = r.returncode == want and "Traceback" not in r.stderr
            if want == 2:
                ok = ok and len(r.stderr.strip().splitlines()) == 1
            print(f"{name}: exit {r.returncode} (want {want}){'' if ok else ' FAIL: ' + r.stderr.strip()}")
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
