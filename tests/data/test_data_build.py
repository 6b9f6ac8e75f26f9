"""`build` end to end on real text: identical bytes for 1 and 2 workers, seeds, layout of stored examples, resume
after an interruption, tokenizer checksum, held-out split and bad inputs."""

from __future__ import annotations

import filecmp
import importlib
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from litebert.data import DataConfig, PretrainingBatches, build, read_examples, read_manifest
from litebert.data.shards import ShardWriter
from litebert.text import ReadConfig
from litebert.tokenizer import Tokenizer
from litebert.tokenizer.train import train_tokenizer

PER_FILE = ReadConfig(documents="file")


def _config(**kw) -> DataConfig:
    base = dict(max_seq_length=128, dupe_factor=2, examples_per_shard=300, window_chars=60_000, eval_fraction=0.1)
    return DataConfig(**{**base, **kw})


def test_max_predictions_default_fits_a_short_sequence():
    # The default was a fixed 20, which DataConfig itself refused below length 20 (the CLI chose min(20, length)).
    assert DataConfig().max_predictions_per_seq == 20
    assert DataConfig(max_seq_length=16).max_predictions_per_seq == 16
    assert DataConfig(max_seq_length=16, max_predictions_per_seq=3).max_predictions_per_seq == 3
    with pytest.raises(ValueError, match=r"DataConfig.max_predictions_per_seq must be an integer in \[1, 16\]"):
        DataConfig(max_seq_length=16, max_predictions_per_seq=17)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _same_tree(a: Path, b: Path) -> None:
    names = [p.relative_to(a) for p in _files(a)]
    assert names == [p.relative_to(b) for p in _files(b)]
    for name in names:
        if name.name != "build_state.json":  # holds the output-independent identity only, but check it anyway
            assert filecmp.cmp(a / name, b / name, shallow=False), name


@pytest.fixture(scope="module")
def corpus(moby_dick) -> list[Path]:
    return sorted(moby_dick.glob("chapter_*.txt"))[:30]


@pytest.fixture(scope="module")
def built(corpus, tokenizer_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "static"
    build(corpus, tokenizer_dir, out, _config(), read_config=PER_FILE, progress=False)
    return out


def test_two_workers_give_identical_bytes_and_seeds_change_masks(built, corpus, tokenizer_dir, tmp_path):
    two = tmp_path / "two"
    manifest = build(corpus, tokenizer_dir, two, _config(), workers=2, read_config=PER_FILE, progress=False)
    assert manifest["windows"] > 2 and manifest["splits"]["train"]["shards"] > 2
    _same_tree(built, two)
    other = tmp_path / "seed"
    build(corpus, tokenizer_dir, other, _config(seed=7), read_config=PER_FILE, progress=False)
    a = np.load(built / "train" / "shard_00000" / "masked_positions.npy")
    b = np.load(other / "train" / "shard_00000" / "masked_positions.npy")
    assert a.shape == b.shape and (a != b).mean() > 0.5


def test_stored_examples_layout_and_masks(built, tokenizer_dir):
    tok = Tokenizer.load(tokenizer_dir)
    manifest = read_manifest(built)
    assert manifest["tokenizer_sha256"] == tok.checksum and manifest["vocab_size"] == tok.vocab_size
    assert manifest["settings"]["dupe_factor"] == 2 and manifest["settings"]["masking"] == "static"
    examples = list(read_examples(built, tokenizer=tok))
    assert len(examples) == manifest["splits"]["train"]["examples"] > 500
    for ex in examples:
        ids, types, pos, lab = ex["input_ids"], ex["token_type_ids"], ex["masked_positions"], ex["masked_labels"]
        original = ids.copy()
        original[pos] = lab
        seps = np.flatnonzero(original == tok.sep_id)
        assert len(ids) <= 128 and original[0] == tok.cls_id and len(seps) == 2 and seps[1] == len(ids) - 1
        assert (original == tok.cls_id).sum() == 1
        # Token types: 0 for [CLS] A [SEP], 1 for B [SEP]; exactly.
        assert (types == (np.arange(len(ids)) > seps[0])).all()
        assert len(pos) == len(lab) <= 20 and (np.diff(pos) > 0).all()
        assert not np.isin(pos, [0, seps[0], seps[1]]).any()
        assert ex["sentence_order_label"] in (0, 1)
    labels = np.array([ex["sentence_order_label"] for ex in examples])
    assert 0.5 <= labels.mean() < 0.65  # half swapped, plus one-sentence chunks with a random B


def test_manifest_counts_and_eval_split(built):
    manifest = read_manifest(built)
    docs = manifest["documents"]
    assert docs["train"] + docs["eval"] == 30 and docs["eval"] >= 1
    ev = list(read_examples(built, split="eval"))
    assert len(ev) == manifest["splits"]["eval"]["examples"] > 0
    shard_sizes = manifest["splits"]["train"]["shard_examples"]
    assert all(s == 300 for s in shard_sizes[:-1]) and 0 < shard_sizes[-1] <= 300


def test_interrupted_build_resumes_to_identical_bytes(built, corpus, tokenizer_dir, tmp_path, monkeypatch):
    out = tmp_path / "resumed"
    real_write = ShardWriter._write
    calls = {"n": 0}

    def crash_after_two(self, batch):
        if calls["n"] == 2:
            raise KeyboardInterrupt("simulated interruption")
        calls["n"] += 1
        real_write(self, batch)

    monkeypatch.setattr(ShardWriter, "_write", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        build(corpus, tokenizer_dir, out, _config(), read_config=PER_FILE, progress=False)
    assert not (out / "manifest.json").exists()
    with open(out / "windows.jsonl", "a") as log:
        log.write('{"window": 99, "train"')  # a record cut by the interruption
    monkeypatch.setattr(ShardWriter, "_write", real_write)
    build(corpus, tokenizer_dir, out, _config(), read_config=PER_FILE, progress=False)
    _same_tree(built, out)
    # A finished build is not redone; other settings in the same directory are refused.
    assert build(corpus, tokenizer_dir, out, _config(), read_config=PER_FILE, progress=False)["windows"] > 0
    with pytest.raises(ValueError, match="settings"):
        build(corpus, tokenizer_dir, out, _config(seed=1), read_config=PER_FILE, progress=False)
    # ...and so is the same build under other reading rules (another litebert version): never resumed or reused
    module = importlib.import_module("litebert.data.build")  # litebert.data.build is also the function
    monkeypatch.setattr(module, "READER_VERSION", module.READER_VERSION + 1)
    with pytest.raises(ValueError, match=r"resumed: holds data built with other text reading rules \(reader \d+ ->"):
        build(corpus, tokenizer_dir, out, _config(), read_config=PER_FILE, progress=False)


def test_tokenizer_checksum_mismatch_is_refused(built, moby_dick, tmp_path):
    other = train_tokenizer(sorted(moby_dick.glob("chapter_*.txt"))[:5], tmp_path / "t", vocab_size=400)
    with pytest.raises(ValueError, match="sha256"):
        PretrainingBatches(built, batch_size=4, tokenizer=other)
    with pytest.raises(ValueError, match="sha256"):
        next(read_examples(built, tokenizer=tmp_path / "t"))


def test_bad_inputs_and_a_corpus_smaller_than_one_batch(corpus, tokenizer_dir, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_text("Only one sentence here.\n\n\n\nAnother lonely sentence.\n\n")
    (raw / "b.txt").write_text("\n\n   \n")  # empty documents
    (raw / "c.txt").write_text(" ".join(f"word{i}" for i in range(700)) + "\n\nCall me Ishmael. Some years ago.\n")
    config = _config(dupe_factor=3, eval_fraction=0.0, masking="dynamic")
    manifest = build([raw], tokenizer_dir, tmp_path / "out", config, read_config=ReadConfig(), progress=False)
    assert manifest["documents"]["train"] == 4 and manifest["splits"]["eval"]["examples"] == 0
    examples = list(read_examples(tmp_path / "out"))
    assert all(len(ex["input_ids"]) <= 128 for ex in examples)
    batches = PretrainingBatches(tmp_path / "out", batch_size=64, seed=3)
    first = next(iter(batches))
    assert first["input_ids"].shape == (64, 128)  # fewer examples than a batch: the stream wraps epochs
    with pytest.raises(ValueError, match="no examples"):
        PretrainingBatches(tmp_path / "out", batch_size=4, split="eval")
    with pytest.warns(UserWarning, match="the held-out split is empty: none of the 1 documents"):
        build(corpus[:1], tokenizer_dir, tmp_path / "one", _config(), read_config=PER_FILE, progress=False)
    with pytest.warns(UserWarning, match="the held-out split is empty: none of the 2 documents"):  # 2 x 0.1 < 0.5
        build(corpus[:2], tokenizer_dir, tmp_path / "two", _config(), read_config=PER_FILE, progress=False)
    with warnings.catch_warnings(record=True) as caught:  # a file given twice: read once, said once
        warnings.simplefilter("always")
        build(
            [corpus[0], corpus[0]], tokenizer_dir, tmp_path / "twice", _config(), read_config=PER_FILE, progress=False
        )
    assert sum("given more than once" in str(w.message) for w in caught) == 1
    with pytest.warns(UserWarning, match=r"the training split is empty: all 2 documents were held out \(eval_fr"):
        build(
            corpus[:2],
            tokenizer_dir,
            tmp_path / "all",
            _config(eval_fraction=0.999),
            read_config=PER_FILE,
            progress=False,
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "e.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="empty corpus"):
        build([empty], tokenizer_dir, tmp_path / "out2", config, progress=False)


def test_other_objectives_and_dynamic_layout(corpus, tokenizer_dir, tmp_path):
    for objective in ("none", "nsp"):
        out = tmp_path / objective
        config = _config(objective=objective, masking="dynamic", dupe_factor=1)
        # 8 documents at eval_fraction 0.1 happen to draw none: the lowest draw is held out all the same, and
        # with pairs the next lowest too, so that a held-out pair's random segment comes from another document
        manifest = build(corpus[:8], tokenizer_dir, out, config, read_config=PER_FILE, progress=False)
        held = 1 if objective == "none" else 2
        assert manifest["documents"] == {"train": 8 - held, "eval": held}
        assert manifest["splits"]["eval"]["examples"] > 0
        assert manifest["settings"]["dupe_factor"] == 1
        examples = list(read_examples(out))
        labels = np.array([ex["sentence_order_label"] for ex in examples])
        if objective == "none":
            assert (labels == -100).all()
            assert all((ex["token_type_ids"] == 0).all() for ex in examples)
            seps = 0
            for ex in examples:
                original = ex["input_ids"].copy()
                original[ex["masked_positions"]] = ex["masked_labels"]
                assert original[0] == 2 and original[-1] == 3 and not np.isin(original[1:], 2).any()
                inner = np.flatnonzero(original[1:-1] == 3) + 1  # a [SEP] between two documents of one pack
                assert not (np.diff(inner) == 1).any() and 1 not in inner and len(original) - 2 not in inner
                seps += len(inner)
            # 8 chapters in one window: packs run across document ends, so all but the last are full length
            assert 0 < seps <= 8 - 1  # a junction that falls at a pack end leaves its separator out
            assert np.median([len(ex["input_ids"]) for ex in examples]) >= 100  # whole long sentences leave room
        else:
            # random next with p 0.5, and one-sentence chunks too: over seeds 0-4 this small build gave 0.46-0.68
            assert 0.4 < labels.mean() < 0.8
    shutil.rmtree(tmp_path / "none")


def test_special_token_strings_in_the_corpus_are_plain_text(tokenizer_dir, tmp_path):
    raw = tmp_path / "raw.txt"
    text = "Call [CLS] me [SEP] Ishmael <pad> now. Some [MASK] years ago <unk> we sailed. The sea was [SEP] grey."
    raw.write_text("\n\n".join([text] * 12) + "\n")
    build([raw], tokenizer_dir, tmp_path / "out", _config(max_seq_length=32, eval_fraction=0.0), progress=False)
    tok = Tokenizer.load(tokenizer_dir)
    for ex in read_examples(tmp_path / "out"):
        ids = np.array(ex["input_ids"])
        unmasked = np.delete(ids, ex["masked_positions"])
        # only the structure's own [CLS] and [SEP]s: none from the text, no pad inside the sequence
        assert (ids == tok.cls_id).sum() == 1 and ids[0] == tok.cls_id
        assert (ids == tok.sep_id).sum() == 2 and ids[-1] == tok.sep_id
        assert tok.pad_id not in unmasked and tok.mask_id not in unmasked
    assert tok.encode("[SEP]") == [tok.sep_id]  # fine-tuning input keeps transformers' reading


def test_output_inside_the_corpus_and_a_changed_corpus(tokenizer_dir, tmp_path):
    import os

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = "Call me Ishmael. Some years ago, never mind how long. I thought I would sail about.\n\n"
    (corpus / "a.txt").write_text(text * 30)
    config = _config(max_seq_length=32, eval_fraction=0.0)
    inside = build([corpus], tokenizer_dir, corpus / "data", config, progress=False)
    assert build([corpus], tokenizer_dir, corpus / "data", config, progress=False) == inside  # done, not re-read
    outside = build([corpus / "a.txt"], tokenizer_dir, tmp_path / "data", config, progress=False)
    assert inside["documents"] == outside["documents"] and inside["tokens"] == outside["tokens"]
    # the same size, other words: named, not silently kept
    (corpus / "a.txt").write_text((text * 30).replace("Ishmael", "ISHMAEL"))
    os.utime(corpus / "a.txt", ns=(1, 1))
    with pytest.raises(ValueError, match=r"other corpus \(first change: .*a.txt; file sizes and modification"):
        build([corpus], tokenizer_dir, corpus / "data", config, progress=False)
    with pytest.raises(ValueError, match=r"other corpus .*, settings \(seed: 12345 -> 5\)"):
        build(
            [corpus / "a.txt"],
            tokenizer_dir,
            tmp_path / "data",
            _config(max_seq_length=32, eval_fraction=0.0, seed=5),
            progress=False,
        )


def test_a_file_without_blank_lines_is_cut_into_window_sized_documents(tokenizer_dir, tmp_path):
    """A window holds dupe_factor passes of its examples, so a document longer than a window is cut to its size
    (else one blank-line-free file would be one window, and memory would grow with the file)."""
    flat = tmp_path / "flat.txt"
    flat.write_text("".join(f"Sentence number {i} of a file without blank lines.\n" for i in range(2000)))
    config = _config(window_chars=20_000, eval_fraction=0.0)
    alone = r"5 of the 5 windows before the last hold a single document, so their random segments"
    with pytest.warns(UserWarning, match=alone):
        manifest = build(
            [flat], tokenizer_dir, tmp_path / "out", config, read_config=ReadConfig(split=False), progress=False
        )
    assert manifest["documents"]["train"] == 6 and manifest["windows"] == 6  # ~100k characters / 20k
    assert manifest["sentences"] == 2000
    # random segments from the same document are said, where a pair objective draws them; a larger window
    # holds several documents and draws them from the others
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for objective, window in (("none", 20_000), ("sop", 200_000)):
            build(
                [flat],
                tokenizer_dir,
                tmp_path / objective,
                _config(window_chars=window, eval_fraction=0.0, objective=objective),
                read_config=ReadConfig(split=False),
                progress=False,
            )


def test_cli_warnings_say_what_happened_not_which_line_said_it(corpus, tokenizer_dir, tmp_path):
    import subprocess
    import sys

    cli = "import sys; from litebert.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [
        "data",
        "build",
        str(corpus[0]),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(tmp_path / "d"),
        "--eval-fraction",
        "0.01",
        "--max-seq-length",
        "64",
    ]
    err = subprocess.run([sys.executable, "-c", cli, *argv], capture_output=True, text=True, check=True).stderr
    assert "litebert data: warning: " in err and "the held-out split is empty" in err
    assert "UserWarning" not in err and ".py:" not in err


def test_a_split_never_holds_one_document_alone_where_the_window_has_four_or_more(corpus, tokenizer_dir, tmp_path):
    # A held-out document alone in its window drew its random segments (NSP's random next, SOP's one-sentence
    # chunks) from itself; evaluation then scored "random" pairs that were its own text.
    config = _config(objective="nsp", eval_fraction=0.05, window_chars=10_000_000, dupe_factor=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: every split holds two or more documents
        manifest = build(corpus[:10], tokenizer_dir, tmp_path / "ten", config, read_config=PER_FILE, progress=False)
    assert manifest["documents"] == {"train": 8, "eval": 2}  # 10 x 0.05 rounds to one; a second joins it
    with pytest.warns(UserWarning, match=r"in 1 of the 1 windows the training or the held-out split holds a single"):
        manifest = build(
            corpus[:3],
            tokenizer_dir,
            tmp_path / "three",
            _config(objective="sop", eval_fraction=0.2, window_chars=10_000_000),
            read_config=PER_FILE,
            progress=False,
        )
    assert manifest["documents"]["eval"] in (1, 2)
