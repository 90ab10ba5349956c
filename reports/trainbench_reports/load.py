"""Reading result files: JSON parse, schema validation, and a flat list of records that remember
which run they came from."""
from __future__ import annotations

import json
import math
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
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LoadError(f"schema file not found: {path} (pass --schema or set TRAINBENCH_SCHEMA)")
    except (OSError, ValueError) as e:
        raise LoadError(f"schema file {path} is unreadable: {_brief(e)}")


def _brief(e: BaseException) -> str:
    """An exception as one short line: the OS reason without errno noise, no newlines."""
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return _clip(text)


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _where(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return "/".join(parts) if parts else "(top level)"


def validate(doc, schema: dict, name: str) -> None:
    """Raises LoadError naming the first schema violation of `doc` (and how many more there are)."""
    import jsonschema

    if not isinstance(doc, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(doc), "a number")
        raise LoadError(f"{name}: not a trainbench result: the top level is {kind}, not an object "
                        "with schema, run and records")
    if "schema" in doc and doc["schema"] != SCHEMA_ID:
        raise LoadError(f"{name}: schema is {_clip(repr(doc['schema']), 60)}, this report reads "
                        f"{SCHEMA_ID!r}")
    validator = jsonschema.Draft202012Validator(schema)
    try:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    except RecursionError:
        raise LoadError(f"{name}: not a trainbench result: its JSON is nested too deeply")
    if errors:
        shown = "; ".join(f"at {_where(e)}: {_clip(e.message, 120)}" for e in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise LoadError(f"{name}: not a valid trainbench result: {shown}{more}")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_json(p: Path):
    """The JSON document in file `p`; every way the file can be bad is a one-line LoadError."""
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise LoadError(f"{p}: no such file")
    except IsADirectoryError:
        raise LoadError(f"{p}: is a directory, not a result file")
    except OSError as e:
        raise LoadError(f"{p}: cannot read: {_brief(e)}")
    if not data.strip():
        raise LoadError(f"{p}: empty file, not a trainbench result")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                        "result files are UTF-8 JSON")
    try:
        # NaN and Infinity are Python's extensions, not JSON: the harness writes "nan" strings.
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        raise LoadError(f"{p}: not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        raise LoadError(f"{p}: not a trainbench result: its JSON is nested too deeply")
    except ValueError as e:  # NaN, an integer too long to convert
        raise LoadError(f"{p}: not JSON: {_brief(e)}")


def expand_folders(paths) -> list[Path]:
    """Each folder among `paths` replaced by its *.json files (not recursive, sorted by name): a
    folder of runs reports their history."""
    out = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(p)
            continue
        found = sorted(q for q in p.glob("*.json") if q.is_file())
        if not found:
            raise LoadError(f"{p}: is a directory with no *.json result files in it")
        out += found
    return out


def load_results(paths, schema_path: Path | None = None) -> list[Result]:
    schema = load_schema(schema_path)
    results = []
    labels = set()
    for p in expand_folders(paths):
        doc = read_json(p)
        validate(doc, schema, str(p))
        label = p.stem
        n = 2
        while label in labels:  # two files with one stem (results from two folders)
            label = f"{p.stem}#{n}"
            n += 1
        labels.add(label)
        results.append(Result(p, label, doc["run"], doc["records"]))
    return results


# No measurement comes near it, and a plot's sums and paddings of larger values overflow to inf.
MAX_METRIC = 1e300


def number(value):
    """A metric as a float, or None for strings ("nan", labels) and for numbers a plot cannot
    handle: non-finite or beyond +-MAX_METRIC (e.g. a JSON integer of hundreds of digits)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:
        return None
    return v if abs(v) <= MAX_METRIC else None
