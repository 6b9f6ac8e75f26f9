"""Damaged shards and text-free corpora: every error names the file and what is wrong, through `data stats`,
training batches and a resumed `data build`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from litebert.cli import main
from litebert.data import DataConfig, PretrainingBatches, build, data_stats, read_manifest

CONFIG = DataConfig(max_seq_length=32, dupe_factor=1, examples_per_shard=64, eval_fraction=0.0)


@pytest.fixture(scope="module")
def small(moby_dick, tokenizer_dir, tmp_path_factory) -> tuple[list[Path], Path]:
    """A corpus of two chapters and its statically masked data (a few shards of 64 examples)."""
    corpus = sorted(moby_dick.glob("chapter_*.txt"))[:2]
    out = tmp_path_factory.mktemp("shards") / "data"
    build(corpus, tokenizer_dir, out, CONFIG, progress=False)
    return corpus, out


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40])  # the header survives, the data is cut


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x80\x04garbage, not an array")


def _float(path: Path) -> None:
    np.save(path, np.load(path).astype(np.float32))


def _wide(path: Path) -> None:
    np.save(path, np.zeros((len(np.load(path)), 5), dtype=np.int64))


DAMAGE: list[tuple[str, Callable[[Path], None], str]] = [
    ("input_ids", _truncate, "truncated or corrupt"),
    ("label", _garbage, "truncated or corrupt"),
    ("masked_labels", Path.unlink, "missing"),
    ("a_len", _float, "dtype float32, expected integers"),
    ("ngrams", _wide, r"shape \(64, 5\), expected \(64, 3\)"),
]


@pytest.mark.parametrize(("name", "damage", "why"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_shard_array_is_named(small, tokenizer_dir, tmp_path, capsys, name, damage, why):
    data = tmp_path / "data"
    shutil.copytree(small[1], data)
    path = data / "train" / "shard_00000" / f"{name}.npy"
    damage(path)
    message = f"{path}: {why}"
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        data_stats(data)
    with pytest.raises((ValueError, FileNotFoundError), match=message):  # a batch of the whole split: every shard
        next(iter(PretrainingBatches(data, batch_size=read_manifest(data)["splits"]["train"]["examples"])))
    assert main(["data", "stats", str(data)]) == 2
    assert f"{path}: " in capsys.readouterr().err


def test_a_damaged_shard_stops_a_resumed_build(small, tokenizer_dir, tmp_path):
    corpus, built = small
    data = tmp_path / "data"
    shutil.copytree(built, data)
    (data / "manifest.json").unlink()  # an interrupted build: the rerun resumes from the finished shards
    path = data / "train" / "shard_00000" / "a_len.npy"
    _garbage(path)
    with pytest.raises(ValueError, match=f"{path}: truncated or corrupt"):
        build(corpus, tokenizer_dir, data, CONFIG, progress=False)


def test_a_corpus_that_normalises_to_nothing_is_an_empty_corpus(small, tokenizer_dir, tmp_path):
    """Only zero-width spaces: the same refusal, and the same directory left behind, as a corpus of blank lines."""
    zero_width = tmp_path / "zw.txt"
    zero_width.write_text("\u200b\u200b\n\n\u200b\n")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    for raw in (zero_width, blank):
        with pytest.raises(ValueError, match=f"empty corpus: no sentences found in {raw}"):
            build([raw], tokenizer_dir, tmp_path / raw.stem, CONFIG, progress=False)
    left = [sorted(p.name for p in (tmp_path / raw.stem).iterdir()) for raw in (zero_width, blank)]
    assert left[0] == left[1] and "manifest.json" not in left[0]
    assert (tmp_path / "zw" / "windows.jsonl").read_text() == ""
    build(small[0], tokenizer_dir, tmp_path / "zw", CONFIG, progress=False)  # the directory takes other inputs
