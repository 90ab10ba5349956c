#!/usr/bin/env python3
"""Check the comm benchmark's per-call CPU figure (`cpu_s`, docs/results.md) in a result file.

usage: check_cpu.py RESULT.json
The comm suite's records, and the hosts suite's comm records, which fold each point's figures as
<op>_<bytes>B_<impl>_time_us and _cpu_us (their ranks, hosts x ranks per host, all on this
machine's cores: namespace hosts).
Every passed comm benchmark record must carry cpu_s, above 0 (a call issues and completes work on
some thread of the process), and the ranks together -- world x cpu_s, all on this machine -- at
most time_s x its logical cores (the ranks cannot use more CPU than every core for the call's
whole time; 5% and 20 us of slack for the clocks' granularity). Ranks that poll keep both cores
busy, so the bound is met with little room: a sum over ranks instead of their mean (2x at 2
ranks) or a unit slip breaks it. Exit 0 when every record holds, 1 otherwise (each violation on
stderr)."""
import json
import math
import sys


def seconds(us):
    """A folded figure in microseconds, in seconds; anything else as it is (check() names it)."""
    return us / 1e6 if isinstance(us, (int, float)) else us


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    cores = int(doc["run"].get("logical_cores") or 1)
    checked, bad = 0, []

    def check(name, cpu, t, world):
        nonlocal checked
        checked += 1
        if not isinstance(cpu, (int, float)) or not math.isfinite(cpu):
            bad.append(f"{name}: cpu_s missing or not a number ({cpu!r})")
        elif not isinstance(t, (int, float)) or not math.isfinite(t) or not isinstance(world, (int, float)):
            bad.append(f"{name}: time_s ({t!r}) or world ({world!r}) missing or not a number")
        elif not (cpu > 0 and world * cpu <= t * cores * 1.05 + 20e-6):
            bad.append(f"{name}: cpu_s {cpu:.3g} s: not above 0, or {world} ranks x cpu_s above "
                       f"time_s {t:.3g} s x {cores} cores")

    for rec in doc["records"]:
        if rec["kind"] != "benchmark" or rec["status"] != "pass":
            continue
        m = rec["metrics"]
        if rec["suite"] == "comm":
            check(rec["case"], m.get("cpu_s"), m.get("time_s"), m.get("world", 1))
        elif rec["suite"] == "hosts" and rec["case"].startswith("comm/"):
            world = m.get("hosts", 1) * m.get("ranks_per_host", 1)
            for key, t in m.items():
                if key.endswith("_time_us"):
                    cpu = m.get(key[: -len("_time_us")] + "_cpu_us")
                    check(f"{rec['case']} {key}", seconds(cpu), seconds(t), world)
    for line in bad:
        print(line, file=sys.stderr)
    if checked == 0:
        print(f"{sys.argv[1]}: no passed comm point to check", file=sys.stderr)
        return 1
    print(f"{checked} comm points: 0 < ranks x cpu_s <= time_s x {cores} cores" if not bad else
          f"{len(bad)} of {checked} comm points out of bounds")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
