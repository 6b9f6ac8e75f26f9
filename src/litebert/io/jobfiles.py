"""Job files: a config file written by hand, in JSON or in TOML (by its suffix, `.toml`), read into the dict that
the configs are built from (`from_dict`), so both formats go through the same validation and the same messages.
A file that does not parse is refused with its name and the line (and, for TOML, the column) the parser gives."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from litebert.io.jsonfiles import read_json

JOB_SUFFIXES = (".json", ".toml")
_TOML_WHERE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")  # tomllib's message ends with its position


def read_job_file(path: str | Path) -> dict[str, Any]:
    """The top-level table of a JSON or TOML job file (TOML has no null: leave a key out for its default)."""
    path = Path(path)
    data = _read_toml(path) if path.suffix.lower() == ".toml" else read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of job settings, got {type(data).__name__}")
    return data


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
        return tomllib.loads(text)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: config file not found") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte {exc.start}); TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        where = _TOML_WHERE.search(message)
        if where is None:  # "(at end of document)": an unterminated string or table
            message = message.replace(" (at end of document)", "")
            raise ValueError(f"{path}: invalid TOML at the end of the file: {message}") from None
        line, column = where.groups()
        raise ValueError(f"{path}: invalid TOML at line {line}, column {column}: {message[: where.start()]}") from None
