#!/usr/bin/env python3
"""Validate trainbench result JSON files against docs/result.schema.json.

usage: validate.py [--schema PATH] RESULT.json...
Exit status 0 when every file is valid; 1 (and the violations on stderr) otherwise."""
import argparse
import json
import sys
from pathlib import Path

import jsonschema

DEFAULT_SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "result.schema.json"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--schema", type=Path, default=DEFAULT_SCHEMA)
    args = p.parse_args()
    schema = json.loads(args.schema.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    ok = True
    for f in args.files:
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError, RecursionError) as e:  # unreadable, not UTF-8, not JSON, too deep
            print(f"{f}: cannot read JSON: {e}", file=sys.stderr)
            ok = False
            continue
        errors = list(validator.iter_errors(doc))
        for e in errors[:20]:
            where = "/".join(map(str, e.absolute_path)) or "(top level)"
            print(f"{f}: at {where}: {e.message}", file=sys.stderr)
        if errors:
            ok = False
        else:
            print(f"{f}: valid ({len(doc['records'])} records)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
