"""Reading result files: JSON parse, schema validation, and a flat list of records that remember
which run they came from."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import SCHEMA_ID


class LoadError(Exception):
    """An input that is not a valid trainbench result; the message says which file and where."""


@dataclass
class Result:
    path: Path
    label: str          # short name for tables and plot labels (the file stem)
    run: dict
    records: list = field(default_factory=list)


def default_schema_path() -> Path:
    env = os.environ.get("TRAINBENCH_SCHEMA")
    if env:
        return Path(env)
    # The package lives in <repo>/reports/trainbench_reports; the schema in <repo>/docs.
    return Path(__file__).resolve().parents[2] / "docs" / "result.schema.json"


def load_schema(path: Path | None = None) -> dict:
    path = Path(path) if path else default_schema_path()
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise LoadError(f"schema file not found: {path} (pass --schema or set TRAINBENCH_SCHEMA)")


def _where(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return "/".join(parts) if parts else "(top level)"


def validate(doc, schema: dict, name: str) -> None:
    """Raises LoadError listing the first few schema violations of `doc`."""
    import jsonschema

    if isinstance(doc, dict) and "schema" in doc and doc["schema"] != SCHEMA_ID:
        raise LoadError(f"{name}: schema is {doc['schema']!r}, this report reads {SCHEMA_ID!r}")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"  at {_where(e)}: {e.message}" for e in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise LoadError(f"{name}: not a valid trainbench result:\n" + "\n".join(lines) + more)


def load_results(paths, schema_path: Path | None = None) -> list[Result]:
    schema = load_schema(schema_path)
    results = []
    labels = set()
    for p in map(Path, paths):
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            raise LoadError(f"{p}: no such file")
        except json.JSONDecodeError as e:
            raise LoadError(f"{p}: not JSON: {e}")
        validate(doc, schema, str(p))
        label = p.stem
        n = 2
        while label in labels:  # two files with one stem (results from two folders)
            label = f"{p.stem}#{n}"
            n += 1
        labels.add(label)
        results.append(Result(p, label, doc["run"], doc["records"]))
    return results


def number(value):
    """A metric as float, or None for strings such as "nan" or labels."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
