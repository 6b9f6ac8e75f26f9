"""Neutral helpers every stage uses: files by name, JSON in and out, and config dataclasses from dicts.

Inputs are opened through `open_bytes` (.gz and .bz2 decompressed on the fly, a file's format the suffix under
them, `format_suffix`), so corpora (`litebert.text`) and task files (`litebert.finetune.tasks`) read the same
compressed files the same way; every JSON file litebert writes beside data or weights (manifests, configs,
results) goes through `write_json` (atomic) and every one it reads through `read_json` (errors name the file and
line). `from_dict` and `check_types` build a `@dataclass(kw_only=True)` config from JSON with every unknown key
and wrongly typed value named: each stage's config uses them.

Writers: every file litebert writes goes to a temporary name first and is renamed when whole (`atomic_path`; a
directory of files, `staged_files`), and a full disk met on the way is a `DiskFullError` naming the file and the
space it needed, the temporary file removed. A command that writes a directory holds its lock (`lock_dir`): a
second writer is refused with the holder named.
"""

from __future__ import annotations

import bz2
import dataclasses
import errno
import gzip
import itertools
import json
import math
import os
import shutil
import socket
import sys
import time
import types
import typing
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
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
    text = json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (read with surrogate escapes): \u escapes keep it
        raw = json.dumps(data, indent=2, sort_keys=sort_keys).encode("ascii")
    write_bytes(path, raw + b"\n")


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


# ---- writing: whole files or none, a full disk named ------------------------------------------------------

_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}  # no space left; disk quota exceeded
_TMP_COUNT = itertools.count()  # temporary names unique within a process (pid: across processes)


class DiskFullError(OSError):
    """The device (or the user's quota) was full while writing `path`; `needed`: bytes the write needed, when
    known. Whatever was being written was removed."""

    def __init__(self, path: str | Path, needed: int | None = None) -> None:
        need = f" (needed ~{_megabytes(needed)} MB)" if needed else ""
        super().__init__(errno.ENOSPC, f"no space left on device while writing {path}{need}", str(path))
        self.path, self.needed = Path(path), needed

    def __str__(self) -> str:
        return str(self.strerror)


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.0f}" if n >= 10e6 else f"{n / 1e6:.1f}" if n >= 1e5 else f"{max(n, 1) / 1e6:.2g}"


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether `exc`, or an error it was raised from or while handling, says the disk or quota is full: an
    OSError, or the message of a writer implemented in Rust (safetensors, tokenizers), which gives the OS error's
    number (torch.save, failing to close its archive after a write failed, raises its own RuntimeError)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL:
            return True
        if any(f"os error {code})" in str(exc) for code in _FULL):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextmanager
def naming_full_disk(path: str | Path, needed: int | None = None) -> Iterator[None]:
    """Re-raise a full disk met inside the block as a DiskFullError naming `path` (what the user asked to write)."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        if is_disk_full(exc):
            raise DiskFullError(path, needed) from None
        raise


def temporary_name(path: str | Path) -> Path:
    """A hidden name beside `path`, unique to this process and call, to write `path` under until it is whole."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{next(_TMP_COUNT)}.tmp")


@contextmanager
def atomic_path(path: str | Path, *, needed: int | None = None) -> Iterator[Path]:
    """A temporary path beside `path` for the block to write; renamed over `path` when the block completes, and
    removed when it fails, so `path` is never seen half written (by a reader, a resume, or a second writer of the
    same path, which writes its own temporary file). A full disk is re-raised as DiskFullError naming `path`."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        with naming_full_disk(path, needed):
            yield tmp
            os.replace(tmp, path)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically (see atomic_path)."""
    with atomic_path(path, needed=len(data)) as tmp:
        tmp.write_bytes(data)


def copy_file(src: str | Path, dst: str | Path) -> None:
    """shutil.copy2 through a temporary name: `dst` is whole or untouched."""
    with atomic_path(dst, needed=Path(src).stat().st_size) as tmp:
        shutil.copy2(src, tmp)


@contextmanager
def writing_dir(directory: str | Path, what: str) -> Iterator[Path]:
    """`directory` made if missing (`what` it is for, should a file stand in its way) and locked (lock_dir) for the
    block; made here and left empty by a block that failed, it is removed again."""
    directory = Path(directory)
    made = not directory.exists()
    make_dir(directory, what)
    try:
        with lock_dir(directory):
            yield directory
    except BaseException:
        if made and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
        raise


@contextmanager
def staged_files(directory: str | Path, what: str) -> Iterator[Path]:
    """`directory` as writing_dir gives it, and a hidden directory inside it for the block to write files into:
    they are moved into `directory` when the block completes (renames: no space needed) and deleted when it fails,
    so that `directory` gets all the new files or none. A full disk names the file in `directory`."""
    with writing_dir(directory, what) as directory:
        stage = temporary_name(directory / "staged")
        stage.mkdir()
        try:
            try:
                yield stage
            except DiskFullError as exc:
                named = directory / exc.path.relative_to(stage) if exc.path.is_relative_to(stage) else exc.path
                raise DiskFullError(named, exc.needed) from None
            for f in sorted(stage.iterdir()):
                os.replace(f, directory / f.name)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


# ---- one writer per directory -------------------------------------------------------------------------

LOCK_FILE = ".lock"
_HELD: dict[Path, DirectoryLock] = {}  # directory -> the lock this process holds on it (re-entrant)
_UNGUARDED: set[Path] = set()  # directories warned about once


class DirectoryInUseError(ValueError):
    """Another process holds the directory's lock."""


class DirectoryLock:
    """The lock `lock_dir` took: DIR/.lock, flock-ed, holding a JSON record of its holder (pid, host, start
    time, command) that a refused writer quotes. `fd` is None where the file system cannot lock."""

    def __init__(self, directory: Path, fd: int | None) -> None:
        self.directory, self.fd, self.depth = directory, fd, 1

    def release(self) -> None:
        self.depth -= 1
        if self.depth or self.fd is None:
            return
        _HELD.pop(self.directory.resolve(), None)
        (self.directory / LOCK_FILE).unlink(missing_ok=True)  # while held: a waiter re-checks the inode
        os.close(self.fd)  # closing releases the flock
        self.fd = None

    def __enter__(self) -> DirectoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_dir(directory: str | Path) -> DirectoryLock:
    """Hold DIRECTORY/.lock (an exclusive flock) until `release()` (or the end of a `with` block), so that a
    second process writing the same directory is refused with a DirectoryInUseError naming the holder. A lock
    left by a process that died is taken over, with a warning naming it (the kernel freed its flock); a file
    system without flock (some network mounts, or no POSIX) leaves the directory unguarded, with a warning.
    The directory must exist. Re-entrant within a process."""
    directory = Path(directory)
    held = _HELD.get(directory.resolve())
    if held is not None:
        held.depth += 1
        return held
    try:
        import fcntl
    except ImportError:  # not POSIX
        return _unguarded(directory, "this system has no flock")
    path = directory / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd, wait=True)
            os.close(fd)
            raise DirectoryInUseError(f"{directory} is in use by another litebert process ({holder}); wait for it to "
                                      "finish or stop it first") from None  # fmt: skip
        except OSError as exc:
            os.close(fd)
            return _unguarded(directory, str(exc))
        if _same_file(fd, path):  # not a file its last holder unlinked after we opened it
            break
        os.close(fd)
    left = _holder(fd)
    if left:
        warnings.warn(f"{directory}: taking over the lock of a litebert process that is no longer running ({left})",
                      stacklevel=2)  # fmt: skip
    started = datetime.now().astimezone().isoformat(timespec="seconds")
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "command": " ".join(sys.argv)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode("utf-8", "replace"), 0)
    lock = _HELD[directory.resolve()] = DirectoryLock(directory, fd)
    return lock


def _unguarded(directory: Path, why: str) -> DirectoryLock:
    if directory.resolve() not in _UNGUARDED:
        _UNGUARDED.add(directory.resolve())
        warnings.warn(f"{directory}: cannot lock the directory ({why}); a second process writing it would not be "
                      "refused", stacklevel=3)  # fmt: skip
    return DirectoryLock(directory, None)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


def _holder(fd: int, *, wait: bool = False) -> str:
    """The holder's record, said in words ("" when there is none); `wait`: give a holder that has just taken the
    lock a moment to write its record."""
    for attempt in range(10 if wait else 1):
        raw = os.pread(fd, 1 << 16, 0)
        if raw or not wait:
            break
        time.sleep(0.05 * (attempt + 1))
    try:
        record = json.loads(raw.decode("utf-8", "replace")) if raw else None
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict):
        return "holder unknown" if wait else ""
    said = f"pid {record.get('pid')} on host {record.get('host')}, started {record.get('started')}"
    return said + (f": {record['command']}" if record.get("command") else "")
