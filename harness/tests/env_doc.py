#!/usr/bin/env python3
"""env_doc: every environment variable the code reads must have a row in docs/env.md.

usage: env_doc.py REPO_ROOT

Looks in engine/, harness/, suites/, reference/, reports/ and ci/ for
- any TRAINBENCH_* name (C++, Python, shell: they are all ours), and
- the names C++ outside tests reads by literal (getenv("X"), env_string("X"), env_int64("X", ...));
each must appear in backquotes in docs/env.md. Exit status 0 when all do; 1 with one line per
missing name otherwise."""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOMS = ("engine", "harness", "suites", "reference", "reports", "ci")
OURS = re.compile(r"\bTRAINBENCH_[A-Z0-9_]*[A-Z0-9]\b")
READ = re.compile(r"\b(?:getenv|env_[a-z0-9_]+)\(\s*\"([A-Za-z_][A-Za-z0-9_]*)\"")
SUFFIXES = {".cpp", ".h", ".hpp", ".cu", ".py", ".sh", ""}


def names_in_code(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for room in ROOMS:
        for path in sorted((root / room).rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            # Tests set variables of their own (TB_ENV_TEST_VAR); their TRAINBENCH_* names still count.
            is_test = "tests" in path.parts or path.stem.endswith("_test") or path.name == "env_doc.py"
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for m in list(OURS.finditer(text)) + ([] if is_test else list(READ.finditer(text))):
                name = m.group(1) if m.re is READ else m.group(0)
                found.setdefault(name, str(path.relative_to(root)))
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", (root / "docs" / "env.md").read_text(encoding="utf-8")))
    found = names_in_code(root)
    missing = sorted(n for n in found if n not in documented)
    for n in missing:
        print(f"docs/env.md: {n} (read in {found[n]}) has no row")
    if not found:
        print("env_doc: found no variables at all; wrong REPO_ROOT?")
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
