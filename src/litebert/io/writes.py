"""Writing whole files or none: every file litebert writes goes to a temporary name first and is renamed when
whole (`atomic_path`; a directory of files, `staged_files`), and a full disk met on the way is a `DiskFullError`
naming the file and the space it needed, the temporary file removed."""

from __future__ import annotations

import errno
import itertools
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from litebert.io.files import make_dir
from litebert.io.locks import lock_dir

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


def fsync_path(path: str | Path) -> None:
    """Flush a file, or a directory's entries (a rename into it), to the device: what a crash must not lose."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path, *, needed: int | None = None, fsync: bool = False) -> Iterator[Path]:
    """A temporary path beside `path` for the block to write; renamed over `path` when the block completes, and
    removed when it fails, so `path` is never seen half written (by a reader, a resume, or a second writer of the
    same path, which writes its own temporary file). A full disk is re-raised as DiskFullError naming `path`.
    `fsync`: the file is on the device before the rename, and the rename before the call returns (a power cut
    leaves the old file or the new one whole, never an empty one)."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        with naming_full_disk(path, needed):
            yield tmp
            if fsync:
                fsync_path(tmp)
            os.replace(tmp, path)
            if fsync:
                fsync_path(path.parent)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes, *, fsync: bool = False) -> None:
    """Write `data` to `path` atomically (see atomic_path)."""
    with atomic_path(path, needed=len(data), fsync=fsync) as tmp:
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
