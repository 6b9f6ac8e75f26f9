"""Input files by name: .gz and .bz2 are decompressed on the fly, and a file's format is the suffix under them.

Corpora (`litebert.text`) and task files (`litebert.tasks`) open their inputs through these two functions, so
both read the same compressed files the same way.
"""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path
from typing import BinaryIO

COMPRESSION_SUFFIXES = (".gz", ".bz2")


def open_bytes(path: str | Path) -> BinaryIO:
    """Open `path` for reading bytes, decompressing .gz and .bz2 (by suffix, in any case)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if suffix == ".bz2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def format_suffix(path: str | Path) -> str:
    """The lower-case suffix naming a file's format, looking through the compression `open_bytes` undoes
    ("a.TSV.gz" -> ".tsv"); "" when there is none."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    while suffixes and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""
