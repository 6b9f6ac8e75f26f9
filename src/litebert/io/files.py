"""Input files and output paths: .gz and .bz2 opened as they are (`open_bytes`), a file's format read through its
compression (`format_suffix`), and the checks that name the file when an input is not a regular file, an output
would overwrite an input or meets a file where a directory should be, or a path holds a byte that is not UTF-8."""

from __future__ import annotations

import bz2
import gzip
import os
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


def check_utf8_path(path: str | Path, what: str) -> None:
    """Refuse a path holding a byte that is not UTF-8 (which Python keeps as a lone surrogate, os.fsdecode's
    surrogateescape), saying `what` the path is. torch, safetensors, SentencePiece, tokenizers and matplotlib take
    paths and names as UTF-8 text and fail on such a byte, some only once a run saves, resumes or plots: refused
    before any work instead."""
    text = os.fspath(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        byte = f"the byte \\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"the code point U+{code:04X}"
        shown = os.fsencode(text).decode("utf-8", "backslashreplace")  # the bytes, as a shell would show them
        raise ValueError(
            f"{shown}: {byte} at byte {len(os.fsencode(text[: exc.start]))} is not UTF-8 ({what}); litebert hands "
            "paths to libraries that take them as UTF-8 text (torch, safetensors, SentencePiece, matplotlib), so "
            "it refuses such a path before doing any work: rename it, or choose another"
        ) from None


def check_dir_path(path: str | Path, what: str) -> None:
    """Refuse a directory path where the path itself, or a directory above it, is a file: an error naming that
    file and saying `what` the path is for (rather than a bare "[Errno 17] File exists" once it is made); and one
    that is not UTF-8 (check_utf8_path)."""
    check_utf8_path(os.path.abspath(path), what)
    path = Path(path)
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise NotADirectoryError(f"{blocker}: a file, not a directory; {what}")


def make_dir(path: str | Path, what: str) -> Path:
    """`mkdir -p path`, after `check_dir_path`."""
    check_dir_path(path, what)
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)
