"""Segment pairs on real text: SOP/NSP/none rules of the official create_instances_from_document, truncation,
layout and the bad-input cases (one-sentence, empty and over-long documents)."""

from __future__ import annotations

import numpy as np
import pytest

from litebert.data.pairs import Documents, assemble, create_pairs, document_pairs, truncation
from litebert.text import ReadConfig, read_documents
from litebert.tokenizer import Tokenizer

CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def docs(moby_dick, tokenizer_dir) -> Documents:
    """60 Moby-Dick chapters (one document each), tokenized sentence by sentence."""
    tok = Tokenizer.load(tokenizer_dir)
    files = sorted(moby_dick.glob("chapter_*.txt"))[:60]
    raw = list(read_documents(files, config=ReadConfig(documents="file")))
    return Documents.from_lists([tok.encode_batch(d) for d in raw])


def _doc_of(docs: Documents, token: np.ndarray) -> np.ndarray:
    sent = np.searchsorted(docs.sent_offsets, token, side="right") - 1
    return np.searchsorted(docs.doc_offsets, sent, side="right") - 1


def test_truncation_matches_the_official_loop():
    rng = np.random.default_rng(0)
    for la in range(0, 14):
        for lb in range(0, 14):
            for m in range(1, 20):
                a, b = list(range(la)), list(range(lb))
                while len(a) + len(b) > m:  # the official truncate_seq_pair (lengths only)
                    (a if len(a) > len(b) else b).pop()
                fa, ba, fb, bb = truncation(la, lb, m, rng)
                assert (la - fa - ba, lb - fb - bb) == (len(a), len(b))
                assert min(fa, ba, fb, bb) >= 0
    # Front or back with p 0.5 each: the front share of 200,000 removed tokens is within 1% of a half.
    cuts = np.array([truncation(300, 300, 100, rng) for _ in range(400)])
    assert abs(cuts[:, [0, 2]].sum() / cuts.sum() - 0.5) < 0.01


def test_sop_layout_labels_and_order(docs):
    rng = np.random.default_rng(1)
    pairs = create_pairs(docs, rng, max_seq_length=128, short_seq_prob=0.1, objective="sop")
    ids, offsets, a_len = assemble(docs.tokens, pairs, CLS, SEP)
    for k in range(len(pairs)):
        ex = ids[offsets[k] : offsets[k + 1]]
        la, lb = pairs.a1[k] - pairs.a0[k], pairs.b1[k] - pairs.b0[k]
        assert la >= 1 and lb >= 1 and len(ex) == la + lb + 3 <= 128
        assert ex[0] == CLS and ex[a_len[k] - 1] == SEP and ex[-1] == SEP
        assert not np.isin(ex[1 : a_len[k] - 1], [CLS, SEP]).any() and not np.isin(ex[a_len[k] : -1], [CLS, SEP]).any()
        assert (ex[1 : a_len[k] - 1] == docs.tokens[pairs.a0[k] : pairs.a1[k]]).all()
        assert (ex[a_len[k] : -1] == docs.tokens[pairs.b0[k] : pairs.b1[k]]).all()
    same = _doc_of(docs, pairs.a0) == _doc_of(docs, pairs.b0)
    multi = pairs.single == 0
    # In order (label 0): A before B in one document; swapped (label 1): B before A; one-sentence chunks
    # take B from another document and are always label 1.
    assert (same[multi]).all()
    assert (pairs.a1 <= pairs.b0)[multi & (pairs.label == 0)].all()
    assert (pairs.b1 <= pairs.a0)[multi & (pairs.label == 1)].all()
    assert (pairs.label[~multi] == 1).all() and (~same[~multi]).mean() > 0.95


def test_sop_label_balance_follows_the_official_rules(docs):
    rng = np.random.default_rng(2)
    runs = [create_pairs(docs, rng, max_seq_length=128, short_seq_prob=0.1, objective="sop") for _ in range(6)]
    label = np.concatenate([p.label for p in runs])
    single = np.concatenate([p.single for p in runs]).astype(bool)
    n = len(label)
    assert n > 5000 and single.mean() > 0.02  # real text has one-sentence chunks (document ends)
    # Swap with p 0.5 among multi-sentence chunks; one-sentence chunks add label-1 pairs on top.
    assert abs(label[~single].mean() - 0.5) < 4 * np.sqrt(0.25 / (~single).sum())
    expected = (single.sum() + 0.5 * (~single).sum()) / n
    assert abs(label.mean() - expected) < 4 * np.sqrt(0.25 / n) and label.mean() > 0.5


def test_short_targets_are_drawn_with_short_seq_prob(docs):
    rng = np.random.default_rng(3)
    targets = [
        document_pairs(docs, d, rng, max_seq_length=128, short_seq_prob=0.1, objective="sop")[0][5]
        for _ in range(60)
        for d in range(len(docs))
    ]
    targets = np.array(targets)
    share = (targets < 125).mean()
    assert abs(share - 0.1) < 4 * np.sqrt(0.09 / len(targets))
    assert targets.min() >= 2 and targets.max() == 125


def test_nsp_random_next_and_true_continuation(docs):
    rng = np.random.default_rng(4)
    pairs = create_pairs(docs, rng, max_seq_length=128, short_seq_prob=0.1, objective="nsp")
    same = _doc_of(docs, pairs.a0) == _doc_of(docs, pairs.b0)
    multi = pairs.single == 0
    nsp_label = pairs.label[multi]
    # Random next with p 0.5 (label 1, B from another document), else the true continuation right after A.
    assert abs(nsp_label.mean() - 0.5) < 4 * np.sqrt(0.25 / len(nsp_label))
    assert (same & (pairs.a1 <= pairs.b0))[multi & (pairs.label == 0)].all()
    assert (~same)[pairs.label == 1].mean() > 0.95


def test_none_packs_whole_sentences_without_labels(docs):
    pairs = create_pairs(docs, np.random.default_rng(5), max_seq_length=64, short_seq_prob=0.1, objective="none")
    ids, offsets, a_len = assemble(docs.tokens, pairs, CLS, SEP)
    assert (pairs.label == -100).all() and (pairs.b1 == pairs.b0).all()
    lengths = np.diff(offsets)
    assert (lengths <= 64).all() and (a_len == lengths).all()  # [CLS] tokens [SEP]: one segment
    assert (ids[offsets[:-1]] == CLS).all() and (ids[offsets[1:] - 1] == SEP).all()
    # Packs tile the text exactly once, in order; they start at sentence starts unless a sentence was too long.
    assert (pairs.a0[1:] == pairs.a1[:-1]).all() and pairs.a0[0] == 0 and pairs.a1[-1] == len(docs.tokens)
    sent_len = np.diff(docs.sent_offsets)
    at_sentence = np.isin(pairs.a0, docs.sent_offsets)
    assert at_sentence.mean() > 0.95 or (sent_len > 62).any()
    # ...and run across document ends (RoBERTa's FULL-SENTENCES), so nearly all are close to full length.
    doc_ends = docs.sent_offsets[docs.doc_offsets[1:]]
    assert ((pairs.a0[:, None] < doc_ends) & (doc_ends < pairs.a1[:, None])).any(1).sum() >= len(docs) // 2
    assert np.median(lengths) >= 48  # Moby-Dick sentences are long: whole-sentence packs leave some room


def test_separators_between_documents():
    docs = Documents.from_lists([[[5, 6], [7]], [[8, 9, 10]], [[11]]])
    sep = docs.with_separators(SEP)
    assert sep.tokens.tolist() == [5, 6, 7, SEP, 8, 9, 10, SEP, 11, SEP]
    assert sep.sent_offsets.tolist() == [0, 2, 4, 8, 10] and sep.doc_offsets.tolist() == docs.doc_offsets.tolist()


def test_bad_documents_one_sentence_empty_and_overlong():
    rng = np.random.default_rng(6)
    long = list(range(10, 3010))
    raw = [[[5, 6, 7]], [], [[]], [[8, 9]], [long], [[11] * 4, [12] * 4, long]]
    docs = Documents.from_lists(raw)
    assert len(docs) == 4  # empty documents and sentences are dropped, as the official reader does
    for objective in ("sop", "nsp", "none"):
        pairs = create_pairs(docs, rng, max_seq_length=32, short_seq_prob=0.1, objective=objective)
        ids, offsets, _ = assemble(docs.tokens, pairs, CLS, SEP)
        assert (np.diff(offsets) <= 32).all() and len(pairs) > 0
        if objective != "none":
            assert ((pairs.a1 - pairs.a0) >= 1).all() and ((pairs.b1 - pairs.b0) >= 1).all()
    # A corpus of a single one-sentence document pairs it with itself (the official ten tries, then give up).
    lone = Documents.from_lists([[[5, 6, 7]]])
    pairs = create_pairs(lone, rng, max_seq_length=32, short_seq_prob=0.0, objective="sop")
    assert len(pairs) == 1 and pairs.label[0] == 1


def test_none_examples_never_start_or_end_inside_with_a_separator():
    """A document whose last sentence fills whole packs leaves its separator to start the next pack: trimmed."""
    from litebert.data.config import DataConfig
    from litebert.data.examples import Vocab, make_examples

    vocab = Vocab(vocab_size=50, cls_id=CLS, sep_id=SEP, mask_id=4, pad_id=0, word_start=np.ones(50, dtype=bool))
    rng = np.random.default_rng(0)
    for trial in range(200):
        docs = Documents.from_lists(
            [
                [list(rng.integers(10, 50, rng.integers(1, 13))) for _ in range(rng.integers(1, 4))]
                for _ in range(rng.integers(1, 5))
            ]
        )
        config = DataConfig(
            max_seq_length=8, max_predictions_per_seq=2, objective="none", masking="dynamic", dupe_factor=1
        )
        batch = make_examples(
            docs, config, vocab, passes=1, pair_rng=np.random.default_rng(trial), mask_rng=np.random.default_rng(trial)
        )
        for k in range(len(batch.offsets) - 1):
            ex = batch.input_ids[batch.offsets[k] : batch.offsets[k + 1]]
            assert ex[0] == CLS and ex[-1] == SEP and len(ex) <= 8
            assert ex[1] != SEP and ex[-2] != SEP, ex  # no leading or trailing separator inside
        words = batch.input_ids[~np.isin(batch.input_ids, [CLS, SEP])]
        assert sorted(words.tolist()) == sorted(docs.tokens.tolist())  # every token once


def test_sentences_longer_than_a_pair_are_cut_into_pieces_that_pair_with_each_other():
    # Text without sentence ends (here a 3,000-token "sentence" per document) was trimmed to one pair per
    # sentence: ~3% of its tokens reached the examples, and every pair was a one-sentence chunk with a random B.
    from litebert.data.config import DataConfig
    from litebert.data.examples import Vocab, make_examples

    rng = np.random.default_rng(0)
    word_start = np.zeros(1000, dtype=bool)
    word_start[500:] = True  # ids 500-999 start a word, 10-499 continue one
    docs = Documents.from_lists([[rng.integers(10, 1000, 3000)], [rng.integers(10, 1000, 40)] * 3] * 4)
    cut = docs.with_long_sentences_cut(125, word_start)
    assert (cut.tokens == docs.tokens).all() and len(cut) == len(docs)
    for d in range(len(docs)):  # each document still holds the same tokens
        assert cut.sent_offsets[cut.doc_offsets[d]] == docs.sent_offsets[docs.doc_offsets[d]]
    pieces = np.diff(cut.sent_offsets)
    assert pieces.max() <= 62 and (pieces == 40).sum() == 12  # short sentences untouched
    inner = np.setdiff1d(cut.sent_offsets, docs.sent_offsets)
    assert word_start[cut.tokens[inner]].mean() > 0.99  # cut where a word starts (all but a 62-token run)
    vocab = Vocab(vocab_size=1000, cls_id=CLS, sep_id=SEP, mask_id=4, pad_id=0, word_start=word_start)
    config = DataConfig(max_seq_length=128, objective="sop", dupe_factor=1, short_seq_prob=0.0)
    batch = make_examples(docs, config, vocab, passes=1, pair_rng=rng, mask_rng=np.random.default_rng(1))
    # Most tokens are used (8% before): what is lost is each chunk's overshoot of the target, which the official
    # chunking trims, as it does for the documents of 40-token sentences here
    assert batch.offsets[-1] - 3 * len(batch.a_len) > 0.6 * len(docs.tokens)
    assert 0.4 < batch.label.mean() < 0.6  # ordered and swapped pieces, not all random pairs
