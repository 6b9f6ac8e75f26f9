"""Every writer of a directory, killed (SIGKILL) right after each of its renames in turn, leaves the old output
or the new one whole (a reader finds nothing else), and the next run succeeds.

Each writer runs in a forked child whose os.replace kills the process after its n-th call, for n = 1, 2, ...
until a child finishes unkilled; the directory is then read as every litebert reader reads it (check_whole, which
finishes a committed journal) and compared, file by file, with the old output and with the new one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import signal
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import litebert
from litebert.io import check_whole, staged_files, temporary_name

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _snapshot(directory: Path, complete: str | None = None) -> dict[str, str] | None:
    """name -> sha256 of the files a reader finds in `directory` (None: no output, the directory absent or with no
    file but hidden ones); its lock and leftovers of dead processes (hidden names) are not the output."""
    if not directory.exists() or (complete is not None and not (directory / complete).is_file()):
        return None  # `complete`: the file written last, without which the directory holds no output yet
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "finishing the move of the files ...": said to users, expected here
        check_whole(directory)
    files = {p.name: _digest(p) for p in sorted(directory.iterdir()) if p.is_file() and not p.name.startswith(".")}
    return files or None


def _digest(path: Path) -> str:
    """A file's sha256; a weights file's the digest of its tensors it records (its header's layout may differ
    between two writes of the same tensors), when it records one."""
    from litebert.model.weights import recorded_digest

    return (path.suffix == ".safetensors" and recorded_digest(path)) or hashlib.sha256(path.read_bytes()).hexdigest()


def _killed_after_rename(n: int, write: Callable[[], object]) -> bool:
    """Run `write` in a forked child that SIGKILLs itself right after its n-th os.replace; whether it was
    killed (False: it finished first)."""
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 0
        try:
            import torch

            torch.set_num_threads(1)
            real, count = os.replace, itertools.count(1)

            def replace(src, dst, **kw):
                real(src, dst, **kw)
                if next(count) == n:
                    os.kill(os.getpid(), signal.SIGKILL)

            os.replace = replace
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write()
        except BaseException:  # noqa: BLE001 (a failure is the exit code the parent checks)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, f"the writer failed before rename {n}"
    return False


def _check_every_kill(
    directory: Path,
    write: Callable[[], object],
    old: Path | None,
    *,
    min_renames: int,
    rerun_first: bool = False,
    complete: str | None = None,
) -> None:
    """Kill `write` after each of its renames in turn, with `directory` holding `old`'s files (None: absent) each
    time; every directory left is the old output or the new one whole, and the next run gives the new one.
    `rerun_first`: the next run goes over the directory as the kill left it (a conversion, whose destination must
    be new: once a reader has finished the killed one, it holds a model), then the kill is repeated for the
    reader."""

    def restore() -> None:
        shutil.rmtree(directory, ignore_errors=True)
        if old is not None:
            shutil.copytree(old, directory)

    restore()
    before = _snapshot(directory, complete)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write()
    new = _snapshot(directory, complete)
    assert new and new != before
    for n in itertools.count(1):
        restore()
        if not _killed_after_rename(n, write):
            break
        if rerun_first:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write()  # over the killed conversion's files
            assert _snapshot(directory, complete) == new, f"the run after the kill at rename {n}"
            restore()
            assert _killed_after_rename(n, write)
        found = _snapshot(directory, complete)
        if found not in (before, new):
            mixed = sorted(k for k in (found or {}) if (new or {}).get(k) != found[k])
            raise AssertionError(f"killed after rename {n}: neither the old output nor the new one ({mixed})")
        if not rerun_first:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write()  # the next run succeeds, and gives the new output
            assert _snapshot(directory, complete) == new, f"the run after the kill at rename {n}"
            assert not [p for p in directory.iterdir() if p.name.endswith(".tmp") or p.name == ".incoming"]
    assert n > min_renames, f"the writer made {n - 1} renames only"


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory, moby_dick) -> list[Path]:
    return sorted(moby_dick.glob("chapter_*.txt"))[:3]


def test_tokenizer_train_into_an_existing_tokenizer(tmp_path, tiny_corpus):
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.train import train_tokenizer

    old = tmp_path / "old"
    write_hf_tokenizer_files(train_tokenizer(tiny_corpus, old, vocab_size=300))
    out = tmp_path / "tok"
    train = lambda: train_tokenizer(tiny_corpus, out, vocab_size=400, also_write=write_hf_tokenizer_files)  # noqa: E731
    _check_every_kill(out, train, old, min_renames=5)


def test_tokenizer_add_words(tmp_path, tiny_corpus):
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.add_words import add_words
    from litebert.tokenizer.train import train_tokenizer

    old, base = tmp_path / "old", tmp_path / "base"
    write_hf_tokenizer_files(train_tokenizer(tiny_corpus, old, vocab_size=300))
    write_hf_tokenizer_files(train_tokenizer(tiny_corpus, base, vocab_size=400))
    out = tmp_path / "tok"
    _check_every_kill(
        out,
        lambda: add_words(base, ["harpoonist", "ambergris"], out, also_write=write_hf_tokenizer_files),
        old,
        min_renames=5,
    )


def test_save_over_a_saved_model(tmp_path, model_dir):
    import torch

    model = litebert.load(model_dir)
    with torch.no_grad():
        model.albert.embeddings.word_embeddings.weight.add_(1.0)
    out = tmp_path / "model"
    _check_every_kill(out, lambda: litebert.save(model, out, tokenizer_dir=model_dir), model_dir, min_renames=5)


@pytest.mark.parametrize("direction", ["to-hf", "from-hf"])
def test_convert(tmp_path, model_dir, direction):
    from litebert import hf

    if direction == "to-hf":
        src, convert = model_dir, hf.export_hf
    else:
        src, convert = hf.export_hf(model_dir, tmp_path / "hf"), hf.import_hf
    out = tmp_path / "out"
    _check_every_kill(out, lambda: convert(src, out), None, min_renames=5, rerun_first=True)


def test_convert_from_tf(tmp_path):
    from litebert import hf

    out = tmp_path / "out"
    _check_every_kill(
        out, lambda: hf.convert_tf(FIXTURES / "tf" / "grouped", out), None, min_renames=4, rerun_first=True
    )


def test_finetune_best(tmp_path, model_dir):
    from litebert.finetune import FinetuneConfig
    from litebert.finetune.heads import FinetuneModel, build_head
    from litebert.finetune.run import _save_whole
    from litebert.finetune.tasks import get_task
    from litebert.hf import load_tokenizer

    data = str(FIXTURES / "tasks" / "sst2.tsv")
    cfg = FinetuneConfig(
        init=str(model_dir), out=str(tmp_path / "run"), task="classification", max_seq_length=64, train=data, dev=data
    )
    tok, task = load_tokenizer(model_dir), get_task("classification")
    state = {"labels": ["0", "1"]}
    base = litebert.load(model_dir)
    model = FinetuneModel(base, build_head(task.head, base.config, task.num_outputs(state), "cls"))
    best = tmp_path / "best"
    _save_whole(model, best, "classification", state, cfg, tok)
    old = tmp_path / "old"
    shutil.copytree(best, old)
    next(model.head.parameters()).data.add_(1.0)
    _check_every_kill(best, lambda: _save_whole(model, best, "classification", state, cfg, tok), old, min_renames=5)


@pytest.mark.slow
def test_data_build_resumes_to_the_same_data(tmp_path, tokenizer_dir, tiny_corpus):
    from litebert.data import DataConfig
    from litebert.data.build import build

    config = DataConfig(max_seq_length=32, dupe_factor=2, examples_per_shard=200, window_chars=20_000)
    out = tmp_path / "data"
    _check_every_kill(
        out,
        lambda: build(tiny_corpus, tokenizer_dir, out, config, progress=False),
        None,
        min_renames=6,
        complete="manifest.json",
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["train"]["shards"] > 2


def test_a_dead_process_leftovers_are_removed_and_a_live_ones_kept(tmp_path):
    out = tmp_path / "tok"
    out.mkdir()
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a pid no process holds now
    left = [out / f".staged.{dead}-0.tmp", out / f".spiece.model.{dead}-3.tmp"]
    left[0].mkdir()
    (left[0] / "spiece.model").write_bytes(b"half")
    left[1].write_bytes(b"half")
    live = out / f".spiece.model.{os.getppid()}-0.tmp"  # the process that runs pytest is alive
    live.write_bytes(b"someone's")
    mine = temporary_name(out / "x")
    mine.write_bytes(b"this process's")
    with staged_files(out, "the tokenizer") as stage:
        (stage / "spiece.model").write_bytes(b"new")
    assert not any(p.exists() for p in left) and live.exists() and mine.exists()
    assert (out / "spiece.model").read_bytes() == b"new"


def test_a_half_moved_directory_is_finished_by_its_reader_and_a_changed_file_named(tmp_path, model_dir):
    out = tmp_path / "model"
    assert not _killed_after_rename(10**6, lambda: None)  # the harness: a run without renames is not killed
    shutil.copytree(model_dir, tmp_path / "src")

    def killed_at(k: int) -> bool:  # into a new directory each time
        shutil.rmtree(out, ignore_errors=True)
        return _killed_after_rename(k, lambda: litebert.save(litebert.load(model_dir), out, tokenizer_dir=model_dir))

    n = next(n for n in itertools.count(1) if killed_at(n) and (out / ".incoming").is_dir())
    assert killed_at(n + 1) and (out / ".incoming").is_dir()  # committed, a file moved, others not
    with pytest.warns(UserWarning, match="finishing the move of the files a litebert process"):
        model = litebert.load(out)
    assert model.config == litebert.load(model_dir).config and not (out / ".incoming").exists()
    assert killed_at(n + 1)
    moved = next(p for p in out.iterdir() if p.is_file() and not p.name.startswith("."))
    moved.write_bytes(moved.read_bytes() + b" ")  # changed after the killed writer moved it in
    with pytest.raises(ValueError, match=f"{moved}: differs from the record"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        litebert.load(out)


def test_a_staged_output_with_a_subdirectory_is_moved_whole_after_a_kill_between_its_moves(tmp_path, monkeypatch):
    from litebert.io import writes

    out = tmp_path / "bundle"
    real_replace, calls = os.replace, []

    def dies_after_the_first_move(src, dst):
        calls.append(dst)
        if len(calls) == 3:  # the stage became the journal, one file moved in: killed here
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(writes.os, "replace", dies_after_the_first_move)
    with pytest.raises(KeyboardInterrupt), writes.staged_files(out, "the bundle") as stage:
        (stage / "onnx").mkdir()
        (stage / "onnx" / "model.onnx").write_bytes(b"graph")
        (stage / "config.json").write_text("{}")
        (stage / "tokenizer.json").write_text("[]")
    monkeypatch.setattr(writes.os, "replace", real_replace)
    assert (out / writes.JOURNAL).is_dir() and writes.unfinished_files(out) == [
        "config.json",
        "onnx/model.onnx",
        "tokenizer.json",
    ]
    with pytest.warns(UserWarning, match="finishing the move"):
        writes.check_whole(out)
    assert (out / "onnx" / "model.onnx").read_bytes() == b"graph" and (out / "tokenizer.json").read_text() == "[]"
    assert not (out / writes.JOURNAL).exists()
