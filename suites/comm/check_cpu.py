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
ranks) or a unit slip breaks it. A record whose world is not a whole number >= 1, whose time_s is
not above 0, or whose figures are not numbers (a JSON true is no number) is a violation too.
Exit 0 when every record holds, 1 otherwise (each violation on stderr), 2 for a file that is not
a result (one line)."""
import json
import math
import sys


def is_number(v) -> bool:
    """A finite JSON number (a bool is an int to Python, not a number to JSON)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_count(v) -> bool:
    """A whole number >= 1 (a world, hosts, ranks per host, cores)."""
    return is_number(v) and v >= 1 and v == int(v)


def seconds(us):
    """A folded figure in microseconds, in seconds; anything else as it is (check() names it)."""
    return us / 1e6 if is_number(us) else us


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            doc = json.load(f)
        run, records = doc["run"], doc["records"]
        cores = run.get("logical_cores", 1)
        if not is_count(cores) or not isinstance(records, list):
            raise ValueError(f"logical_cores {cores!r} is not a whole number >= 1")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"check_cpu.py: {sys.argv[1]}: not a result file: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    checked, bad = 0, []

    def check(name, cpu, t, world):
        nonlocal checked
        checked += 1
        if not is_number(cpu):
            bad.append(f"{name}: cpu_s missing or not a number ({cpu!r})")
        elif not is_number(t) or not t > 0 or not is_count(world):
            bad.append(f"{name}: time_s ({t!r}) not a number above 0, or world ({world!r}) not a whole number >= 1")
        elif not (cpu > 0 and world * cpu <= t * cores * 1.05 + 20e-6):
            bad.append(f"{name}: cpu_s {cpu:.3g} s: not above 0, or {world} ranks x cpu_s above "
                       f"time_s {t:.3g} s x {cores} cores")

    for rec in records:
        if not isinstance(rec, dict) or rec.get("kind") != "benchmark" or rec.get("status") != "pass":
            continue
        m, case = rec.get("metrics"), str(rec.get("case"))
        if not isinstance(m, dict):
            m = {}
        if rec.get("suite") == "comm":
            check(case, m.get("cpu_s"), m.get("time_s"), m.get("world", 1))
        elif rec.get("suite") == "hosts" and case.startswith("comm/"):
            hosts, per_host = m.get("hosts", 1), m.get("ranks_per_host", 1)
            world = hosts * per_host if is_count(hosts) and is_count(per_host) else f"{hosts!r} x {per_host!r}"
            for key, t in m.items():
                if key.endswith("_time_us"):
                    cpu = m.get(key[: -len("_time_us")] + "_cpu_us")
                    check(f"{case} {key}", seconds(cpu), seconds(t), world)
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
