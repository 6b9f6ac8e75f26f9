"""The `Tokenizer` every step uses: a SentencePiece unigram vocabulary the ALBERT way (trained by train.py), with its
normalisation, encoding with offsets, and the settings file beside it.

Text is normalised (litebert.text.normalize) as the official preprocess_text
(collapse whitespace, NFKD + drop combining marks, lowercase) except that the stripped text is recomposed with
NFC, so Hangul syllables that NFKD splits into jamo come back whole, and that ``/'' -> " as transformers'
AlbertTokenizer does (a rule of XLNet's preprocessing the official ALBERT code does not have). The SentencePiece
model is trained on text normalised the same way and uses the "identity" rule itself, so training, litebert's
encode and the transformers tokenizer.json written beside it (litebert.hf.tokenizer) all see the same string.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from litebert.io import check_whole, copy_file, read_json, write_json
from litebert.text.normalize import Normalizer, normalize_aligned

MODEL_FILE = "spiece.model"
SETTINGS_FILE = "litebert_tokenizer.json"
# litebert's files of a tokenizer directory (litebert.save copies them beside a model, with transformers' own).
TOKENIZER_FILES = (MODEL_FILE, SETTINGS_FILE)
SPECIAL_TOKENS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
DIGIT_COMMA = re.compile(r"\d,$")
_SPECIAL_RE = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS.values()))


@dataclass
class Encoding:
    """[CLS] A [SEP] (B [SEP]) with token type 0 up to the first [SEP] and 1 after it."""

    input_ids: list[int]
    token_type_ids: list[int]


# Scripts written without spaces between words (by the names of their letters: CJK ideographs, kana, ...)
_UNSPACED = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "BOPOMOFO",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
)


def unspaced_script(char: str) -> bool:
    """Whether `char` is a letter of a script written without spaces between words (Hangul is not one)."""
    return not char.isascii() and char.isalpha() and unicodedata.name(char, "").startswith(_UNSPACED)


class Tokenizer:
    """Encode/decode with a SentencePiece model and litebert's normalisation (see module docstring)."""

    def __init__(self, model_proto: bytes, normalizer: Normalizer, directory: Path | None = None) -> None:
        import sentencepiece as spm  # here: truncate_pair runs without it (the ONNX predictor's deployments)

        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.model_proto = model_proto
        self.normalizer = normalizer
        self.dir = directory
        ids = {name: self.sp.piece_to_id(piece) for name, piece in SPECIAL_TOKENS.items()}
        for name, piece in SPECIAL_TOKENS.items():
            if self.sp.id_to_piece(ids[name]) != piece:
                raise ValueError(f"{directory or 'model'}: {MODEL_FILE} has no {piece} piece ({name} token)")
        self.pad_id, self.unk_id = ids["pad"], ids["unk"]
        self.cls_id, self.sep_id, self.mask_id = ids["cls"], ids["sep"], ids["mask"]
        # The official code re-splits pieces like "3.0," (tokenization.encode_pieces); models trained here have
        # such pieces disabled (_finalize_model), so the split only runs for foreign models.
        self._digit_comma = any(DIGIT_COMMA.search(p) and not self.sp.is_unused(i) for i, p in enumerate(self.pieces))

    @classmethod
    def load(cls, directory: str | Path, normalizer: Normalizer | None = None) -> Tokenizer:
        """The tokenizer of `directory`: its spiece.model with the normalisation its settings file records, or
        with `normalizer` (litebert.hf.load_tokenizer reads transformers' flags), else ALBERT's own."""
        directory = Path(directory)
        if directory.is_dir():
            check_whole(directory)  # a tokenizer a killed writer was moving in is finished first, never read mixed
        model = directory / MODEL_FILE
        if not model.is_file():
            raise FileNotFoundError(f"no {MODEL_FILE} in tokenizer directory {directory}")
        settings = _read_settings(directory)
        proto = model.read_bytes()
        if not proto:  # sentencepiece takes an empty model for one without pieces, and fails on the first id
            raise ValueError(
                f"{model}: empty (0 bytes), not a SentencePiece model; train the tokenizer again, or "
                "copy it back from where it was trained"
            )
        expected = settings.pop("model_sha256", None)
        if normalizer is None or (directory / SETTINGS_FILE).is_file():
            normalizer = Normalizer(**settings)
        try:  # parsed first: a corrupt or cut file is said to be one, not another tokenizer's
            tok = cls(proto, normalizer, directory)
        except (RuntimeError, IndexError) as exc:  # sentencepiece's parse error; a model without pieces
            raise ValueError(
                f"{model}: not a SentencePiece model, or a damaged one ({exc}); train the tokenizer "
                "again, or copy it back from where it was trained"
            ) from None
        if expected is not None and tok.checksum != expected:
            raise ValueError(
                f"{model} does not match {directory / SETTINGS_FILE} (its model_sha256 differs): the two files "
                "come from different tokenizers"
            )
        return tok

    # -- vocabulary -------------------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    @cached_property
    def pieces(self) -> list[str]:
        return [self.sp.id_to_piece(i) for i in range(self.vocab_size)]

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(i)

    def piece_to_id(self, piece: str) -> int:
        return self.sp.piece_to_id(piece)

    @cached_property
    def special_ids(self) -> frozenset[int]:
        return frozenset(i for i in range(self.vocab_size) if self.sp.is_control(i) or self.sp.is_unknown(i))

    @cached_property
    def word_start_mask(self) -> np.ndarray:
        """True where a piece starts a word: a "▁" prefix, punctuation or symbols only, or a special piece (the
        design notes' rule). The official _is_start_piece also starts a word at every piece holding a character
        outside a-z (digits, Hangul, any non-Latin script), so it masks such text piece by piece; here a
        space-separated word (a Korean eojeol with its particles, a number) is masked whole, as an English word
        is, up to punctuation inside it: "체포·구속" is the words "체포" and "·구속", as "well-known" is "well" and
        "-known"; a lone "▁" before punctuation is a word of its own, as in the official rule. "<unk>" stands for
        characters of the word it is in (a rare syllable: "▁" "서" "<unk>" "에서" is "서울에서"), so it starts no
        word: the official rule's "<" would cut the eojeol in two and mask a lone "▁". In scripts written without
        spaces (Chinese, Japanese, Thai, ...) a "word" would be a whole clause, so there the official rule holds:
        a piece holding such a character starts a word."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        for i, piece in enumerate(self.pieces):
            mask[i] = (
                piece.startswith("▁")
                or i in self.special_ids
                or all(unicodedata.category(c)[0] in "PS" for c in piece)
                or any(map(unspaced_script, piece))
            )
        mask[self.unk_id] = False
        return mask

    @cached_property
    def checksum(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    # -- encoding ---------------------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The string sentencepiece sees (litebert.text.normalize.Normalizer)."""
        return self.normalizer(text)

    def encode(self, text: str) -> list[int]:
        """Piece ids of one text, no [CLS]/[SEP] (see encode_pair)."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes one string (encode_batch() takes many), got {type(text).__name__}")
        return self.encode_batch([text])[0]

    def encode_batch(
        self, texts: Sequence[str], num_threads: int = 1, *, special_tokens: bool = True
    ) -> list[list[int]]:
        """Piece ids of many texts: Python normalisation (a fast path for ASCII and stable characters), then one
        call into sentencepiece's C++ batch encoder (its speed: docs/benchmarks.md, Data preparation).

        `special_tokens`: the strings "[MASK]", "[SEP]", "<pad>", ... in a text map to their ids, as transformers
        does with its special tokens (fill-mask input). Pretraining data is built with False, as the official
        code does: raw corpus text is only text, whatever it contains.
        """
        norm = self.normalizer
        out = self.sp.encode([norm(t) for t in texts], out_type=int, num_threads=num_threads)
        if self._digit_comma:
            out = [self._split_digit_comma(ids) for ids in out]
        for k, text in enumerate(texts if special_tokens else ()):
            if ("[" in text or "<" in text) and _SPECIAL_RE.search(text):
                out[k] = self.encode_with_offsets(text)[0]
        return out

    def encode_pair(self, a: str | list[int], b: str | list[int] | None = None, max_len: int = 512) -> Encoding:
        """[CLS] A [SEP] B [SEP], truncating the longer side one piece at a time from its end as
        run_classifier._truncate_seq_pair does (ties trim B)."""
        if max_len < (2 if b is None else 3):
            raise ValueError(f"max_len={max_len} cannot hold [CLS] and the [SEP]s")
        ids_a = self.encode(a) if isinstance(a, str) else list(a)
        ids_b = (self.encode(b) if isinstance(b, str) else list(b)) if b is not None else None
        if ids_b is None:
            ids_a = ids_a[: max(0, max_len - 2)]
            return Encoding([self.cls_id, *ids_a, self.sep_id], [0] * (len(ids_a) + 2))
        truncate_pair(ids_a, ids_b, max(0, max_len - 3))
        ids = [self.cls_id, *ids_a, self.sep_id, *ids_b, self.sep_id]
        return Encoding(ids, [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1))

    def batch(self, a: Sequence[str], b: Sequence[str] | None = None, *, max_len: int = 512) -> dict[str, Any]:
        """Model inputs for texts (or pairs: [CLS] a [SEP] b [SEP]), each truncated as `encode_pair` does:
        input_ids, attention_mask and token_type_ids as (batch, longest) torch.long tensors padded on the right,
        so `model(**tok.batch(texts))` runs a litebert model and `ft.model(tok.batch(texts))` a fine-tuned one."""
        import torch

        for name, texts in (("a", a), ("b", b)):
            if isinstance(texts, str):
                raise TypeError(f"batch() takes a list of strings as {name}, got one string: wrap it in a list")
        if b is not None and len(b) != len(a):
            raise ValueError(f"batch(): {len(a)} first texts but {len(b)} second texts")
        if not a:
            raise ValueError("batch(): no texts")
        encodings = [self.encode_pair(x, None if b is None else b[i], max_len) for i, x in enumerate(a)]
        longest = max(len(e.input_ids) for e in encodings)
        out = {k: torch.zeros(len(a), longest, dtype=torch.long) for k in ("attention_mask", "token_type_ids")}
        out["input_ids"] = torch.full((len(a), longest), self.pad_id, dtype=torch.long)
        for i, e in enumerate(encodings):
            n = len(e.input_ids)
            out["input_ids"][i, :n] = torch.tensor(e.input_ids)
            out["token_type_ids"][i, :n] = torch.tensor(e.token_type_ids)
            out["attention_mask"][i, :n] = 1
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The normalised text of `ids` (<unk> shows as " ⁇ "); [CLS]/[SEP]/[MASK]/<pad> are left out by default,
        else written as themselves between the decoded stretches of text."""
        ids = [int(i) for i in ids]
        if skip_special_tokens:
            return self.sp.decode([i for i in ids if i not in self.special_ids or i == self.unk_id])
        parts: list[str] = []
        run: list[int] = []
        for i in [*ids, None]:
            if i is not None and (i not in self.special_ids or i == self.unk_id):
                run.append(i)
                continue
            if run:
                parts.append(self.sp.decode(run))
                run = []
            if i is not None:
                parts.append(self.sp.id_to_piece(i))
        return " ".join(p for p in parts if p)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids and, per piece, (start, end) character offsets into the ORIGINAL text (the piece's leading
        "▁" excluded), for span prediction (SQuAD).

        The special token strings ("[MASK]", "<pad>", ...) written in the text map to their ids and the text
        between them is encoded on its own, as transformers does with special added tokens (fill-mask input).
        """
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        pos = 0
        for m in [*_SPECIAL_RE.finditer(text), None]:
            end = m.start() if m else len(text)
            if text[pos:end].strip():
                seg_ids, seg_offsets = self._offsets(text[pos:end])
                ids += seg_ids
                offsets += [(s + pos, e + pos) for s, e in seg_offsets]
            if m:
                ids.append(self.sp.piece_to_id(m.group()))
                offsets.append(m.span())
                pos = m.end()
        return ids, offsets

    def _offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        norm, spans = normalize_aligned(text, self.normalizer)
        enc = self.sp.encode_as_offset_mapping(norm)  # character offsets into `norm`
        ids, offsets = list(enc["ids"]), []
        for begin, end in enc["offsets"]:
            while begin < end and norm[begin] == " ":
                begin += 1
            start = spans[begin][0] if begin < end else (spans[begin - 1][1] if begin else 0)
            offsets.append((start, spans[end - 1][1] if begin < end else start))
        if self._digit_comma:
            ids, offsets = _split_digit_comma_offsets(self, ids, offsets)
        return ids, offsets

    def _split_digit_comma(self, ids: list[int]) -> list[int]:
        out: list[int] = []
        for i in ids:
            piece = self.pieces[i]
            if len(piece) > 1 and DIGIT_COMMA.search(piece):
                out.extend(self._digit_comma_pieces(piece))
            else:
                out.append(i)
        return out

    def _digit_comma_pieces(self, piece: str) -> list[int]:
        # tokenization.encode_pieces: re-encode the piece without its comma, keep a leading "▁" only when the
        # piece had one, then append the comma.
        sub = self.sp.encode(piece[:-1].replace("▁", ""), out_type=str)
        if not piece.startswith("▁") and sub and sub[0].startswith("▁"):
            sub = sub[1:] if sub[0] == "▁" else [sub[0][1:], *sub[1:]]
        return [self.sp.piece_to_id(p) for p in [*sub, ","]]


def _split_digit_comma_offsets(tok: Tokenizer, ids: list[int], offsets: list[tuple[int, int]]):
    out_ids, out_offsets = [], []
    for i, (s, e) in zip(ids, offsets, strict=True):
        piece = tok.pieces[i]
        if len(piece) > 1 and DIGIT_COMMA.search(piece):
            sub = tok._digit_comma_pieces(piece)
            out_ids.extend(sub)
            out_offsets.extend([(s, max(s, e - 1))] * (len(sub) - 1) + [(max(s, e - 1), e)])
        else:
            out_ids.append(i)
            out_offsets.append((s, e))
    return out_ids, out_offsets


def truncate_pair(a: list[int], b: list[int] | None, max_tokens: int) -> int:
    """Trim the longer of the two segments from its end until both fit; returns tokens removed.

    The official run_classifier.py `_truncate_seq_pair` rule, for `encode_pair` and every task's features: one
    token at a time from the longer sequence.
    """
    removed = 0
    while len(a) + (len(b) if b else 0) > max_tokens:
        longer = b if b and len(b) >= len(a) else a  # a tie trims b, as _truncate_seq_pair does
        longer.pop()
        removed += 1
    return removed


def _read_settings(directory: Path) -> dict[str, Any]:
    """litebert's settings file, else ALBERT's defaults (the official normalisation alone)."""
    path = directory / SETTINGS_FILE
    if not path.is_file():
        return {"do_lower_case": True, "strip_accents": True, **OFFICIAL_STEPS}
    data = read_json(path)
    missing = [k for k in ("do_lower_case", "strip_accents") if not isinstance(data, dict) or k not in data]
    if missing:
        raise ValueError(f"{path}: not a {SETTINGS_FILE} written by litebert (no {', '.join(missing)})")
    out = {"do_lower_case": bool(data["do_lower_case"]), "strip_accents": bool(data["strip_accents"])}
    for step in ("drop_invisible", "keep_jamo", "nfc"):  # absent: saved before the step existed
        out[step] = bool(data.get(step, False))
    return out | ({"model_sha256": data["model_sha256"]} if "model_sha256" in data else {})


# litebert's steps beyond the official preprocess_text, all off: a foreign tokenizer's normalisation.
OFFICIAL_STEPS = {"drop_invisible": False, "keep_jamo": False, "nfc": False}


def _describe(n: Normalizer) -> str:
    """The normalisation a tokenizer applies, in words (litebert_tokenizer.json)."""
    steps = ["drop Cc/Cf"] if n.drop_invisible else []
    steps += ["collapse spaces", "`` '' -> \""]
    if n.strip_accents:
        steps.append(
            "NFKD (compatibility jamo kept), drop combining marks, NFC"
            if n.keep_jamo
            else "NFKD, drop combining marks, NFC"
        )
    elif n.nfc:
        steps.append("NFC")
    return "; ".join(steps + (["lowercase"] if n.do_lower_case else []))


def write_settings(tok: Tokenizer, **extra) -> None:
    data = {
        "format": "litebert-tokenizer/1",
        "model_file": MODEL_FILE,
        "model_sha256": tok.checksum,
        "vocab_size": tok.vocab_size,
        "do_lower_case": tok.normalizer.do_lower_case,
        "strip_accents": tok.normalizer.strip_accents,
        "drop_invisible": tok.normalizer.drop_invisible,
        "keep_jamo": tok.normalizer.keep_jamo,
        "nfc": tok.normalizer.nfc,
        "normalization": _describe(tok.normalizer),
        "special_tokens": SPECIAL_TOKENS,
        **extra,
    }
    write_json(data, tok.dir / SETTINGS_FILE)


def copy_tokenizer(src: str | Path, dst: str | Path) -> None:
    """Copy litebert's tokenizer files of `src` (those it has) into `dst`, each whole or not at all."""
    for name in TOKENIZER_FILES:
        if (Path(src) / name).is_file():
            copy_file(Path(src) / name, Path(dst) / name)
