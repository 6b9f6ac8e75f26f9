"""Input files and output paths: .gz and .bz2 opened as they are (`open_bytes`), a file's format read through its
compression (`format_suffix`), and the checks that name the file when an input is not a regular file or an output
would overwrite an input or meets a file where a directory should be."""

from __future__ import annotations

import bz2
import gzip
import zlib
from pathlib import Path
from typing import BinaryIO

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
