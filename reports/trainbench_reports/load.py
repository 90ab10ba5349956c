"""Reading result files: JSON parse, schema validation, and a flat list of records that remember
which run they came from."""
from __future__ import annotations

import json
import math
import os
import re
import stat
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


# The most bytes read of one result file, as `trainbench compare` (kMaxInputBytes in
# harness/result_compare.h): a result of every suite is under 10 MiB, and a file past it (a
# runaway log, /dev/zero through a link) would be held in memory whole, then parsed.
MAX_INPUT_BYTES = 64 << 20
_UTF8_BOM = b"\xef\xbb\xbf"
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def read_input(p: Path, limit: int = MAX_INPUT_BYTES, what: str = "result file") -> bytes:
    """The bytes of `p`, a regular file of at most `limit` bytes. Anything else is a one-line
    LoadError, refused before a byte is read: a FIFO (reading one waits for a writer for ever), a
    device (/dev/zero never ends), a directory, a file past the limit. Opened without blocking,
    so a FIFO swapped in after a check cannot hang the open either."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise LoadError(f"{p}: no such file")
    except IsADirectoryError:
        raise LoadError(f"{p}: is a directory, not a {what}")
    except OSError as e:
        raise LoadError(f"{p}: cannot read: {_brief(e)}")
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise LoadError(f"{p}: is a directory, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a plain file")
            raise LoadError(f"{p}: is {kind}, not a {what} (only regular files are read)")
        too_large = LoadError(f"{p}: is larger than {limit >> 20} MiB, the most that is read of a {what}")
        if st.st_size > limit:
            raise too_large
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:  # the file may have grown since fstat: stop one read past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise too_large
        return b"".join(chunks)
    except OSError as e:
        raise LoadError(f"{p}: cannot read: {_brief(e)}")
    finally:
        os.close(fd)


# A \uD800-\uDFFF escape: a pair of them is one character, a lone one no text at all (matplotlib
# and the UTF-8 writers failed on it with a traceback; `trainbench compare` refuses the file).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(doc, p: Path):
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")  # a pair was decoded as one character
    except UnicodeEncodeError as e:
        raise LoadError(f"{p}: not JSON text: a string holds a lone UTF-16 surrogate "
                        f"(\\u{ord(e.object[e.start]):04x}), not a character")


def decode_json(data: bytes, p: Path):
    """The JSON document in `data`, the bytes of file `p`; every way they can be bad is a one-line
    LoadError. A UTF-8 byte order mark is skipped, as `trainbench compare` skips it (editors on
    Windows write one)."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]
    if not data.strip():
        raise LoadError(f"{p}: empty file, not a trainbench result")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{p}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                        "result files are UTF-8 JSON")
    try:
        # NaN and Infinity are Python's extensions, not JSON: the harness writes "nan" strings.
        doc = json.loads(text, parse_constant=_refuse_constant)
        if _SURROGATE_ESCAPE.search(text):
            _refuse_lone_surrogates(doc, p)
        return doc
    except json.JSONDecodeError as e:
        raise LoadError(f"{p}: not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        raise LoadError(f"{p}: not a trainbench result: its JSON is nested too deeply")
    except ValueError as e:  # NaN, an integer too long to convert
        raise LoadError(f"{p}: not JSON: {_brief(e)}")


def read_json(p: Path):
    """The JSON document in file `p` (read_input, decode_json)."""
    return decode_json(read_input(p), p)


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


# The most ranks a figure may speak of: `trainbench project --ranks` takes up to this many, and a
# case's w<world> or <hosts>x<ranks> beyond it is no run (a world of 10^400 ranks overflows a float).
MAX_RANKS = 1 << 20


def whole_number(text: str, lo: int, hi: int):
    """The decimal integer `text` (digits, as a case name's w<world> or <bytes>), or None when it
    lies outside [lo, hi]: a case names its world and bytes, and a record whose name says world 0
    or 400 digits of ranks is no measurement (and would divide by zero or overflow a float)."""
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > 20:  # no int() of 5000 digits
        return None
    v = int(text)
    return v if lo <= v <= hi else None


# Times per call the report uses (history, as `trainbench compare`: kMinTime and kMaxTime in
# harness/result_compare.h): 1 ps to 11.6 days; 5e-324 s or 1e300 s are no timing.
MIN_TIME_S, MAX_TIME_S = 1e-12, 1e6
