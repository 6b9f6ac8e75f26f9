"""Balanced NSP/SOP probe sets: the build's own held-out documents found again, balanced labels, pair layout
(in order, swapped, random B from another document), padded batches, and the refusals."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from litebert.data import DataConfig, build, read_examples, read_manifest
from litebert.data.examples import held_out
from litebert.data.probes import probe_batches, probe_documents, probe_pairs, probe_sets
from litebert.text import ReadConfig

PER_FILE = ReadConfig(documents="file")
LENGTH = 64


@pytest.fixture(scope="module")
def corpus(moby_dick, tmp_path_factory):
    """40 Moby-Dick chapters, copied (a test edits a file)."""
    out = tmp_path_factory.mktemp("corpus")
    for path in sorted(moby_dick.glob("chapter_*.txt"))[:40]:
        shutil.copy(path, out / path.name)
    return out


@pytest.fixture(scope="module")
def built(corpus, tokenizer_dir, tmp_path_factory):
    """SOP data in several windows, a fifth of the documents held out, static masks."""
    out = tmp_path_factory.mktemp("data") / "sop"
    config = DataConfig(max_seq_length=LENGTH, dupe_factor=1, window_chars=40_000, eval_fraction=0.2)
    build(corpus, tokenizer_dir, out, config, read_config=PER_FILE, progress=False)
    return out


def _text(tokens: np.ndarray) -> str:
    """Token ids as ",1,2,3," so that a segment is found as a substring only at token boundaries."""
    return "," + ",".join(map(str, tokens.tolist())) + ","


def _segments_a(data_dir, split: str) -> list[np.ndarray]:
    """Segment A of every stored example of a split, its masked tokens put back."""
    out = []
    for ex in read_examples(data_dir, split):
        ids = ex["input_ids"].astype(np.int64).copy()
        ids[ex["masked_positions"]] = ex["masked_labels"]
        a_len = int((ex["token_type_ids"] == 0).sum())
        out.append(ids[1 : a_len - 1])
    return out


def test_the_builds_held_out_documents_are_found_again(built):
    manifest = read_manifest(built)
    held = probe_documents(built, "eval", objectives=["sop"])
    trained = probe_documents(built, "train", objectives=["sop"])
    assert manifest["windows"] > 1 and len(held) == manifest["documents"]["eval"] >= 2
    assert len(trained) == manifest["documents"]["train"]
    held_text, trained_text = _text(held.tokens), _text(trained.tokens)
    segments = [a for a in _segments_a(built, "eval") if len(a) >= 12]
    assert len(segments) > 20
    for a in segments:  # every held-out example's text is in the documents found, none in the training ones
        assert _text(a) in held_text and _text(a) not in trained_text
    for a in [a for a in _segments_a(built, "train") if len(a) >= 12][:200]:
        assert _text(a) in trained_text and _text(a) not in held_text


def test_held_out_under_every_objective_is_the_none_rule():
    # Objective "none" never adds a second document to a lone held-out one: its held-out set is the smaller.
    config = {o: DataConfig(eval_fraction=0.1, objective=o) for o in ("sop", "nsp", "none")}
    grew = 0
    for index in range(200):
        masks = {o: held_out(index, 12, c) for o, c in config.items()}
        assert (masks["sop"] == masks["nsp"]).all() and not (masks["none"] & ~masks["sop"]).any()
        grew += int(masks["sop"].sum() > masks["none"].sum())
    assert grew > 10


def test_probe_documents_of_all_objectives_are_a_subset(built):
    own = probe_documents(built, "eval", objectives=["sop"])
    every = probe_documents(built, "eval")
    assert 1 <= len(every) <= len(own)
    own_text = _text(own.tokens)
    for d in range(len(every)):
        start, stop = every.sent_offsets[every.doc_offsets[d]], every.sent_offsets[every.doc_offsets[d + 1]]
        assert _text(every.tokens[start:stop]) in own_text


def _doc_of(docs, token: np.ndarray) -> np.ndarray:
    sent = np.searchsorted(docs.sent_offsets, token, side="right") - 1
    return np.searchsorted(docs.doc_offsets, sent, side="right") - 1


def test_pairs_are_balanced_and_laid_out_by_their_labels(built):
    docs = probe_documents(built, "train", objectives=["sop"])
    word_start = np.ones(10_000, dtype=bool)
    pairs = probe_pairs(docs, max_seq_length=LENGTH, word_start=word_start, rng=np.random.default_rng(0))
    sop, nsp = pairs["sop"], pairs["nsp"]
    assert len(sop) == len(nsp) > 100 and len(sop) % 2 == 0
    for p in (sop, nsp):
        assert p.label.sum() * 2 == len(p)  # exactly balanced
        assert ((p.a1 > p.a0) & (p.b1 > p.b0)).all()
        assert ((p.a1 - p.a0) + (p.b1 - p.b0) <= LENGTH - 3).all()
    in_order, swapped = sop.label == 0, sop.label == 1
    assert (sop.a1[in_order] <= sop.b0[in_order]).all() and (sop.b1[swapped] <= sop.a0[swapped]).all()
    assert (_doc_of(docs, sop.a0) == _doc_of(docs, sop.b0)).all()
    same = _doc_of(docs, nsp.a0) == _doc_of(docs, nsp.b0)
    assert same[nsp.label == 0].all() and not same[nsp.label == 1].any()
    assert (nsp.a1[nsp.label == 0] <= nsp.b0[nsp.label == 0]).all()
    # the same chunks in the same order: pair k of both sets comes from one document
    assert (_doc_of(docs, np.minimum(sop.a0, sop.b0)) == _doc_of(docs, nsp.a0)).all()
    # a random B is about as long as the true one, so its length gives nothing away
    lengths = nsp.b1 - nsp.b0
    assert 0.8 < lengths[nsp.label == 1].mean() / lengths[nsp.label == 0].mean() < 1.25


def test_probe_sets_are_seeded_capped_and_batched(built):
    sets = probe_sets(built, "eval", seed=3, max_pairs=41)
    again = probe_sets(built, "eval", seed=3, max_pairs=41)
    other = probe_sets(built, "eval", seed=4, max_pairs=41)
    manifest = read_manifest(built)
    for task in ("sop", "nsp"):
        ex = sets[task]
        assert len(ex) == 40 and int(ex.label.sum()) == 20
        assert (ex.input_ids == again[task].input_ids).all()
        assert len(other[task].input_ids) != len(ex.input_ids) or (other[task].input_ids != ex.input_ids).any()
        batches = list(probe_batches(ex, 16, pad_id=manifest["special_ids"]["pad"]))
        assert [len(b["input_ids"]) for b in batches] == [16, 16, 8]
        b = batches[0]
        n = b["attention_mask"].sum(1)
        for k in range(16):
            ids = b["input_ids"][k, : n[k]].numpy()
            assert (ids == ex.input_ids[ex.offsets[k] : ex.offsets[k + 1]]).all()
            assert ids[0] == manifest["special_ids"]["cls"] and ids[-1] == manifest["special_ids"]["sep"]
            assert (b["token_type_ids"][k, : ex.a_len[k]] == 0).all() and (
                b["token_type_ids"][k, ex.a_len[k] : n[k]] == 1
            ).all()
            assert (b["input_ids"][k, n[k] :] == 0).all() and (b["token_type_ids"][k, n[k] :] == 0).all()
        assert (b["sentence_order_label"].numpy() == ex.label[:16]).all()


def test_a_changed_corpus_is_refused(corpus, tokenizer_dir, tmp_path):
    out = tmp_path / "data"
    config = DataConfig(max_seq_length=LENGTH, dupe_factor=1, window_chars=40_000, eval_fraction=0.2)
    small = tmp_path / "corpus"
    small.mkdir()
    for path in sorted(corpus.iterdir())[:6]:
        shutil.copy(path, small / path.name)
    build(small, tokenizer_dir, out, config, read_config=PER_FILE, progress=False)
    with open(sorted(small.iterdir())[2], "a") as f:
        f.write("\nOne more sentence.\n")
    with pytest.raises(ValueError, match=r"corpus file .*chapter_.* changed since the data was built"):
        probe_documents(out, "eval")
    with pytest.raises(ValueError, match="split must be one of"):
        probe_documents(out, "dev")
    with pytest.raises(ValueError, match="objectives must be one or more"):
        probe_documents(out, "eval", objectives=["mlm"])


def test_one_document_is_refused(built):
    docs = probe_documents(built, "eval", objectives=["sop"]).select(np.array([0]))
    with pytest.raises(ValueError, match="at least two documents"):
        probe_pairs(docs, max_seq_length=LENGTH, word_start=np.ones(10_000, bool), rng=np.random.default_rng(0))
