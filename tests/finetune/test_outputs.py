"""Tests that inference outputs go where they are named and a model never runs with another model's tokenizer:
`litebert embed` and litebert.finetune.embed (its --out path, a tokenizer whose size is not the model's vocab_size)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from litebert.cli import main
from litebert.finetune.embed import load_encoder
from litebert.hf.tokenizer import copy_tokenizer_with_hf_files as copy_tokenizer
from litebert.tokenizer import add_words
from litebert.tokenizer.train import train_tokenizer

os.environ["HF_HUB_OFFLINE"] = "1"


def test_embed_writes_the_path_it_reports_and_refuses_a_directory(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Call me Ishmael.\nSome years ago.\n")
    out = tmp_path / "emb"  # no .npy suffix: np.save(path) would have written emb.npy
    assert main(["embed", str(tmp_path / "in.txt"), "--init", str(model_dir), "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(out)
    assert np.load(out).shape == (2, 64) and not (tmp_path / "emb.npy").exists()
    (tmp_path / "dir").mkdir()
    assert main(["embed", str(tmp_path / "in.txt"), "--init", str(model_dir), "--out", str(tmp_path / "dir")]) == 2
    assert f"{tmp_path / 'dir'}: a directory; --out names the .npy file to write" in capsys.readouterr().err
    assert not (tmp_path / "dir.npy").exists() and not any((tmp_path / "dir").iterdir())


def test_embed_refuses_a_tokenizer_of_another_size_than_the_model(model_dir, moby_dick, tmp_path, capsys):
    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:4]
    smaller = train_tokenizer(chapters, tmp_path / "smaller", vocab_size=400)  # another tokenizer altogether
    grown, _ = add_words(model_dir, ["harpooneerz"], tmp_path / "grown")  # the model's, one piece longer
    (tmp_path / "in.txt").write_text("Call me Ishmael.\n")  # no new word: the grown one would run without an error
    for tok in (smaller, grown):
        model = tmp_path / f"model-{tok.vocab_size}"
        shutil.copytree(model_dir, model)
        copy_tokenizer(tok.dir, model)  # what `tokenizer train / add-words --out MODEL_DIR` used to do
        message = rf"tokenizer in .*{model.name} has {tok.vocab_size} pieces but the model's vocab_size is 3000; put"
        with pytest.raises(ValueError, match=message):
            load_encoder(model)
        args = ["embed", str(tmp_path / "in.txt"), "--init", str(model), "--out", str(tmp_path / "x.npy")]
        assert main(args) == 2
        assert f"has {tok.vocab_size} pieces but the model's vocab_size is 3000" in capsys.readouterr().err
        assert not (tmp_path / "x.npy").exists()


def test_outputs_never_overwrite_their_inputs_and_weights_follow_the_umask(model_dir, tmp_path, capsys):
    # `embed lines.txt --out lines.txt` replaced the text with an array; `predict --out MODEL/finetune.json`
    # destroyed the model. model.safetensors was written 0600 (mkstemp's) beside 0644 files.
    (tmp_path / "in.txt").write_text("Call me Ishmael.\n")
    assert main(["embed", str(tmp_path / "in.txt"), "--init", str(model_dir), "--out", str(tmp_path / "in.txt")]) == 2
    assert "the output would overwrite the input" in capsys.readouterr().err
    assert (tmp_path / "in.txt").read_text() == "Call me Ishmael.\n"
    into_model = str(model_dir / "emb.npy")
    assert main(["embed", str(tmp_path / "in.txt"), "--init", str(model_dir), "--out", into_model]) == 2
    assert (
        main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                "--init",
                str(model_dir),
                "--out",
                str(tmp_path / "e"),
                "--max-seq-length",
                "0",
            ]
        )
        == 2
    )
    assert "max_seq_length must be at least 3" in capsys.readouterr().err  # 0 was taken for "not given"
    umask = os.umask(0o022)
    try:
        copy = tmp_path / "copy"
        shutil.copytree(model_dir, copy)
        import litebert

        litebert.save(litebert.load(copy), tmp_path / "saved")
        assert (tmp_path / "saved" / "model.safetensors").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(umask)
