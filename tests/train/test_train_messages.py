"""What pretraining reads, damaged or crafted, is an error naming the file and the field, never a traceback: a
run_config.json of the wrong shape, a trainer.pt that is no litebert checkpoint, a corrupt spiece.model, a byte
that is not UTF-8 in metrics.jsonl."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from litebert.cli import main
from litebert.data import DataConfig, build
from litebert.train.checkpoint import load_trainer_state, save_checkpoint
from litebert.train.inputs import check_data
from litebert.train.metrics import MetricsLogger, read_metrics
from litebert.train.rundir import RunFiles


def test_a_run_config_whose_train_is_not_an_object_is_named(tmp_path, capsys):
    # TypeError: 'list' object is not a mapping
    (tmp_path / "run_config.json").write_text(json.dumps({"model": {}, "train": [1, 2]}))
    assert main(["pretrain", "--out", str(tmp_path), "--resume", "--max-steps", "6"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run_config.json'}: field 'train' must be an object of TrainConfig fields, got list" in err
    assert "Traceback" not in err


class Crafted:
    """Any class: unpickling it would run whatever its module does."""


def test_a_crafted_trainer_state_is_not_a_litebert_checkpoint(tmp_path):
    # torch's UnpicklingError suggested weights_only=False: to unpickle what litebert never saves
    state = {"step": 2, "optimizer": Crafted()}  # an object beyond tensors and plain containers
    ckpt = save_checkpoint(tmp_path, 2, write_model=lambda d: None, trainer_state=state)
    with pytest.raises(
        ValueError,
        match=rf"{ckpt / 'trainer.pt'}: not a litebert checkpoint's trainer state: it "
        "holds objects other than tensors and plain containers, which litebert never saves and will "
        r"not unpickle \(UnpicklingError\)$",
    ):
        load_trainer_state(ckpt)


def _planted(tmp_path, content: bytes):
    """A complete checkpoint whose trainer.pt is `content`, its checksum recorded as if litebert wrote it (a
    crafted directory, or a file damaged before the checkpoint was hashed)."""
    import hashlib

    ckpt = save_checkpoint(tmp_path, 2, write_model=lambda d: None, trainer_state={"step": 2})
    (ckpt / "trainer.pt").write_bytes(content)
    marker = json.loads((ckpt / "complete.json").read_text())
    marker["files"]["trainer.pt"] = hashlib.sha256(content).hexdigest()
    (ckpt / "complete.json").write_text(json.dumps(marker))
    return ckpt


def _saved(state) -> bytes:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _a_good_state() -> dict:
    import torch

    return {"step": 2, "world_size": 1, "optimizer": {}, "scaler": {}, "rng": [{"torch": torch.get_rng_state()}]}


UNREADABLE = r"not a file torch.save wrote, or one cut short \((UnpicklingError|RuntimeError|EOFError)\)"
TRAINER_STATES = {
    "crafted": (_saved({"step": 2, "world_size": Crafted()}), "it holds objects other than tensors"),
    "garbage": (b"\x00garbage" * 50, UNREADABLE),
    "empty": (b"", UNREADABLE),
    "cut": (_saved(_a_good_state())[:300], UNREADABLE),
    "a list": (_saved([1, 2]), "a list, not a dict"),
    "no data": (_saved(_a_good_state()), "field 'data' must be of type list, got NoneType"),
    "ranks": (_saved({**_a_good_state(), "data": [{}, {}]}), "field 'data' holds 2 entries, but 'world_size' is 1"),
}


@pytest.mark.parametrize("content, why", TRAINER_STATES.values(), ids=TRAINER_STATES.keys())
def test_a_trainer_state_a_resume_cannot_use_is_named_by_every_reader(tmp_path, content, why):
    # the world-size check of a resume met torch's UnpicklingError or "PytorchStreamReader failed reading zip
    # archive" as a traceback, and a state without a field a KeyError
    from litebert.train.checkpoint import restore_state, saved_world_size

    ckpt = _planted(tmp_path, content)
    named = rf"{ckpt / 'trainer.pt'}: not a litebert checkpoint's trainer state: .*{why}"
    with pytest.raises(ValueError, match=named):
        saved_world_size(ckpt)  # --resume and --resume auto, planning the run
    with pytest.raises(ValueError, match=named):
        restore_state(ckpt, None, None, None, None, None)  # pretrain and finetune, restoring it


def test_a_corrupt_spiece_model_is_said_to_be_one(tokenizer_dir, moby_dick, tmp_path, capsys):
    # it advised rebuilding the data with the corrupt tokenizer
    import litebert

    corpus = sorted(moby_dick.glob("chapter_*.txt"))[:1]
    data = tmp_path / "data"
    build(corpus, tokenizer_dir, data, DataConfig(max_seq_length=32, dupe_factor=1, eval_fraction=0.0), progress=False)
    model = data / "tokenizer" / "spiece.model"
    model.write_bytes(model.read_bytes()[:3000])
    config = litebert.preset("tiny", vocab_size=3000)
    with pytest.raises(
        ValueError,
        match=rf"{model}: not a SentencePiece model, or a damaged one .*; train the "
        "tokenizer again, or copy it back",
    ):
        check_data(data, config, data / "tokenizer")
    tok = tmp_path / "tok"
    shutil.copytree(tokenizer_dir, tok)
    (tok / "spiece.model").write_bytes((tok / "spiece.model").read_bytes()[:-100])
    assert main(["data", "build", *map(str, corpus), "--tokenizer", str(tok), "--out", str(tmp_path / "d2")]) == 2
    assert f"{tok / 'spiece.model'}: not a SentencePiece model, or a damaged one" in capsys.readouterr().err


def test_a_metrics_line_that_is_not_utf8_is_skipped_and_named(tmp_path):
    # UnicodeDecodeError, which did not name the file
    lines = [
        b'{"step": 1, "split": "train", "loss": 2.5}',
        b'{"step": 2, "split": "tr\xffain", "loss": 2.0}',
        b'{"step": 3, "split": "train", "loss": 1.5}',
    ]
    (tmp_path / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    with pytest.warns(UserWarning, match=rf"{tmp_path / 'metrics.jsonl'}: 1 line\(s\) skipped .*\(first: line 2\)"):
        records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 3]
    # a resume truncating the file met the same byte as a UnicodeDecodeError and refused the run, unnamed
    logger = MetricsLogger(tmp_path)
    with pytest.warns(UserWarning, match=rf"{tmp_path / 'metrics.jsonl'}: 1 line\(s\) skipped .*\(first: line 2\)"):
        logger.truncate_after(2)
    assert (tmp_path / "metrics.jsonl").read_bytes() == lines[0] + b"\n"


def test_the_run_directory_lock_records_its_holder_and_is_removed_when_released(tmp_path):
    run = RunFiles(run_dir=tmp_path)  # pretrain's RUN_DIR/.lock is litebert.io.lock_dir's, as every writer's
    run.lock_dir()
    record = json.loads((tmp_path / ".lock").read_text())
    assert record["pid"] == os.getpid() and record["host"] and record["started"]
    run.unlock()
    assert not (tmp_path / ".lock").exists()
