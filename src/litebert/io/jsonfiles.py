"""JSON in and out: every JSON file litebert writes beside data or weights (manifests, configs, results) goes
through `write_json` (atomic, readable UTF-8) and every one it reads through `read_json` (errors name the file and
the line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from litebert.io.writes import write_bytes


def write_json(data: Any, path: str | Path, *, sort_keys: bool = False) -> None:
    """Write `data` as indented UTF-8 JSON atomically (a temporary file renamed over `path`), so a reader, or a
    run resumed after a kill, never finds half a file; text in any script stays readable (no \\u escapes: a
    Korean label or file name reads as itself), and `sort_keys` gives equal bytes for equal dicts."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; name the JSON file to write")
    text = json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (read with surrogate escapes): \u escapes keep it
        raw = json.dumps(data, indent=2, sort_keys=sort_keys).encode("ascii")
    write_bytes(path, raw + b"\n")


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
