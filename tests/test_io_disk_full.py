"""A full disk: every writer family writes under a temporary name, removes it when the disk fills, names the file and
the space it needed ("no space left on device while writing PATH (needed ~N MB)"), and the command can be run again
once there is room. The disk is filled by a budget of bytes on the files litebert opens for writing (`full_disk`),
and, where the machine lets an unprivileged user namespace mount one, by a real tmpfs a few hundred kB large."""

from __future__ import annotations

import builtins
import errno
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import litebert
from litebert.cli import main
from litebert.data import DataConfig, build, data_stats, read_manifest
from litebert.io import DiskFullError, write_json
from litebert.text import prepare
from litebert.tokenizer.train import train_tokenizer
from litebert.train.checkpoint import latest_checkpoint, save_checkpoint

# The packaged Moby-Dick (the default run's corpus) and the vendored State of the Union addresses: data that ships.
MOBY_DICK = Path(litebert.__file__).resolve().parent / "corpus" / "moby-dick"
SOTU = Path(__file__).resolve().parent / "fixtures" / "corpora" / "sotu"
CHAPTERS = sorted((MOBY_DICK).glob("chapter_*.txt"))[:12]


class _Budget:
    def __init__(self, left: int) -> None:
        self.left = left


class _FillingFile:
    """A file opened for writing on a disk with `budget.left` bytes free: the write that does not fit writes what
    fits and fails with ENOSPC, as write(2) does."""

    def __init__(self, f, budget: _Budget) -> None:
        self._f, self._budget = f, budget

    def write(self, data):
        size = len(data.encode()) if isinstance(data, str) else memoryview(data).nbytes
        if size > self._budget.left:
            if not isinstance(data, str):
                self._f.write(bytes(memoryview(data).cast("B")[: self._budget.left]))
            self._budget.left = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._budget.left -= size
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.fixture
def full_disk(monkeypatch, tmp_path):
    """`full_disk(n)`: from now on, files opened for writing under tmp_path share n free bytes."""
    real_open = builtins.open

    def fill(free: int) -> None:
        budget = _Budget(free)

        def opener(file, mode="r", *args, **kwargs):
            f = real_open(file, mode, *args, **kwargs)
            writing = any(c in mode for c in "wax+")
            inside = isinstance(file, str | Path) and Path(file).resolve().is_relative_to(tmp_path.resolve())
            return _FillingFile(f, budget) if writing and inside else f

        monkeypatch.setattr(builtins, "open", opener)
        monkeypatch.setattr(io, "open", opener)  # pathlib's write_bytes and write_text
        monkeypatch.setattr(shutil, "_USE_CP_SENDFILE", False)  # copies through write(), as on other systems

    return fill


def _leftovers(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if ".tmp" in p.name)


def test_a_json_file_is_replaced_whole_or_left_as_it_was(tmp_path, full_disk):
    write_json({"old": True}, tmp_path / "results.json")
    full_disk(10)
    with pytest.raises(
        DiskFullError,
        match=rf"^no space left on device while writing {tmp_path}/results.json "
        r"\(needed ~\d",
    ):
        write_json({"new": list(range(100))}, tmp_path / "results.json")
    assert (tmp_path / "results.json").read_text() == '{\n  "old": true\n}\n' and _leftovers(tmp_path) == []


def test_data_build_on_a_full_disk_names_the_shard_and_resumes_once_there_is_room(tmp_path, tokenizer_dir, full_disk):
    out = tmp_path / "data"
    config = DataConfig(max_seq_length=64, dupe_factor=2, examples_per_shard=100, window_chars=20_000)
    full_disk(60_000)  # a few shards fit
    with pytest.raises(
        DiskFullError,
        match=r"no space left on device while writing .*data/(train|eval)/shard_\d+ "
        r"\(needed ~0\.\d+ MB\)",
    ):
        build(CHAPTERS, tokenizer_dir, out, config, progress=False)
    written = sorted(p.name for p in (out / "train").iterdir())
    assert written and _leftovers(out) == []  # finished shards only: the one being written was removed
    full_disk(10**9)  # space freed
    manifest = build(CHAPTERS, tokenizer_dir, out, config, progress=False)
    assert manifest == read_manifest(out) and _leftovers(out) == []
    assert data_stats(out, max_examples=10**6).examples == manifest["splits"]["train"]["examples"]  # all verify


def test_tokenizer_train_on_a_full_disk_leaves_no_truncated_file(tmp_path, full_disk, tokenizer_dir):
    # A truncated tokenizer.json was carried along by data build, pretrain and convert to-hf.
    from litebert.hf import write_hf_tokenizer_files

    out = tmp_path / "tok"
    full_disk(1000)
    with pytest.raises(DiskFullError, match=rf"while writing {out}/spiece\.model \(needed ~0\.\d+ MB\)"):
        train_tokenizer(CHAPTERS, out, vocab_size=300, also_write=write_hf_tokenizer_files)
    assert not out.exists()  # made for the tokenizer and removed: a rerun starts clean
    full_disk(10**9)
    shutil.copytree(tokenizer_dir, out)  # an earlier tokenizer there: kept whole when the new one does not fit
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    full_disk(10_000)  # spiece.model (4 kB) and the settings (1 kB) fit, tokenizer.json (47 kB) does not
    with pytest.raises(DiskFullError, match=rf"while writing {out}/tokenizer\.json"):
        train_tokenizer(CHAPTERS, out, vocab_size=300, also_write=write_hf_tokenizer_files)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_weights_on_a_full_disk(tmp_path, monkeypatch):
    # safetensors writes in Rust: its error carries the OS error's number
    from safetensors import SafetensorError

    import litebert.model.weights as weights

    def full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 100)
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    model = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100))
    monkeypatch.setattr(weights, "save_file", full)
    with pytest.raises(DiskFullError, match=rf"while writing {tmp_path}/m/model.safetensors \(needed ~[\d.]+ MB\)"):
        litebert.save(model, tmp_path / "m")
    assert _leftovers(tmp_path) == [] and not (tmp_path / "m" / "model.safetensors").exists()


def test_a_checkpoint_on_a_full_disk_leaves_no_temporary_directory(tmp_path, full_disk):
    # the .tmp-step directory stayed until a later save succeeded, and a resume after freeing space failed again
    def write_model(d: Path) -> None:
        write_json({"weights": 1}, d / "config.json")

    state = {"step": 1, "optimizer": {"m": torch.zeros(50_000)}}
    save_checkpoint(tmp_path, 1, write_model=write_model, trainer_state=state)
    full_disk(100_000)
    with pytest.raises(DiskFullError, match=r"while writing .*checkpoints/step_00000002 \(needed ~0\.2 MB\)"):
        save_checkpoint(tmp_path, 2, write_model=write_model, trainer_state=state)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000001"]
    assert latest_checkpoint(tmp_path).name == "step_00000001"  # a resume starts from the last complete one
    full_disk(10**9)
    assert save_checkpoint(tmp_path, 2, write_model=write_model, trainer_state=state).name == "step_00000002"


def test_text_prepare_on_a_full_disk_leaves_no_file_and_the_cli_says_why(tmp_path, full_disk, capsys):
    full_disk(5000)
    with pytest.raises(DiskFullError, match=rf"while writing {tmp_path}/out.txt \(needed ~0\.\d+ MB\)"):
        prepare(CHAPTERS[:3], tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []
    assert main(["text", "prepare", *map(str, CHAPTERS[:3]), "--out", str(tmp_path / "out.txt")]) == 2
    err = capsys.readouterr().err
    assert f"litebert text: error: no space left on device while writing {tmp_path}/out.txt (needed ~" in err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def _tmpfs_available(tmp_path: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"], capture_output=True
    )
    return probe.returncode == 0


@pytest.mark.slow  # the injected full disk above covers every writer family in the default run
def test_the_commands_on_a_real_full_tmpfs(tmp_path, tokenizer_dir):
    # A private mount namespace (unshare -rm): a tmpfs of 100 kB exists for the commands alone.
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _tmpfs_available(disk):
        pytest.skip("no unprivileged mount namespace to mount a small tmpfs in")
    chapters = " ".join(map(str, CHAPTERS))
    script = f"""
        mount -t tmpfs -o size=100k tmpfs {disk} || exit 99
        {sys.executable} -m litebert tokenizer train {chapters} --vocab-size 3000 --out {disk}/tok
        echo "rc=$?"; ls -A {disk}
        {sys.executable} -m litebert data build {chapters} --tokenizer {tokenizer_dir} --out {disk}/data \\
            --max-seq-length 64 --dupe-factor 5 --examples-per-shard 200 --no-progress
        echo "rc=$?"; find {disk}/data -name '*.tmp*'; echo end
    """
    run = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=900)
    lines = run.stdout.splitlines()
    assert lines[0] == "rc=2" and lines[1] == "rc=2" and lines[2] == "end", run.stdout + run.stderr  # nothing left
    assert "litebert tokenizer: error: no space left on device while writing" in run.stderr
    assert "litebert data: error: no space left on device while writing" in run.stderr
    assert "Traceback" not in run.stderr
