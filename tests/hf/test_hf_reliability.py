"""Model directories let nothing in from elsewhere: a sharded index names plain files beside it; and a conversion
that fails leaves its destination as it was, so that it can simply be run again."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import litebert
from litebert import hf
from litebert.io import DiskFullError


@pytest.fixture
def sharded(tmp_path):
    """A transformers directory whose weights are one shard named by model.safetensors.index.json."""
    litebert.save(litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100)), tmp_path / "ours")
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    (tmp_path / "hf" / "model.safetensors").rename(tmp_path / "hf" / "model-00001-of-00001.safetensors")
    return tmp_path / "hf"


def _index(directory, shard: object) -> None:
    weight_map = {"albert.embeddings.word_embeddings.weight": shard}  # the shard holds them all
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.mark.parametrize(
    "name", ["../outside.safetensors", "../../x.safetensors", "/tmp/x.safetensors", "sub/a", "..", "", 3]
)
def test_an_index_naming_a_shard_outside_the_model_directory_is_refused(sharded, tmp_path, name):
    shutil.copy(sharded / "model-00001-of-00001.safetensors", tmp_path / "outside.safetensors")  # readable there
    _index(sharded, name)
    with pytest.raises(
        ValueError,
        match=rf"model\.safetensors\.index\.json: weight_map names the shard "
        rf"{json.dumps(name) if isinstance(name, int) else repr(name)}.*, which is not a file name in "
        "the model directory",
    ):
        litebert.load(sharded)


def test_an_index_of_plain_shard_names_loads(sharded, tmp_path):
    _index(sharded, "model-00001-of-00001.safetensors")
    loaded, reference = litebert.load(sharded).state_dict(), litebert.load(tmp_path / "ours").state_dict()
    assert loaded.keys() == reference.keys() and all(torch.equal(loaded[k], reference[k]) for k in loaded)


def test_a_failed_conversion_leaves_its_destination_as_it_was(tmp_path, monkeypatch):
    from safetensors import SafetensorError

    import litebert.model.weights as weights

    litebert.save(litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100)), tmp_path / "ours")

    def full(tensors, filename, metadata=None):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(weights, "save_file", full)
    with pytest.raises(DiskFullError, match=f"while writing {tmp_path / 'hf' / 'model.safetensors'}"):
        hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()  # a partial export was refused as "already holds a model" on the rerun
    monkeypatch.undo()
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    assert litebert.load(tmp_path / "hf").config.vocab_size == 100
