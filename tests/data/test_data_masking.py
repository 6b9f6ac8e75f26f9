"""Whole-word n-gram masking on real text: n-gram shares, 80/10/10, budget, whole words, [CLS]/[SEP] untouched."""

from __future__ import annotations

import numpy as np
import pytest

from litebert.data.masking import MaskingRules, budgets, mask_batch, mask_sequence
from litebert.data.pairs import Documents, assemble, create_pairs
from litebert.text import ReadConfig, read_documents
from litebert.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tok(tokenizer_dir) -> Tokenizer:
    return Tokenizer.load(tokenizer_dir)


@pytest.fixture(scope="module")
def examples(moby_dick, corpora, tok):
    """Real SOP examples of 512 (the official length): Moby-Dick plus a few State of the Union addresses."""
    files = sorted(moby_dick.glob("chapter_*.txt")) + sorted((corpora / "sotu").glob("*.txt"))
    docs = Documents.from_lists(
        [tok.encode_batch(d) for d in read_documents(files, config=ReadConfig(documents="file"))]
    )
    pairs = create_pairs(docs, np.random.default_rng(0), max_seq_length=512, short_seq_prob=0.1, objective="sop")
    return assemble(docs.tokens, pairs, tok.cls_id, tok.sep_id)[:2]


def _mask(ids, offsets, tok, rng, **kw):
    rules = MaskingRules(
        masked_lm_prob=kw.get("prob", 0.15),
        max_predictions=kw.get("max_predictions", 20),
        max_ngram=kw.get("max_ngram", 3),
        vocab_size=tok.vocab_size,
        mask_id=tok.mask_id,
    )
    special = (ids == tok.cls_id) | (ids == tok.sep_id)
    return mask_batch(ids, offsets, tok.word_start_mask[ids], special, rules, rng), rules


def test_ngram_shares_when_the_budget_does_not_bind(examples, tok):
    ids, offsets = examples
    rng = np.random.default_rng(1)
    unforced = sum(_mask(ids, offsets, tok, rng)[0].unforced.sum(0) for _ in range(6))
    shares = unforced / unforced.sum()
    assert unforced.sum() > 20_000  # sampling error ~0.35 points, inside the 1-point tolerance
    np.testing.assert_allclose(shares, [6 / 11, 3 / 11, 2 / 11], atol=0.01)
    # Drawn lengths, counted before the overlap check: at a high masking rate most spans of 3 words touch a
    # masked word, and counting only the accepted ones would understate long n by several points.
    unforced = sum(_mask(ids, offsets, tok, rng, prob=0.5, max_predictions=400)[0].unforced.sum(0) for _ in range(2))
    np.testing.assert_allclose(unforced / unforced.sum(), [6 / 11, 3 / 11, 2 / 11], atol=0.01)


def test_80_10_10_budget_and_whole_words(examples, tok):
    ids, offsets = examples
    m, rules = _mask(ids, offsets, tok, np.random.default_rng(2))
    real = m.labels != -100
    flat_pos = (m.positions + offsets[:-1, None])[real]
    shown, label = m.input_ids[flat_pos], m.labels[real]
    assert len(label) > 25_000  # sampling error of the 80% share ~0.24 points
    assert (ids[flat_pos] == label).all()  # labels are the original tokens
    mask_share = (shown == tok.mask_id).mean()
    keep_share = (shown == label).mean()
    assert abs(mask_share - 0.8) < 0.015 and abs(keep_share - 0.1) < 0.015
    assert abs(1 - mask_share - keep_share - 0.1) < 0.015
    # Unmasked positions are untouched; [CLS]/[SEP] are never masked.
    untouched = np.ones(len(ids), dtype=bool)
    untouched[flat_pos] = False
    assert (m.input_ids[untouched] == ids[untouched]).all()
    assert not np.isin(label, [tok.cls_id, tok.sep_id]).any()
    # Budget: at most min(20, max(1, round(0.15 * len))), and all of it almost always.
    n_masked = real.sum(1)
    budget = budgets(np.diff(offsets), rules)
    assert (n_masked <= budget).all() and (n_masked == budget).mean() > 0.97
    # Whole words: a masked continuation piece has its predecessor masked, and a masked piece followed by a
    # continuation piece has that one masked too.
    masked = ~untouched
    special = np.isin(ids, [tok.cls_id, tok.sep_id])
    cont = ~tok.word_start_mask[ids] & ~special
    cont[1:] &= ~special[:-1]  # the first piece after [CLS]/[SEP] starts a word
    assert masked[np.flatnonzero(masked & cont) - 1].all()
    nxt = np.flatnonzero(masked[:-1] & cont[1:])
    assert masked[nxt + 1].all()


def test_masked_fraction_and_options(examples, tok):
    ids, offsets = examples
    short_ids, short_off = ids[: offsets[200]], offsets[:201]
    m, _ = _mask(short_ids, short_off, tok, np.random.default_rng(3), max_predictions=512)
    # Without the max_predictions cap the budget is round(15%) of each sequence.
    frac = (m.labels != -100).sum() / np.diff(short_off).sum()
    assert abs(frac - 0.15) < 0.005
    unigram, _ = _mask(short_ids, short_off, tok, np.random.default_rng(3), max_ngram=1)
    assert unigram.ngrams[:, 0].sum() > 0 and unigram.ngrams.shape[1] == 1
    none, _ = _mask(short_ids, short_off, tok, np.random.default_rng(3), prob=0.0)
    assert (none.labels == -100).all() and (none.input_ids == short_ids).all()  # official: prob 0 -> nothing


def test_seeded_and_pure(examples, tok):
    ids, offsets = examples
    sub, off = ids[: offsets[50]], offsets[:51]
    a, _ = _mask(sub, off, tok, np.random.default_rng(7))
    b, _ = _mask(sub, off, tok, np.random.default_rng(7))
    c, _ = _mask(sub, off, tok, np.random.default_rng(8))
    assert (a.positions == b.positions).all() and (a.input_ids == b.input_ids).all()
    assert not (a.positions == c.positions).all()
    assert (sub == ids[: offsets[50]]).all()  # the input is not modified
    one = mask_sequence(
        sub[: off[1]],
        tok.word_start_mask[sub[: off[1]]],
        np.isin(sub[: off[1]], [tok.cls_id, tok.sep_id]),
        MaskingRules(masked_lm_prob=0.15, max_predictions=20, max_ngram=3, vocab_size=tok.vocab_size, mask_id=4),
        np.random.default_rng(9),
    )
    assert one.positions.shape == (1, 20) and (one.labels != -100).sum() == min(20, round(0.15 * off[1]))


def test_static_masks_in_chunks_are_consistent(examples, tok, monkeypatch):
    from litebert.data import examples as ex_mod
    from litebert.data.config import DataConfig
    from litebert.data.examples import Vocab, make_examples

    ids, offsets = examples
    docs = Documents(tokens=ids[: offsets[30]].copy(), sent_offsets=offsets[:31], doc_offsets=np.arange(31))
    vocab = Vocab.from_tokenizer(tok)
    monkeypatch.setattr(ex_mod, "CHUNK", 7)  # several chunks, one generator

    def run(masking):
        cfg = DataConfig(max_seq_length=128, masking=masking, dupe_factor=2)
        rngs = dict(pair_rng=np.random.default_rng(0), mask_rng=np.random.default_rng(1))
        return make_examples(docs, cfg, vocab, passes=2, **rngs)

    static, plain = run("static"), run("dynamic")
    assert len(static) == len(plain) > 14 and (static.offsets == plain.offsets).all()
    for k in range(len(static)):
        real = static.masked_labels[k] != -100
        pos = static.masked_positions[k][real] + static.offsets[k]
        assert real.sum() >= 1 and (plain.input_ids[pos] == static.masked_labels[k][real]).all()
        untouched = np.setdiff1d(np.arange(static.offsets[k], static.offsets[k + 1]), pos)
        assert (static.input_ids[untouched] == plain.input_ids[untouched]).all()


def test_text_written_without_spaces_is_masked_at_the_full_rate(tmp_path):
    # Chinese and Japanese put no space between words: were a "word" everything from one "▁" to the next, it
    # would be a whole clause, too long for the budget, and far fewer than 15% of the pieces would be masked.
    from litebert.tokenizer.train import train_tokenizer

    rng = np.random.default_rng(0)
    chars = list("我们今天去公园散步天气很好朋友一起吃饭学习工作时间东京大阪のはがをにでとへ")
    words = ["".join(rng.choice(chars, size=rng.integers(1, 4))) for _ in range(300)]
    docs = [["".join(rng.choice(words, size=rng.integers(10, 30))) + "。" for _ in range(8)] for _ in range(60)]
    (tmp_path / "zh.txt").write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
    train_tokenizer(tmp_path / "zh.txt", tmp_path / "tok", vocab_size=200)
    tok = Tokenizer.load(tmp_path / "tok")
    assert all(tok.word_start_mask[i] for i, p in enumerate(tok.pieces) if any(c in chars for c in p))
    documents = Documents.from_lists([tok.encode_batch(d) for d in docs])
    pairs = create_pairs(documents, np.random.default_rng(1), max_seq_length=128, short_seq_prob=0.0, objective="sop")
    ids, offsets = assemble(documents.tokens, pairs, tok.cls_id, tok.sep_id)[:2]
    masked, rules = _mask(ids, offsets, tok, np.random.default_rng(2))
    real = (ids != tok.cls_id) & (ids != tok.sep_id)
    assert (masked.labels != -100).sum() / real.sum() > 0.145  # min(20, round(0.15 * length)) of each
