"""Shards are not trusted blindly: the manifest records every array file's sha256 and a reader verifies each shard
(once per process) and the ranges of its values, naming the shard's file and the field; a manifest's fields are
checked by name; data of the earlier format is refused with a way out."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import litebert.data.integrity as integrity
from litebert.cli import main
from litebert.data import DataConfig, PretrainingBatches, build, data_stats, read_manifest
from litebert.data.shards import ShardSet

CONFIG = DataConfig(max_seq_length=32, dupe_factor=1, examples_per_shard=64, eval_fraction=0.0)


@pytest.fixture(scope="module")
def built(moby_dick, tokenizer_dir, tmp_path_factory) -> Path:
    """Statically masked data of two chapters: a few shards of 64 examples."""
    corpus = sorted(moby_dick.glob("chapter_*.txt"))[:2]
    out = tmp_path_factory.mktemp("integrity") / "data"
    build(corpus, tokenizer_dir, out, CONFIG, progress=False)
    return out


@pytest.fixture
def data(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "data")
    return tmp_path / "data"


def _readers(data: Path) -> list[Callable[[], object]]:
    """What reads every shard: data stats, and a training batch of the whole split."""
    n = read_manifest(data)["splits"]["train"]["examples"]
    return [lambda: data_stats(data), lambda: next(iter(PretrainingBatches(data, batch_size=n)))]


def test_the_manifest_records_each_shard_array_sha256(built):
    manifest = read_manifest(built)
    assert manifest["format_version"] == 2
    digests = manifest["splits"]["train"]["sha256"]
    assert len(digests) == manifest["splits"]["train"]["shards"] > 1
    for k, files in enumerate(digests):
        shard = built / "train" / f"shard_{k:05d}"
        assert sorted(files) == sorted(p.stem for p in shard.glob("*.npy"))
        assert all(hashlib.sha256((shard / f"{n}.npy").read_bytes()).hexdigest() == d for n, d in files.items())


def test_a_flipped_token_id_is_named_by_its_checksum(data, capsys):
    # a flipped id trained silently
    path = data / "train" / "shard_00001" / "input_ids.npy"
    raw = bytearray(path.read_bytes())
    raw[-7] ^= 0x01  # one bit of one id, past the header
    path.write_bytes(bytes(raw))
    for read in _readers(data):
        with pytest.raises(
            ValueError,
            match=f"{path}: sha256 .* differs from the .* the manifest records: the file "
            "changed after the data was built",
        ):
            read()
    assert main(["data", "stats", str(data)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: sha256" in err and "Traceback" not in err


def _rewrite(data: Path, name: str, change: Callable[[np.ndarray], np.ndarray], shard: int = 0) -> Path:
    """Replace one array of a shard and record its new sha256 in the manifest, as a builder with a bug (or a
    crafted directory) would: the checksum agrees, the values do not."""
    path = data / "train" / f"shard_{shard:05d}" / f"{name}.npy"
    np.save(path, change(np.load(path)))
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["train"]["sha256"][shard][name] = hashlib.sha256(path.read_bytes()).hexdigest()
    (data / "manifest.json").write_text(json.dumps(manifest))
    return path


def _id_past_vocab(ids: np.ndarray) -> np.ndarray:
    out = ids.astype(np.int32)
    out[5] = 70_000
    return out


def _offsets_back(offsets: np.ndarray) -> np.ndarray:
    out = offsets.copy()
    out[3] = out[1]
    return out


def _label_7(labels: np.ndarray) -> np.ndarray:
    out = labels.copy()
    out[2] = 7
    return out


def _position_past_end(positions: np.ndarray) -> np.ndarray:
    out = positions.copy()
    out[4, 0] = 500
    return out


RANGES = [
    ("input_ids", _id_past_vocab, r"id 70000 at position 5 is not in the vocabulary \(vocab_size 3000\)"),
    ("offsets", _offsets_back, r"example 2 spans \d+..\d+, not 1 to 32 tokens"),
    ("label", _label_7, r"example 2: 7 is not one of \[0, 1\] \(objective 'sop'\)"),
    ("masked_positions", _position_past_end, r"example 4: \[500, .*\] points outside its \d+ tokens"),
]


@pytest.mark.parametrize(("name", "change", "why"), RANGES, ids=[r[0] for r in RANGES])
def test_values_out_of_range_are_named_with_shard_and_field(data, name, change, why, capsys):
    # an id past the vocabulary was an IndexError traceback in pretrain and data stats; a bad offset or label gave
    # numpy's words
    path = _rewrite(data, name, change)
    for read in _readers(data):
        with pytest.raises(ValueError, match=f"{path}: {why}; the shard is corrupt"):
            read()
    assert main(["data", "stats", str(data)]) == 2
    assert f"{path}: " in capsys.readouterr().err


def test_a_shard_is_verified_at_every_read_and_its_ranges_once_per_content(data, monkeypatch):
    checked = []
    real = integrity.check_ranges
    monkeypatch.setattr(integrity, "check_ranges", lambda d, *a: checked.append(d.name) or real(d, *a))
    manifest = read_manifest(data)
    shards = ShardSet(data, "train", manifest, cache=1)
    shards.shard(0), shards.shard(1), shards.shard(0)  # evicted and read again: hashed again, ranges known
    assert checked == ["shard_00000", "shard_00001"]
    path = data / "train" / "shard_00000" / "label.npy"
    path.write_bytes(path.read_bytes())  # the same bytes rewritten: still the data that was built
    ShardSet(data, "train", manifest).shard(0)
    assert checked == ["shard_00000", "shard_00001"]


def test_a_shard_rewritten_while_a_run_reads_it_is_named_and_never_trained_on(data):
    # Shards were memory-mapped and hashed once per process: a file rewritten in place changed the examples after
    # they were verified (and one cut short ended the process with SIGBUS); one replaced was trusted by its stat.
    manifest = read_manifest(data)
    shards = ShardSet(data, "train", manifest, cache=1)
    held = shards.shard(0)
    before = {name: np.array(arr) for name, arr in held.items()}
    path = data / "train" / "shard_00000" / "input_ids.npy"
    ids = np.load(path)
    with path.open("r+b") as f:  # in place, as a second build into the same --out would
        f.seek(-ids.nbytes, 2)
        f.write(np.roll(ids, 1).tobytes())
    assert all(np.array_equal(held[name], before[name]) for name in held)  # the verified bytes stay in use
    shards.shard(1)  # evicts shard 0: the next read of it reads the file again
    with pytest.raises(ValueError, match=f"{path}: sha256 .* differs .*: the file changed after the data was built"):
        shards.shard(0)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])  # cut short
    with pytest.raises(ValueError, match=f"{path}: truncated or corrupt"):
        ShardSet(data, "train", manifest).shard(0)


def _edit_manifest(data: Path, edit: Callable[[dict], None]) -> None:
    manifest = json.loads((data / "manifest.json").read_text())
    edit(manifest)
    (data / "manifest.json").write_text(json.dumps(manifest))


MANIFESTS = [
    (
        lambda m: m.pop("settings"),
        r"field 'settings' must be an object \(the DataConfig the data was built with\), "
        "got null",
    ),
    (
        lambda m: m.update(splits="x"),
        "field 'splits' must be an object with 'train' and 'eval', each an object, got \"x\"",
    ),
    (lambda m: m["splits"]["train"].update(sha256=[]), r"field 'splits.train.sha256' must be a list of \d+ objects"),
    (lambda m: m["settings"].update(colour="red"), r"field 'settings': unknown DataConfig field\(s\) \['colour'\]"),
    (lambda m: m.update(vocab_size="big"), "field 'vocab_size' must be a positive integer"),
    (
        lambda m: m.update(format_version=1),
        r"data format 1, written by an earlier litebert \(format 2 records a "
        r"checksum of every shard, which readers verify\); rebuild the data \(`litebert data build` into an empty",
    ),
]


@pytest.mark.parametrize(
    ("edit", "why"), MANIFESTS, ids=["no-settings", "splits-x", "sha256", "settings", "vocab", "format-1"]
)
def test_a_manifest_field_of_the_wrong_kind_is_named(data, edit, why, capsys):
    # no settings was KeyError 'settings'; "splits": "x" a TypeError traceback
    _edit_manifest(data, edit)
    with pytest.raises(ValueError, match=f"{data / 'manifest.json'}: {why}"):
        data_stats(data)
    assert main(["data", "stats", str(data)]) == 2
    err = capsys.readouterr().err
    assert f"{data / 'manifest.json'}: " in err and "Traceback" not in err
