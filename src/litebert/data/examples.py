"""One window of documents -> examples: sentence split, tokenize, eval split, shuffle, pairs, static masks.

A window is the unit of work of one process (build.py). Everything random in it comes from generators derived
from (seed, window index, purpose) with numpy's SeedSequence spawn keys, never from a worker's identity, so
the bytes produced do not depend on how many processes share the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from litebert.data.config import DataConfig
from litebert.data.masking import MaskedBatch, MaskingRules, mask_batch
from litebert.data.pairs import Documents, Pairs, assemble, create_pairs
from litebert.data.shards import ExampleBatch

# Spawn-key purposes within a window; the first key word separates build-time streams (0) from batch-time
# masks (1, example_rng).
_EVAL_SPLIT, _TRAIN_PAIRS, _TRAIN_MASKS, _EVAL_PAIRS, _EVAL_MASKS = range(5)
CHUNK = 2048  # examples laid out and masked per call (bounds temporary memory; see make_examples)


@dataclass(frozen=True)
class Vocab:
    """What the data step needs from a tokenizer: special ids, size and the word-start mask over the vocab."""

    vocab_size: int
    cls_id: int
    sep_id: int
    mask_id: int
    pad_id: int
    word_start: np.ndarray  # bool (vocab_size,)

    @classmethod
    def from_tokenizer(cls, tok) -> Vocab:
        return cls(
            vocab_size=int(tok.vocab_size),
            cls_id=int(tok.cls_id),
            sep_id=int(tok.sep_id),
            mask_id=int(tok.mask_id),
            pad_id=int(tok.pad_id),
            word_start=np.asarray(tok.word_start_mask, dtype=bool),
        )

    @classmethod
    def from_manifest(cls, manifest: dict, word_start: np.ndarray) -> Vocab:
        ids = manifest["special_ids"]
        return cls(
            vocab_size=int(manifest["vocab_size"]),
            cls_id=ids["cls"],
            sep_id=ids["sep"],
            mask_id=ids["mask"],
            pad_id=ids["pad"],
            word_start=word_start,
        )

    def rules(self, config: DataConfig) -> MaskingRules:
        return MaskingRules(
            masked_lm_prob=config.masked_lm_prob,
            max_predictions=config.max_predictions_per_seq,
            max_ngram=config.max_ngram,
            vocab_size=self.vocab_size,
            mask_id=self.mask_id,
        )


def window_rng(seed: int, window: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, window, purpose)))


def example_rng(entropy: int | list[int], split: str, epoch: int, index: int) -> np.random.Generator:
    """The generator of the dynamic masks of one example in one epoch: a pure function of its arguments."""
    key = (1, int(split == "eval"), epoch, index)
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


def mask_examples(
    ids: np.ndarray,
    offsets: np.ndarray,
    vocab: Vocab,
    rules: MaskingRules,
    rng: np.random.Generator | Sequence[np.random.Generator],
) -> MaskedBatch:
    """Whole-word n-gram masks for a flat batch of laid-out examples ([CLS]/[SEP] found by id); ``rng`` is one
    generator, or one per example (see masking.mask_batch)."""
    special = (ids == vocab.cls_id) | (ids == vocab.sep_id)
    return mask_batch(ids, offsets, vocab.word_start[ids], special, rules, rng)


def make_examples(
    docs: Documents,
    config: DataConfig,
    vocab: Vocab,
    *,
    passes: int,
    pair_rng: np.random.Generator,
    mask_rng: np.random.Generator,
) -> ExampleBatch:
    """All examples of ``docs``: shuffle documents, ``passes`` passes of pair creation, shuffle the examples
    (the official code shuffles all instances at the end), lay them out and, for static masking, mask them."""
    if len(docs) == 0:
        return ExampleBatch(
            input_ids=np.zeros(0, dtype=np.int32),
            offsets=np.zeros(1, dtype=np.int64),
            a_len=np.zeros(0, dtype=np.int32),
            label=np.zeros(0, dtype=np.int8),
            **_empty_masks(config),
        )
    shuffled = docs.select(pair_rng.permutation(len(docs)))
    if config.objective == "none":  # packs run across documents, with a [SEP] between them
        shuffled = shuffled.with_separators(vocab.sep_id)
    else:  # a sentence longer than a pair (max_num_tokens) becomes pieces that pair with each other
        shuffled = shuffled.with_long_sentences_cut(config.max_seq_length - 3, vocab.word_start)
    all_pairs = [
        create_pairs(
            shuffled,
            pair_rng,
            max_seq_length=config.max_seq_length,
            short_seq_prob=config.short_seq_prob,
            objective=config.objective,
        )
        for _ in range(passes)
    ]
    pairs = Pairs(**{f: np.concatenate([getattr(p, f) for p in all_pairs]) for f in Pairs.FIELDS})
    if config.objective == "none":  # a pack that starts or ends at a document's end leaves out its separator
        pairs.a0 += shuffled.tokens[pairs.a0] == vocab.sep_id  # a0 < a1 <= len: every pack is non-empty
        pairs.a1 -= shuffled.tokens[pairs.a1 - 1] == vocab.sep_id
        pairs = pairs.take(np.flatnonzero(pairs.a1 > pairs.a0))  # a pack that was a separator alone
    pairs = pairs.take(pair_rng.permutation(len(pairs)))
    # Lay out and mask CHUNK examples at a time: the per-token temporaries stay small even for a window with
    # dupe_factor 40; the chunks draw from one generator in order, so the result is deterministic.
    rules = vocab.rules(config)
    parts = []
    for k0 in range(0, len(pairs), CHUNK):
        sub = pairs.take(np.arange(k0, min(k0 + CHUNK, len(pairs))))
        ids, offsets, a_len = assemble(shuffled.tokens, sub, vocab.cls_id, vocab.sep_id)
        part = ExampleBatch(
            input_ids=ids, offsets=offsets, a_len=a_len.astype(np.int32), label=sub.label.astype(np.int8)
        )
        if config.masking == "static":
            m = mask_examples(ids, offsets, vocab, rules, mask_rng)
            part.input_ids = m.input_ids
            part.masked_positions, part.masked_labels = m.positions.astype(np.int32), m.labels.astype(np.int32)
            part.ngrams, part.ngrams_free = (np.minimum(x, 255).astype(np.uint8) for x in (m.ngrams, m.unforced))
        parts.append(part)
    return ExampleBatch.concat(parts)


def _empty_masks(config: DataConfig) -> dict:
    if config.masking != "static":
        return {}
    p = config.max_predictions_per_seq
    return {
        "masked_positions": np.zeros((0, p), dtype=np.int32),
        "masked_labels": np.zeros((0, p), dtype=np.int32),
        "ngrams": np.zeros((0, config.max_ngram), dtype=np.uint8),
        "ngrams_free": np.zeros((0, config.max_ngram), dtype=np.uint8),
    }


def held_out(index: int, n_docs: int, config: DataConfig) -> np.ndarray:
    """Which of the ``n_docs`` documents of window ``index`` are held out (bool mask), by the rule
    ``window_examples`` states: a pure function of the seed, the window, its document count and the objective,
    so a build's held-out documents can be found again from its corpus and settings (probes.py)."""
    draws = window_rng(config.seed, index, _EVAL_SPLIT).random(n_docs)
    is_eval = draws < config.eval_fraction
    if index == 0 and n_docs >= 2 and n_docs * config.eval_fraction >= 0.5 and not is_eval.any():
        is_eval[np.argmin(draws)] = True
    if config.objective != "none" and is_eval.sum() == 1 and n_docs >= 4:
        is_eval[np.argsort(draws)[1]] = True
    return is_eval


def window_examples(
    index: int, docs: Documents, config: DataConfig, vocab: Vocab
) -> tuple[ExampleBatch, ExampleBatch, int]:
    """(train, eval, held-out document count) of window ``index``: a seeded fraction of its documents is held
    out; training documents get dupe_factor passes, held-out ones a single pass (duplicating them would only
    repeat the same evaluation). A small corpus still gets a held-out split: when the first window draws none
    of its two or more documents though its share rounds to one or more (documents x eval_fraction >= 0.5),
    the one with the lowest draw is held out. With pairs, a window of four or more documents never holds out one:
    the random segments of a split (NSP's random next, SOP's one-sentence chunks) come from its other
    documents, and a lone held-out document would pair with itself; the next lowest draw joins it."""
    is_eval = held_out(index, len(docs), config)
    out = []
    for chosen, passes, pairs_key, masks_key in (
        (~is_eval, config.dupe_factor, _TRAIN_PAIRS, _TRAIN_MASKS),
        (is_eval, 1, _EVAL_PAIRS, _EVAL_MASKS),
    ):
        rngs = {
            "pair_rng": window_rng(config.seed, index, pairs_key),
            "mask_rng": window_rng(config.seed, index, masks_key),
        }
        out.append(make_examples(docs.select(np.flatnonzero(chosen)), config, vocab, passes=passes, **rngs))
    return out[0], out[1], int(is_eval.sum())
