"""Extending a vocabulary: `add_words` appends whole-word pieces to the SentencePiece ModelProto, every existing id
kept (litebert.model.resize grows a model's word embeddings and MLM bias to match)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from litebert.io import read_json, staged_files, write_bytes
from litebert.text.lines import cp949_hint
from litebert.tokenizer.tokenizer import (
    DIGIT_COMMA,
    MODEL_FILE,
    SETTINGS_FILE,
    SPECIAL_TOKENS,
    Tokenizer,
    write_settings,
)
from litebert.tokenizer.train import check_tokenizer_out

if TYPE_CHECKING:
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

ADDED_MARGIN = 1 / 64  # log-probability by which an added word's piece beats the word's old best segmentation


def read_words(path: str | Path) -> list[tuple[str, str]]:
    """(where, word) for each word of a words file, one per line (blank lines and # comments left out); `where`
    is "file:line" for error messages."""
    path = Path(path)
    if not path.exists():  # not is_file(): a pipe, as bash's <(...) gives, is read like a file
        raise FileNotFoundError(f"no such words file: {path}")
    words = []
    data = path.read_bytes()  # read once: a pipe cannot be read again for the error's hint
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is not part of the first word
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}){cp949_hint(data[:8192])}") from None
    for n, line in enumerate(text.splitlines(), 1):
        word = line.strip()
        if not word or word.startswith("#"):
            continue
        if len(word.split()) > 1:
            raise ValueError(f"{path}:{n}: {word!r} is not one word (no spaces inside a word)")
        words.append((f"{path}:{n}", word))
    if not words:  # a wrong file given: the tokenizer would be copied unchanged without a word
        raise ValueError(f"{path}: no words to add (one word per line; blank lines and # comments are left out)")
    return words


def _new_word(base: Tokenizer, where: str, word: str) -> str:
    """`word` normalised as the tokenizer sees it, or an error naming `where` and why it cannot be a piece."""
    norm = base.normalize(word)
    if not norm or " " in norm:
        raise ValueError(f"{where}cannot add {word!r}: normalised to {norm!r}, not a single word")
    if DIGIT_COMMA.search(norm):
        raise ValueError(
            f"{where}cannot add {word!r}: it ends in a digit and a comma, which litebert tokenizers "
            "always split off (their digit + comma pieces are disabled)"
        )
    if "▁" in norm or word in SPECIAL_TOKENS.values() or norm in {p.lower() for p in SPECIAL_TOKENS.values()}:
        raise ValueError(f"{where}cannot add {word!r}: a special token or SentencePiece's word marker '▁', not a word")
    return norm


@dataclass(kw_only=True)
class AddWordsConfig:
    """The tokenizer `add_words` extends, the words it adds and the directory it writes (the flags of `litebert
    tokenizer add-words`)."""

    tokenizer_dir: str = field(metadata={"help": "tokenizer directory to extend", "positional": True})
    words_file: str = field(metadata={"help": "one word per line", "positional": True})
    out: str = field(metadata={"help": "new tokenizer directory"})


def add_words(
    tokenizer_dir: str | Path,
    words: str | Path | list[str],
    out_dir: str | Path,
    *,
    also_write: Callable[[Tokenizer], None] | None = None,
) -> tuple[Tokenizer, list[str]]:
    """Write out_dir: the tokenizer of `tokenizer_dir` plus one "▁word" piece per new word, appended after the
    existing ids. Returns the new tokenizer and the words added (normalised; words already present are left).
    out_dir is neither `tokenizer_dir` nor a model's directory (see check_tokenizer_out).

    Each new piece scores just above the best segmentation of its word under the old model (by ADDED_MARGIN,
    in log-probability), so a new word always encodes to its single piece. Other text keeps its pieces, except
    where its old best path spelled the new word with the word's own best pieces: there the new piece merges
    them ("▁c" "a" "jol..." -> "▁ca" "jol..."). A path through the new piece scores at most ADDED_MARGIN above
    the same path with those old pieces, so it never re-splits an old piece short of a near-tie. (Scored as the
    most likely piece, a new piece would re-split the words it begins: adding "u" would turn "▁us" into "▁u" "s".)
    Words added by earlier add-words calls (recorded in the settings file) are scored again with this call's, as
    if added together: their ids stay, and a new word they begin with never splits them.

    The files (with whatever `also_write(tokenizer)` writes beside them: litebert.hf.write_hf_tokenizer_files)
    appear together once all are written, as train_tokenizer's do.
    """
    out = Path(out_dir)
    check_tokenizer_out(out, source=Path(tokenizer_dir))
    base = Tokenizer.load(tokenizer_dir)
    source = read_words(words) if not isinstance(words, list) else [("", w) for w in words]
    from sentencepiece import sentencepiece_model_pb2 as model_pb2  # protobuf: imported by what edits a model

    proto = model_pb2.ModelProto.FromString(base.model_proto)
    normal = model_pb2.ModelProto.SentencePiece.NORMAL
    unknown_char = min(p.score for p in proto.pieces if p.type == normal) - 10.0  # sentencepiece's unigram rule
    before = set(base.pieces)
    known = set(before)
    added, present = [], {}  # present: an ordered set of the words the vocabulary has already
    for where, word in source:
        norm = _new_word(base, f"{where}: " if where else "", word)
        if "▁" + norm not in known:
            known.add("▁" + norm)
            added.append(norm)
        elif "▁" + norm in before:
            present[norm] = None
    if present:
        shown = ", ".join(repr(w) for w in list(present)[:5]) + (", ..." if len(present) > 5 else "")
        warnings.warn(f"{len(present):,} word(s) already in the vocabulary are left as they are: {shown}", stacklevel=2)
    new_words = set(added)
    earlier = [w for w in _earlier_words(base) if "▁" + w in known and w not in new_words]
    index = {p.piece: i for i, p in enumerate(proto.pieces)}
    for word in earlier:  # out of the lattice while the words are scored
        proto.pieces[index["▁" + word]].type = model_pb2.ModelProto.SentencePiece.UNUSED
    # Shorter words are scored first and take part in scoring longer ones, so that "harpoon" beats "▁harp" + "oon"
    # when "harp" is added too. A longer piece never fits inside a shorter word, nor one of the same length.
    scores: dict[str, float] = {}
    scorer = Tokenizer(proto.SerializeToString(), base.normalizer)
    everything = earlier + added
    for length in sorted({len(w) for w in everything}):
        for word in (w for w in everything if len(w) == length):
            best = _best_segmentation_score(scorer, word, unknown_char)
            scores[word] = math.ceil((best + ADDED_MARGIN) * 256) / 256  # on the 1/256 grid of all scores here
        scorer = Tokenizer(_with_scores(proto, scores, added).SerializeToString(), base.normalizer)
    proto = _with_scores(proto, scores, added)  # the new words in the order of the words file
    proto.trainer_spec.vocab_size = len(proto.pieces)
    data = proto.SerializeToString()
    with staged_files(out, "--out names the tokenizer directory to write") as stage:
        tok = Tokenizer(data, base.normalizer, stage)
        for word in everything:
            if len(tok.encode(word)) != 1:  # cannot happen with the scores above; a guard for foreign models
                raise ValueError(f"added word {word!r} does not encode to one piece in {out / MODEL_FILE}")
        write_bytes(stage / MODEL_FILE, data)
        write_settings(tok, base_model_sha256=base.checksum, added_words=everything)
        if also_write is not None:
            also_write(tok)
    tok.dir = out
    return tok, added


def _earlier_words(tok: Tokenizer) -> list[str]:
    """The words earlier add-words calls gave this tokenizer (its settings file's record; none for others)."""
    path = tok.dir / SETTINGS_FILE if tok.dir is not None else None
    if path is None or not path.is_file():
        return []
    recorded = read_json(path).get("added_words", [])
    return [w for w in recorded if isinstance(w, str)] if isinstance(recorded, list) else []


def _with_scores(proto: model_pb2.ModelProto, scores: dict[str, float], new: list[str]) -> model_pb2.ModelProto:
    """A copy of `proto` where each scored word's piece is a normal piece with its score: an existing piece
    (an earlier added word) in its place, a new word's piece appended in the order of `new`."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    out = model_pb2.ModelProto.FromString(proto.SerializeToString())
    index = {p.piece: i for i, p in enumerate(out.pieces)}
    normal = model_pb2.ModelProto.SentencePiece.NORMAL
    for word, score in scores.items():
        if "▁" + word in index:
            piece = out.pieces[index["▁" + word]]
            piece.type, piece.score = normal, score
    for word in new:
        if word in scores:
            out.pieces.add(piece="▁" + word, score=scores[word], type=normal)
    return out


def _best_segmentation_score(tok: Tokenizer, word: str, unknown_char: float) -> float:
    """The log-probability of sentencepiece's best segmentation of "▁" + `word` (normalised): the sum of its
    pieces' scores, each unknown character costing `unknown_char` (sentencepiece's output merges a run of them
    into one <unk> piece)."""
    pieces = tok.sp.encode(word, out_type="proto").pieces
    return sum(len(p.surface) * unknown_char if p.id == tok.unk_id else tok.sp.get_score(p.id) for p in pieces)
