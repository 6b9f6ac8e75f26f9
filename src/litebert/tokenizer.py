"""SentencePiece vocabulary the ALBERT way: normalisation, training, and the `Tokenizer` used by every step.

PAPER.md §3-4: a unigram model with pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4, no bos/eos, character coverage
0.99995, sampled and shuffled input sentences. Text is normalised (litebert.normalize) as the official preprocess_text
(collapse whitespace, ``/'' -> ", NFKD + drop combining marks, lowercase) except that the stripped text is
recomposed with NFC, so Hangul syllables that NFKD splits into jamo come back whole. The SentencePiece model is
trained on text normalised the same way and uses the "identity" rule itself, so training, litebert's encode and
the transformers tokenizer.json written beside it (litebert.vocab) all see the same string.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm
from tqdm import tqdm

from litebert.normalize import Normalizer, normalize_aligned
from litebert.text import ReadConfig, TextReport, read_documents

MODEL_FILE = "spiece.model"
SETTINGS_FILE = "litebert_tokenizer.json"
# What a tokenizer directory holds (litebert.save copies these beside a checkpoint).
TOKENIZER_FILES = (MODEL_FILE, SETTINGS_FILE, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
SPECIAL_TOKENS = {"pad": "<pad>", "unk": "<unk>", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
_DIGIT_COMMA = re.compile(r"\d,$")
_SPECIAL_RE = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS.values()))


@dataclass(kw_only=True)
class TrainConfig:
    """SentencePiece training settings (PAPER.md §4)."""

    vocab_size: int = 30000
    do_lower_case: bool = True
    strip_accents: bool = True
    character_coverage: float = 0.99995
    input_sentence_size: int = 10_000_000  # sentences kept by sentencepiece's reservoir sample
    max_sentence_length: int = 16384  # bytes; longer sentences are skipped by sentencepiece
    seed: int = 12345
    num_threads: int = 1
    read: ReadConfig = field(default_factory=ReadConfig)

    def __post_init__(self) -> None:
        if self.vocab_size < len(SPECIAL_TOKENS) + 10:
            raise ValueError(f"TrainConfig.vocab_size must be >= {len(SPECIAL_TOKENS) + 10}, got {self.vocab_size}")
        if not 0.9 <= self.character_coverage <= 1.0:
            raise ValueError(f"TrainConfig.character_coverage must be in [0.9, 1], got {self.character_coverage}")
        if self.input_sentence_size <= 100:  # sentencepiece refuses smaller samples
            raise ValueError(f"TrainConfig.input_sentence_size must be > 100, got {self.input_sentence_size}")
        for name in ("max_sentence_length", "num_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")


@dataclass
class Encoding:
    """[CLS] A [SEP] (B [SEP]) with token type 0 up to the first [SEP] and 1 after it."""

    input_ids: list[int]
    token_type_ids: list[int]


class Tokenizer:
    """Encode/decode with a SentencePiece model and litebert's normalisation (see module docstring)."""

    def __init__(self, model_proto: bytes, normalizer: Normalizer, directory: Path | None = None) -> None:
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
        self._digit_comma = any(_DIGIT_COMMA.search(p) and not self.sp.is_unused(i) for i, p in enumerate(self.pieces))

    @classmethod
    def load(cls, directory: str | Path) -> Tokenizer:
        directory = Path(directory)
        model = directory / MODEL_FILE
        if not model.is_file():
            raise FileNotFoundError(f"no {MODEL_FILE} in tokenizer directory {directory}")
        settings = _read_settings(directory)
        proto = model.read_bytes()
        expected = settings.pop("model_sha256", None)
        if expected is not None and hashlib.sha256(proto).hexdigest() != expected:
            raise ValueError(
                f"{model} does not match {directory / SETTINGS_FILE} (its model_sha256 differs): the two files "
                "come from different tokenizers"
            )
        try:
            return cls(proto, Normalizer(**settings), directory)
        except RuntimeError as exc:  # sentencepiece's parse error
            raise ValueError(f"{model}: not a SentencePiece model ({exc})") from None

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
        space-separated word (a Korean eojeol, a number) is masked whole, as an English word is."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        for i, piece in enumerate(self.pieces):
            mask[i] = (
                piece.startswith("▁") or i in self.special_ids or all(unicodedata.category(c)[0] in "PS" for c in piece)
            )
        return mask

    @cached_property
    def checksum(self) -> str:
        return hashlib.sha256(self.model_proto).hexdigest()

    # -- encoding ---------------------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The string sentencepiece sees (litebert.normalize.Normalizer)."""
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
        call into sentencepiece's C++ batch encoder (about 1M tokens/s on one core with 30k pieces).

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
        budget = max(0, max_len - 3)
        while len(ids_a) + len(ids_b) > budget:
            (ids_a if len(ids_a) > len(ids_b) else ids_b).pop()
        ids = [self.cls_id, *ids_a, self.sep_id, *ids_b, self.sep_id]
        return Encoding(ids, [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1))

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
            if len(piece) > 1 and _DIGIT_COMMA.search(piece):
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
        if len(piece) > 1 and _DIGIT_COMMA.search(piece):
            sub = tok._digit_comma_pieces(piece)
            out_ids.extend(sub)
            out_offsets.extend([(s, max(s, e - 1))] * (len(sub) - 1) + [(max(s, e - 1), e)])
        else:
            out_ids.append(i)
            out_offsets.append((s, e))
    return out_ids, out_offsets


def _read_settings(directory: Path) -> dict[str, Any]:
    """litebert's settings file, else transformers' tokenizer_config.json flags, else ALBERT's defaults."""
    path = directory / SETTINGS_FILE
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
        out = {"do_lower_case": bool(data["do_lower_case"]), "strip_accents": bool(data["strip_accents"])}
        out["drop_invisible"] = bool(data.get("drop_invisible", False))  # absent: saved before the step existed
        return out | ({"model_sha256": data["model_sha256"]} if "model_sha256" in data else {})
    path = directory / "tokenizer_config.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        flags = {"do_lower_case": data.get("do_lower_case", True), "strip_accents": not data.get("keep_accents", False)}
        return flags | {"drop_invisible": False}  # a foreign tokenizer keeps transformers' own normalisation
    return {"do_lower_case": True, "strip_accents": True, "drop_invisible": False}


def _sentences(docs: Iterator[list[str]], cfg: TrainConfig, bar: tqdm, report: TextReport) -> Iterator[str]:
    norm = Normalizer(do_lower_case=cfg.do_lower_case, strip_accents=cfg.strip_accents)
    too_long = 0
    for doc in docs:
        for sentence in doc:
            text = norm(sentence)
            if len(text) > cfg.max_sentence_length // 4 and len(text.encode()) > cfg.max_sentence_length:
                # sentencepiece would drop it without a word
                too_long += 1
            elif text:
                bar.update(1)
                yield text
    if too_long:
        report.note(f"{too_long:,} sentence(s) longer than max_sentence_length={cfg.max_sentence_length:,} bytes "
                    "left out of vocabulary training (unsplit long lines? drop --no-split)")  # fmt: skip
    # sentencepiece reads every sentence (keeping a reservoir sample) before it trains
    bar.set_description("sentences read; training the unigram model")
    bar.refresh()


def train_tokenizer(
    inputs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    vocab_size: int | None = None,
    config: TrainConfig | None = None,
    progress: bool = False,
    report: TextReport | None = None,
) -> Tokenizer:
    """Train a unigram SentencePiece model on raw text and write out_dir/{spiece.model, litebert settings,
    tokenizer.json, tokenizer_config.json, special_tokens_map.json}."""
    cfg = config or TrainConfig()
    if vocab_size is not None:
        cfg = TrainConfig(**{**_shallow(cfg), "vocab_size": vocab_size})
    report = report if report is not None else TextReport()
    out = Path(out_dir)
    docs = read_documents(inputs, report=report, config=cfg.read, exclude=[out])  # checks the paths now
    model = io.BytesIO()
    spm.set_random_generator_seed(cfg.seed)
    with tqdm(desc="sentences read", unit=" sent", disable=not progress) as bar:
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_sentences(docs, cfg, bar, report),
                model_writer=model,
                model_type="unigram",
                vocab_size=cfg.vocab_size,
                pad_id=0,
                unk_id=1,
                bos_id=-1,
                eos_id=-1,
                control_symbols=[SPECIAL_TOKENS[k] for k in ("cls", "sep", "mask")],
                character_coverage=cfg.character_coverage,
                input_sentence_size=cfg.input_sentence_size,
                shuffle_input_sentence=True,
                max_sentence_length=cfg.max_sentence_length,
                normalization_rule_name="identity",
                num_threads=cfg.num_threads,
                minloglevel=1 if progress else 2,
            )
        except RuntimeError as exc:  # e.g. "Vocabulary size is too high": say which corpus and setting
            notes = f"; {report.messages[-1]}" if report.messages else ""
            msg = f"sentencepiece training failed ({report.sentences:,} sentences read from {len(inputs)} inputs"
            raise ValueError(f"{msg}{notes}): {exc}") from exc
    proto = _finalize_model(model.getvalue())
    out.mkdir(parents=True, exist_ok=True)  # only now: a failed training leaves no empty directory
    (out / MODEL_FILE).write_bytes(proto)
    settings = {"do_lower_case": cfg.do_lower_case, "strip_accents": cfg.strip_accents}
    tok = Tokenizer(proto, Normalizer(**settings), out)
    write_settings(tok, train=_shallow(cfg) | {"read": asdict(cfg.read), "corpus": report.summary()})
    from litebert.vocab import write_hf_files  # the transformers files are built from this tokenizer

    write_hf_files(tok)
    return tok


def _finalize_model(model: bytes) -> bytes:
    """Two edits to the trained ModelProto, ids unchanged.

    1. Pieces ending in digit+comma ("▁1990,") become UNUSED: sentencepiece never emits them, so a comma after a
       digit is always its own piece, the intent of the official "3.0," re-split (tokenization.encode_pieces),
       with nothing for transformers' tokenizer.json to copy.
    2. Scores are rounded to multiples of 1/256 (a change of at most 0.002 in a log-probability). Sentencepiece
       sums path scores in float32, tokenizers in float64, so near-ties could be resolved differently (measured:
       1 sentence in 63k of the State of the Union addresses); on this grid both sums are exact for any path
       below 65,536 in magnitude, and both engines then pick the same segmentation.
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto.FromString(model)
    for piece in proto.pieces:
        if piece.type == piece.NORMAL and _DIGIT_COMMA.search(piece.piece):
            piece.type = piece.UNUSED
        piece.score = round(piece.score * 256) / 256
    return proto.SerializeToString()


def write_settings(tok: Tokenizer, **extra) -> None:
    data = {
        "format": "litebert-tokenizer/1",
        "model_file": MODEL_FILE,
        "model_sha256": tok.checksum,
        "vocab_size": tok.vocab_size,
        "do_lower_case": tok.normalizer.do_lower_case,
        "strip_accents": tok.normalizer.strip_accents,
        "drop_invisible": tok.normalizer.drop_invisible,
        "normalization": "drop Cc/Cf; collapse spaces; `` '' -> \"; NFKD, drop combining marks, NFC; lowercase",
        "special_tokens": SPECIAL_TOKENS,
        **extra,
    }
    (tok.dir / SETTINGS_FILE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _shallow(cfg: TrainConfig) -> dict:
    return {k: getattr(cfg, k) for k in cfg.__dataclass_fields__ if k != "read"} | {"read": cfg.read}
