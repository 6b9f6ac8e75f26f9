"""One writer per directory: a command that writes a directory holds its lock (`lock_dir`, DIR/.lock), and a
second writer is refused with the holder named. Work that several processes would each do once (a suite's
tokenised features) is serialised by `waiting_lock` instead: the others wait, then find it done."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

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
            raise DirectoryInUseError(
                f"{directory} is in use by another litebert process ({holder}); wait for it to finish or stop it first"
            ) from None
        except OSError as exc:
            os.close(fd)
            return _unguarded(directory, str(exc))
        if _same_file(fd, path):  # not a file its last holder unlinked after we opened it
            break
        os.close(fd)
    left = _holder(fd)
    if left:
        warnings.warn(
            f"{directory}: taking over the lock of a litebert process that is no longer running ({left})", stacklevel=2
        )
    started = datetime.now().astimezone().isoformat(timespec="seconds")
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": started, "command": " ".join(sys.argv)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode("utf-8", "replace"), 0)
    lock = _HELD[directory.resolve()] = DirectoryLock(directory, fd)
    return lock


def _unguarded(directory: Path, why: str) -> DirectoryLock:
    if directory.resolve() not in _UNGUARDED:
        _UNGUARDED.add(directory.resolve())
        warnings.warn(
            f"{directory}: cannot lock the directory ({why}); a second process writing it would not be refused",
            stacklevel=3,
        )
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


@contextlib.contextmanager
def waiting_lock(path: str | Path) -> Iterator[None]:
    """An exclusive flock on the file `path` for the block, waited for while another process holds it. The file
    stays, so that every process locks the same inode. Unguarded where there is no flock (not POSIX, or a file
    system without it): at worst two processes do the same work."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        with contextlib.suppress(OSError):  # a file system without flock: unguarded, as above
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the flock
