"""Neutral helpers every stage uses: files by name, JSON in and out, and config dataclasses from dicts.

Inputs are opened through `open_bytes` (.gz and .bz2 decompressed on the fly, a file's format the suffix under
them, `format_suffix`), so corpora (`litebert.text`) and task files (`litebert.finetune.tasks`) read the same
compressed files the same way; every JSON file litebert writes beside data or weights (manifests, configs,
results) goes through `write_json` (atomic) and every one it reads through `read_json` (errors name the file and
line). `from_dict` and `check_types` build a `@dataclass(kw_only=True)` config from JSON with every unknown key
and wrongly typed value named: each stage's config uses them.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import math
import os
import types
import typing
import zlib
from pathlib import Path
from typing import Any, BinaryIO

COMPRESSION_SUFFIXES = (".gz", ".bz2")
READ_ERRORS = (OSError, EOFError, zlib.error)  # what reading a truncated or corrupt .gz or .bz2 raises


def open_bytes(path: str | Path) -> BinaryIO:
    """Open `path` for reading bytes, decompressing .gz and .bz2 (by suffix, in any case)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if suffix == ".bz2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def check_input_file(path: str | Path) -> Path:
    """`path` if it is a regular file. A missing one is FileNotFoundError, a directory IsADirectoryError; a pipe or
    a device (bash's `<(...)` gives one) is a ValueError saying why: corpora and task files are read more than
    once."""
    path = Path(path)
    if path.is_file():
        return path
    if path.is_dir():  # a task's --train, --dev or --data, or embed's input
        raise IsADirectoryError(f"{path}: a directory; give one file")
    if path.exists():
        raise ValueError(
            f"{path}: not a regular file (a pipe or a device, as bash's <(...) gives): litebert reads its input "
            "files more than once, so write it to a file first (.gz and .bz2 are read as they are)"
        )
    raise FileNotFoundError(f"{path}: file not found")


def format_suffix(path: str | Path) -> str:
    """The lower-case suffix naming a file's format, looking through the compression `open_bytes` undoes
    ("a.TSV.gz" -> ".tsv"); "" when there is none."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def check_not_an_input(out: str | Path, *inputs: str | Path) -> None:
    """Refuse an output that is one of the command's input files or lies inside an input directory (a model):
    writing it would destroy what was read."""
    target = Path(out).resolve()
    for source in map(Path, inputs):
        held = source.resolve()
        if target == held or held in target.parents:
            raise ValueError(f"{out}: the output would overwrite the input {source}; write it elsewhere")


def write_json(data: Any, path: str | Path, *, sort_keys: bool = False) -> None:
    """Write `data` as indented UTF-8 JSON atomically (a temporary file renamed over `path`), so a reader, or a
    run resumed after a kill, never finds half a file; text in any script stays readable (no \\u escapes: a
    Korean label or file name reads as itself), and `sort_keys` gives equal bytes for equal dicts."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; name the JSON file to write")
    tmp = path.with_name(f".{path.name}.tmp")
    text = json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (read with surrogate escapes): \u escapes keep it
        raw = json.dumps(data, indent=2, sort_keys=sort_keys).encode("ascii")
    try:
        tmp.write_bytes(raw + b"\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # nothing left behind by a failed write


def check_dir_path(path: str | Path, what: str) -> None:
    """Refuse a directory path where the path itself, or a directory above it, is a file: an error naming that
    file and saying `what` the path is for (rather than a bare "[Errno 17] File exists" once it is made)."""
    path = Path(path)
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise NotADirectoryError(f"{blocker}: a file, not a directory; {what}")


def make_dir(path: str | Path, what: str) -> Path:
    """`mkdir -p path`, after `check_dir_path`."""
    check_dir_path(path, what)
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def read_json(path: str | Path) -> Any:
    """Parse a JSON config file; a missing file or bad JSON raises an error naming the file (and line)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: config file not found") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start}); JSON files are UTF-8") from None


def check_types(obj: Any) -> None:
    """Refuse values whose type does not match the dataclass annotation, naming the field.

    JSON has one number type, so an int is accepted where a float is expected; a bool is never an int here.
    """
    hints = typing.get_type_hints(type(obj))
    cls_name = type(obj).__name__
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        expected = hints[field.name]
        allowed = typing.get_args(expected) if isinstance(expected, types.UnionType) else (expected,)
        if not any(_matches(value, t) for t in allowed):
            names = " | ".join(getattr(t, "__name__", str(t)) for t in allowed)
            raise ValueError(f"{cls_name}.{field.name} must be {names}, got {value!r} ({type(value).__name__})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{cls_name}.{field.name} must be a finite number, got {value!r}")


def _matches(value: Any, t: Any) -> bool:
    if t is type(None):
        return value is None
    if t is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if t is float:
        return isinstance(value, int | float)
    origin = typing.get_origin(t)  # list[str], dict[str, Any]: check the container only
    return isinstance(value, origin or t)


def from_dict(cls: type, data: Any, *, source: str) -> Any:
    """Build a kw-only dataclass from a dict, refusing unknown keys and bad values with the field named."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: unknown {cls.__name__} field(s) {unknown}; known: {sorted(known)}")
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source}: {exc}") from exc
