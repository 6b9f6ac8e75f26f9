"""Writing whole files or none: every file litebert writes goes to a temporary name first and is renamed when
whole (`atomic_path`; a new directory that appears whole, such as a checkpoint: `atomic_dir`), and a full disk met
on the way is a `DiskFullError` naming the file and the space it needed, the temporary file removed. A directory
of files (a tokenizer, a model, a converted model) is written by `staged_files`: its old files or all the new ones
at any instant of a kill, a half-moved one recognised by its journal's record and finished by the next writer
(`settle`) or reader (`check_whole`), and what dead processes left behind removed."""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import re
import shutil
import socket
import sys
import warnings
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


@contextmanager
def atomic_dir(
    path: str | Path, *, tmp: str | Path | None = None, needed: int | None = None, fsync: bool = False
) -> Iterator[Path]:
    """A new, empty directory beside `path` for the block to fill, put in `path`'s place whole when the block
    completes (an old `path` removed first) and removed when it fails, so `path` is never seen half written: a
    checkpoint, a shard, a run's final model. `tmp` names that directory where a writer's own clean-up of killed
    writes looks for it (default: temporary_name); one left there by an earlier attempt is replaced. A full disk is
    re-raised as DiskFullError naming `path`; `fsync` as in atomic_path."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else temporary_name(path)
    try:
        with naming_full_disk(path, needed):
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
            yield tmp
            if fsync:
                fsync_path(tmp)
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
            if fsync:
                fsync_path(path.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already after the rename


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
def staged_files(directory: str | Path, what: str, *, discard_unfinished: bool = False) -> Iterator[Path]:
    """`directory` as writing_dir gives it, and a hidden directory inside it for the block to write files into,
    moved into `directory` when the block completes, so that `directory` holds its old files or all the new ones
    at any instant, a kill -9 included (see `settle`). A failure deletes the new files; a full disk names the file
    in `directory`. What killed processes left in `directory` is settled first (`discard_unfinished`: see
    settle)."""
    with writing_dir(directory, what) as directory:
        settle(directory, discard_unfinished=discard_unfinished)
        stage = temporary_name(directory / "staged")
        stage.mkdir()
        try:
            try:
                yield stage
            except DiskFullError as exc:
                named = directory / exc.path.relative_to(stage) if exc.path.is_relative_to(stage) else exc.path
                raise DiskFullError(named, exc.needed) from None
            _commit(stage, directory)
        finally:
            shutil.rmtree(stage, ignore_errors=True)


# A staged directory is committed by one rename: the stage, its record of every file written last, becomes
# DIR/.incoming, the journal. Its files are then moved into DIR one by one and the journal removed. A kill before
# that rename leaves the old files (and a stage of a dead process, removed by the next writer); a kill after it
# leaves a journal, from which the next writer or reader of DIR finishes the moves: the new files, whole.
JOURNAL = ".incoming"
RECORD = ".record.json"  # in the journal: name -> size and sha256 of every file it brings, the writer


def _commit(stage: Path, directory: Path) -> None:
    files = {}  # by path relative to the stage, "/"-separated: a bundle's onnx/model.onnx too
    for f in _staged(stage):
        files[f.relative_to(stage).as_posix()] = {"bytes": f.stat().st_size, "sha256": _sha256(f)}
    record = {"files": files, "pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)}
    with open(stage / RECORD, "w", encoding="utf-8") as out:
        json.dump(record, out)
    os.replace(stage, directory / JOURNAL)  # the new files are committed: old or new, never a mix
    _finish(directory)


def _staged(stage: Path) -> list[Path]:
    """Every file under `stage`, in sub-directories too (a symlink counts as a file, as os.replace moves it)."""
    found = []
    for f in sorted(stage.iterdir()):
        found += _staged(f) if f.is_dir() and not f.is_symlink() else [f]
    return found


def _finish(directory: Path) -> None:
    """Move the journal's files into `directory` (each rename idempotent from wherever a kill left off), check
    every file the record names, then remove the journal."""
    journal = directory / JOURNAL
    record = _read_record(journal)
    for name in sorted(record["files"]):
        if (journal / name).exists() or (journal / name).is_symlink():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(journal / name, directory / name)
    for name, want in sorted(record["files"].items()):
        path = directory / name
        if not path.is_file() or path.stat().st_size != want["bytes"] or _sha256(path) != want["sha256"]:
            raise ValueError(
                f"{path}: differs from the record {journal / RECORD} of the litebert process that wrote it "
                "(changed since?); run the command that writes the directory again"
            )
    (journal / RECORD).unlink()
    for sub in sorted((p for p in journal.rglob("*") if p.is_dir()), reverse=True):  # emptied by the moves
        sub.rmdir()
    journal.rmdir()


def _read_record(journal: Path) -> dict:
    try:
        record = json.loads((journal / RECORD).read_bytes())
        if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
            raise ValueError("not a record")
        return record
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"{journal}: a half-moved output whose record {RECORD} cannot be read ({exc}); run the "
            "command that writes the directory again"
        ) from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def settle(directory: str | Path, *, discard_unfinished: bool = False) -> None:
    """Put `directory` in order after a killed writer, under its lock (the caller holds it): finish the moves of a
    committed journal (the new files, checked against its record), and remove the temporary files and stages
    that processes no longer running left (their names carry their pid: `temporary_name`).
    `discard_unfinished`: remove the journal's files instead, moved or not (a conversion, whose destination is new
    or empty, runs again from there)."""
    directory = Path(directory)
    journal = directory / JOURNAL
    if discard_unfinished and journal.is_dir() and not journal.is_symlink():
        for name in unfinished_files(directory):
            (directory / name).unlink(missing_ok=True)
        shutil.rmtree(journal, ignore_errors=True)
    if journal.is_dir() and not journal.is_symlink():
        if (journal / RECORD).is_file() or any(journal.iterdir()):
            warnings.warn(
                f"{directory}: finishing the move of the files a litebert process that is no longer "
                "running had written",
                stacklevel=3,
            )
            _finish(directory)
        else:
            journal.rmdir()  # killed after the record was moved away: nothing left to do
    for leftover in directory.glob(".*.tmp"):
        match = _TMP_NAME.fullmatch(leftover.name)
        if match and int(match["pid"]) != os.getpid() and not _running(int(match["pid"])):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def unfinished_files(directory: str | Path) -> list[str]:
    """The names of the files a killed writer's journal brings into `directory` (moved already or not); [] when
    there is no journal."""
    journal = Path(directory) / JOURNAL
    if not journal.is_dir():
        return []
    try:
        return sorted(_read_record(journal)["files"])
    except ValueError:
        return sorted(p.relative_to(journal).as_posix() for p in _staged(journal) if p.name != RECORD)


_TMP_NAME = re.compile(r"\..+\.(?P<pid>\d+)-\d+\.tmp")  # temporary_name's


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # another user's process: alive
        return True
    return True


def check_whole(directory: str | Path) -> None:
    """For a reader of an output directory: finish the moves a killed writer left in its journal (taking the
    directory's lock; a writer still at work is a DirectoryInUseError naming it), so a reader never sees a mix of
    old and new files. Nothing to do (and nothing written) without a journal."""
    directory = Path(directory)
    if not (directory / JOURNAL).is_dir():
        return
    try:
        with lock_dir(directory):
            settle(directory)
    except PermissionError as exc:  # a directory this user cannot write: said, not half read
        raise ValueError(
            f"{directory}: half written (a litebert process was killed while moving its files in) "
            f"and not writable here to finish ({exc}); run the command that wrote it again"
        ) from None
