"""One writer per directory: `litebert.io.lock_dir`, and the commands that hold it (data build, finetune, tokenizer
train, convert, pretrain), checked with real processes: a second writer is refused with the holder named, and the
lock of a process that was killed is taken over, with a warning."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import litebert
from litebert.cli import main
from litebert.hf import export_hf
from litebert.io import LOCK_FILE, DirectoryInUseError, lock_dir, staged_files

# The packaged Moby-Dick (the default run's corpus) and the vendored State of the Union addresses: data that ships.
MOBY_DICK = Path(litebert.__file__).resolve().parent / "corpus" / "moby-dick"
SOTU = Path(__file__).resolve().parent / "fixtures" / "corpora" / "sotu"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOLD = (
    "import sys, time; from litebert.io import lock_dir; lock_dir(sys.argv[1]); print('held', flush=True); "
    "time.sleep(300)"
)


def _litebert(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "litebert", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def _holder(directory: Path) -> subprocess.Popen:
    """A process that holds `directory`'s lock until it is killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _wait_for_lock(directory: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    """Until `proc` holds `directory`'s lock (its record names its pid)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            if json.loads((directory / LOCK_FILE).read_text())["pid"] == proc.pid:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{proc.args} never took the lock of {directory}")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate()


def test_a_lock_is_reentrant_in_its_process_and_leaves_nothing_behind(tmp_path):
    with lock_dir(tmp_path) as lock:
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname() and record["started"]
        with lock_dir(tmp_path) as again:  # the same process: a resume takes it before its checks, and again
            assert again is lock
        assert (tmp_path / LOCK_FILE).is_file()  # the outer holder still holds it
    assert not (tmp_path / LOCK_FILE).exists()


def test_another_process_holding_the_lock_is_named(tmp_path):
    holder = _holder(tmp_path)
    try:
        named = rf"{holder.pid} on host {socket.gethostname()}, started \d{{4}}-.*\); wait for it"
        with pytest.raises(
            DirectoryInUseError, match=rf"{tmp_path} is in use by another litebert process \(pid {named}"
        ):
            lock_dir(tmp_path)
    finally:
        _kill(holder)
    # killed: the kernel freed its flock; its record is left, and the next writer says it takes the lock over
    with pytest.warns(
        UserWarning,
        match=rf"taking over the lock of a litebert process that is no longer running "
        rf"\(pid {holder.pid} on host",
    ):
        lock = lock_dir(tmp_path)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_file_system_without_flock_leaves_the_directory_unguarded_with_a_warning(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)  # as some network file systems answer
    with pytest.warns(
        UserWarning,
        match=rf"{tmp_path}: cannot lock the directory \(.*No locks available\); a second "
        "process writing it would not be refused",
    ):
        lock = lock_dir(tmp_path)
    lock.release()


def test_staged_files_appear_together_or_not_at_all(tmp_path):
    out = tmp_path / "tok"
    with pytest.raises(RuntimeError), staged_files(out, "the tokenizer") as stage:
        (stage / "spiece.model").write_bytes(b"new")
        raise RuntimeError("training failed")
    assert not out.exists()  # made for the files, removed with them
    out.mkdir()
    (out / "spiece.model").write_bytes(b"old")
    with pytest.raises(RuntimeError), staged_files(out, "the tokenizer") as stage:
        (stage / "spiece.model").write_bytes(b"new")
        raise RuntimeError("failed after the first file")
    assert [p.name for p in out.iterdir()] == ["spiece.model"] and (out / "spiece.model").read_bytes() == b"old"
    with staged_files(out, "the tokenizer") as stage:
        (stage / "spiece.model").write_bytes(b"new")
        (stage / "tokenizer.json").write_bytes(b"{}")
    assert sorted(p.name for p in out.iterdir()) == ["spiece.model", "tokenizer.json"]


def test_a_second_data_build_into_the_same_out_is_refused_and_a_killed_one_resumed(tmp_path, tokenizer_dir):
    # Two builds into one --out corrupted each other (a rename onto another's shard, stray .tmp directories, a
    # shard without its arrays). The second is refused while the first runs; the first, killed, leaves a lock
    # that the next build takes over, and its finished shards, which it resumes from.
    corpus = MOBY_DICK
    out = tmp_path / "data"
    settings = [
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(out),
        "--max-seq-length",
        "64",
        "--dupe-factor",
        "40",
        "--examples-per-shard",
        "500",
        "--window-chars",
        "20000",
        "--no-progress",
    ]
    first = _litebert("data", "build", str(corpus), *settings)
    try:
        _wait_for_lock(out, first)
        second = subprocess.run(
            [sys.executable, "-m", "litebert", "data", "build", str(corpus), *settings],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 2, second.stderr
        assert f"{out} is in use by another litebert process (pid {first.pid} on host" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        _kill(first)
    assert first.returncode == -signal.SIGKILL
    with pytest.warns(UserWarning, match=f"taking over the lock .* no longer running \\(pid {first.pid} "):
        lock_dir(out).release()  # what the next build says first; it then resumes from the finished shards


@pytest.mark.slow
def test_concurrent_data_builds_into_one_out_never_corrupt_it(tmp_path, tokenizer_dir):
    from litebert.data import data_stats, read_manifest

    corpus = [str(p) for p in sorted((MOBY_DICK).glob("chapter_*.txt"))[:30]]
    for trial in range(3):
        out = tmp_path / f"data{trial}"
        args = [
            "data",
            "build",
            *corpus,
            "--tokenizer",
            str(tokenizer_dir),
            "--out",
            str(out),
            "--max-seq-length",
            "64",
            "--dupe-factor",
            "3",
            "--examples-per-shard",
            "200",
            "--window-chars",
            "5000",
            "--no-progress",
        ]
        procs = [_litebert(*args) for _ in range(2)]
        results = [(p.wait(timeout=600), p.communicate()[1]) for p in procs]
        for rc, err in results:
            assert rc == 0 or (rc == 2 and "is in use by another litebert process (pid" in err), err
        assert any(rc == 0 for rc, _ in results)
        manifest = read_manifest(out)
        assert not list(out.glob("*/*.tmp")) and not (out / LOCK_FILE).exists()
        assert data_stats(out, max_examples=10**6).examples == manifest["splits"]["train"]["examples"]  # all verify


def test_a_second_finetune_into_the_same_out_is_refused(tmp_path, model_dir):
    # Both exited 0, and best/ held the other run's model.
    data = str(FIXTURES / "tasks" / "sst2.tsv")
    args = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "ft"),
        "--max-seq-length",
        "32",
        "--batch-size",
        "4",
        "--eval-every",
        "100000",
    ]
    first = _litebert(*args, "--max-steps", "1000000")
    try:
        _wait_for_lock(tmp_path / "ft", first)
        second = subprocess.run(
            [sys.executable, "-m", "litebert", *args, "--max-steps", "1"], capture_output=True, text=True, timeout=300
        )
        assert second.returncode == 2, second.stderr
        assert f"is in use by another litebert process (pid {first.pid} on host" in second.stderr
    finally:
        _kill(first)
    assert not (tmp_path / "ft" / "best").exists()  # the refused run wrote nothing


def test_tokenizer_train_and_convert_hold_their_out_directory(tmp_path, model_dir, capsys):
    (tmp_path / "tok").mkdir()
    holder = _holder(tmp_path / "tok")
    try:
        corpus = str(SOTU / "1790_george_washington_n.txt")
        assert main(["tokenizer", "train", corpus, "--vocab-size", "200", "--out", str(tmp_path / "tok")]) == 2
        assert f"is in use by another litebert process (pid {holder.pid} on host" in capsys.readouterr().err
    finally:
        _kill(holder)
    (tmp_path / "hf").mkdir()
    holder = _holder(tmp_path / "hf")
    try:
        with pytest.raises(DirectoryInUseError, match=f"pid {holder.pid}"):
            export_hf(model_dir, tmp_path / "hf")
    finally:
        _kill(holder)
    assert [p.name for p in (tmp_path / "hf").iterdir()] == [LOCK_FILE]  # nothing written beside the holder's
