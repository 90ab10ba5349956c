#!/usr/bin/env python3
"""doc_cases: every case name and --filter the docs cite must select real cases, so the README's
"Follow one op" and the docs' commands cannot drift from the suites again.

usage: doc_cases.py TRAINBENCH REPO_ROOT

Checks, in README.md, docs/*.md and every room README:
- backticked case patterns (`gelu/float32/...`, `grad/gelu/...`, `gelu/float32/16M`): a pattern
  ending in `/...` must prefix at least one case name, any other must be a case name. When the
  same line names a suite's folder (`suites/nn/...`), the case must be in that suite.
- backticked scenario names (`hang/<name>`, `oom/<name>`): `trainbench scenario list` must list them.
- `trainbench test|bench|list ... --filter F` commands: F must select at least one case (of the
  command's kind, in its --suite when given) of those `trainbench list` shows.
Exit status 0 when all hold; 1 with one line per stale citation otherwise."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

# A case pattern: lower-case words separated by '/', optionally ending in '/...'. Paths are told
# apart by their first component (a folder of the repository) or an extension.
CASE = re.compile(r"^[a-z][a-z0-9_]*(/[A-Za-z0-9_.+\-]+)+$")
EXT = re.compile(r"\.(cpp|h|hpp|cu|md|py|json|txt|sh|cmake|png|html|log)$")
CMD = re.compile(r"trainbench\s+(test|bench|list)\b([^`\n]*)")
# A row of `trainbench list`'s table of suites.
ROW = re.compile(r"^(?P<suite>\S+) +(?:in-process|ranks(?: \d+)+) +(?P<tests>\d+) +(?P<benches>\d+) +(?:yes|no)\b",
                 re.M)


def run(args) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def listing(trainbench: str):
    """{suite: (tests, benches)} from `trainbench list` (the suites) and one `trainbench list
    --suite A --suite B ...` (their cases; building every case list is the slow part)."""
    table = run([trainbench, "list"])
    suites = [m["suite"] for m in ROW.finditer(table.stdout)]
    if table.returncode != 0 or not suites:
        sys.exit(f"doc_cases: no suites in `{trainbench} list`: {table.stderr.strip()}")
    args = [trainbench, "list"]
    for s in suites:
        args += ["--suite", s]
    p = run(args)
    if p.returncode != 0:
        sys.exit(f"doc_cases: `trainbench list --suite ...` failed: {p.stderr.strip()}")
    cases, current = {}, None
    for line in p.stdout.splitlines():
        if line.startswith("  test   ") and current:
            cases[current][0].append(line[9:])
        elif line.startswith("  bench  ") and current:
            cases[current][1].append(line[9:])
        elif line and not line.startswith(" "):
            current = line.split()[0]
            cases[current] = ([], [])
    if set(cases) != set(suites):
        sys.exit(f"doc_cases: listed suites {sorted(cases)} differ from the table's {sorted(suites)}")
    return cases


def doc_files(root: Path):
    files = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for readme in sorted(root.glob("*/**/README.md")):
        if not readme.relative_to(root).parts[0].startswith(("build", ".")):
            files.append(readme)
    return [f for f in files if f.is_file()]


def is_case_pattern(token: str, top_dirs: set[str]) -> bool:
    body = token[:-4] if token.endswith("/...") else token
    return bool(CASE.match(body)) and body.split("/")[0] not in top_dirs and not EXT.search(body)


def selects(cases, kind: str, suites: list[str], flt: str) -> tuple[bool, str]:
    """Whether --filter `flt` (a regex searched in case names, as trainbench does) selects a case
    of `kind` in `suites` (all when none are named)."""
    unknown = [s for s in suites if s not in cases]
    if unknown:
        return False, f"unknown suite {unknown[0]}"
    try:
        rx = re.compile(flt)
    except re.error as e:
        return False, f"invalid regex: {e}"
    pick = {"test": (0,), "bench": (1,), "list": (0, 1)}[kind]
    names = [c for s in (suites or cases) for k in pick for c in cases[s][k]]
    return any(rx.search(c) for c in names), ""


def main() -> int:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    trainbench, root = sys.argv[1], Path(sys.argv[2])
    cases = listing(trainbench)
    listed = run([trainbench, "scenario", "list"]).stdout
    scenarios = set(re.findall(r"^((?:hang|oom)/\S+)", listed, re.M))
    top_dirs = {p.name for p in root.iterdir() if p.is_dir()} | {"build", "results", "report"}
    problems, checked = [], 0
    for f in doc_files(root):
        rel = f.relative_to(root)
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            named = [s for s in re.findall(r"suites/([a-z_]+)/", line) if s in cases]
            scope = named or list(cases)
            for token in re.findall(r"`([^`\s]+)`", line):
                if not is_case_pattern(token, top_dirs):
                    continue
                checked += 1
                if re.match(r"^(hang|oom)/", token):
                    if token not in scenarios:
                        problems.append(f"{rel}:{n}: `{token}` names no scenario (`trainbench scenario list`)")
                    continue
                names = [c for s in scope for c in cases[s][0] + cases[s][1]]
                if token.endswith("/..."):
                    ok = any(c.startswith(token[:-3]) for c in names)
                else:
                    ok = token in names
                if not ok:
                    where = f"suite {' or '.join(scope)}" if named else "any suite"
                    problems.append(f"{rel}:{n}: `{token}` names no case in {where}")
            for kind, rest in CMD.findall(line):
                try:
                    words = shlex.split(rest)
                except ValueError:
                    continue
                flt = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--filter"]
                suites = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--suite"]
                if not flt or "<" in flt[0]:
                    continue  # no filter, or a placeholder such as <op>
                checked += 1
                ok, err = selects(cases, kind, suites, flt[0])
                if not ok:
                    problems.append(f"{rel}:{n}: `trainbench {kind}{rest}` selects no case"
                                    + (f" ({err})" if err else ""))
    for p in problems:
        print(p, file=sys.stderr)
    print(f"doc_cases: {checked} citations checked, {len(problems)} stale")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
