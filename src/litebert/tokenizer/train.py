"""Training a SentencePiece vocabulary the ALBERT way (docs/paper.md §3-4): a unigram model with pad 0, unk 1,
[CLS] 2, [SEP] 3, [MASK] 4, no bos/eos, character coverage 0.99995, sampled and shuffled input sentences,
trained on text normalised as the `Tokenizer` encodes it; the result is a tokenizer directory (spiece.model and
litebert's settings file; `litebert.hf.write_hf_tokenizer_files` adds transformers' files, as `litebert tokenizer
train` does)."""

from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from litebert.io import staged_files, write_bytes
from litebert.text.files import Paths
from litebert.text.normalize import Normalizer
from litebert.text.read import ReadConfig, read_documents
from litebert.text.report import TextReport
from litebert.tokenizer.tokenizer import DIGIT_COMMA, MODEL_FILE, SPECIAL_TOKENS, Tokenizer, write_settings

if TYPE_CHECKING:
    from tqdm import tqdm


@dataclass(kw_only=True)
class TokenizerTrainConfig:
    """SentencePiece training settings (docs/paper.md §4)."""

    vocab_size: int = field(default=30000, metadata={"help": "pieces in the vocabulary, special ones included"})
    do_lower_case: bool = field(
        default=True,
        metadata={
            "help": "keep case (do_lower_case false; default: lower-case)",
            "flag": "--cased",
            "const": False,
        },
    )
    strip_accents: bool = field(
        default=True,
        metadata={
            "help": "do not strip accents (default: strip them)",
            "flag": "--keep-accents",
            "const": False,
        },
    )
    character_coverage: float = field(
        default=0.99995,
        metadata={
            "help": "share of the characters the vocabulary covers; the rarest others become <unk>",
        },
    )
    input_sentence_size: int = field(
        default=10_000_000,
        metadata={
            "help": "sentences trained on at most: a seeded uniform sample of them",
        },
    )
    max_sentence_length: int = field(
        default=16384,
        metadata={
            "help": "longest sentence trained on, in bytes (longer ones are left out and counted)",
        },
    )
    seed: int = field(default=12345, metadata={"help": "seed of the sample and of sentencepiece"})
    num_threads: int = field(
        default=1,
        metadata={
            "help": "sentencepiece's training threads (the same corpus, seed and threads give the same model)",
            "flag": "--threads",
        },
    )
    read: ReadConfig = field(default_factory=ReadConfig, metadata={"help": "how the corpus is read"})

    def __post_init__(self) -> None:
        if self.vocab_size < len(SPECIAL_TOKENS) + 10:
            raise ValueError(
                f"the tokenizer's vocab_size (--vocab-size) must be >= {len(SPECIAL_TOKENS) + 10}, "
                f"got {self.vocab_size}"
            )
        if not 0.9 <= self.character_coverage <= 1.0:
            raise ValueError(
                f"TokenizerTrainConfig.character_coverage must be in [0.9, 1], got {self.character_coverage}"
            )
        if self.input_sentence_size <= 100:  # sentencepiece refuses smaller samples
            raise ValueError(f"TokenizerTrainConfig.input_sentence_size must be > 100, got {self.input_sentence_size}")
        for name in ("max_sentence_length", "num_threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"TokenizerTrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(
                f"TokenizerTrainConfig.seed must be an integer in [0, 2**32) (sentencepiece's), got {self.seed!r}"
            )


def _sentences(docs: Iterator[list[str]], cfg: TokenizerTrainConfig, bar: tqdm, report: TextReport) -> Iterator[str]:
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
        report.note(
            f"{too_long:,} sentence(s) longer than max_sentence_length={cfg.max_sentence_length:,} bytes "
            "left out of vocabulary training (unsplit long lines? drop --no-split)"
        )
    bar.set_description("sentences read; training the unigram model")
    bar.refresh()


def _handed_over(sentences: list[str]) -> Iterator[str]:
    """The sentences in order, each released as sentencepiece takes its copy: one copy of the sample in memory."""
    sentences.reverse()
    while sentences:
        yield sentences.pop()


def sample_sentences(sentences: Iterator[str], size: int, rng: random.Random) -> list[str]:
    """A uniform sample of at most `size` sentences (reservoir sampling, Algorithm R), every sentence when
    there are no more. Drawn here rather than by sentencepiece, whose own sample ignores its seed."""
    sample: list[str] = []
    for i, sentence in enumerate(sentences):
        if i < size:
            sample.append(sentence)
        elif (j := rng.randrange(i + 1)) < size:
            sample[j] = sentence
    return sample


def check_tokenizer_out(out: Path, *, source: Path | None = None) -> None:
    """Refuse an output directory a new tokenizer must not be written into: one holding a model (weights or a
    config.json: litebert's, a fine-tuned one's or transformers'), whose embeddings have one row per piece of the
    tokenizer beside them, or the directory of `source`, the tokenizer being extended. A directory holding only an
    earlier tokenizer is replaced: every tokenizer file is written again, and data built with the old one is
    refused by its sha256."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: a file, not a directory; --out names the tokenizer directory to write")
    if source is not None and out.resolve() == source.resolve():
        raise ValueError(
            f"{out}: the output is the tokenizer being extended; write the extended tokenizer to a new "
            "directory (--out), so that data and models built with this one keep their files"
        )
    found = model_files(out)
    if found:
        raise ValueError(
            f"{out}: holds a model ({', '.join(found)}), and a new tokenizer there would not match its embeddings; "
            "write the tokenizer to a new directory (--out); `litebert pretrain --init-from MODEL --tokenizer NEW` "
            "grows a model to a tokenizer extended with add-words"
        )


def model_files(directory: Path) -> list[str]:
    """The files of `directory` that mean a model is there: weights (.safetensors, .bin) or a config.json."""
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.suffix in MODEL_SUFFIXES or p.name == "config.json")


MODEL_SUFFIXES = (".safetensors", ".bin")


@dataclass(kw_only=True)
class TokenizerFilesConfig:
    """The corpus a tokenizer is trained on and the directory it is written to (the flags of `litebert tokenizer
    train` beside TokenizerTrainConfig's); neither is part of the vocabulary's settings."""

    inputs: list[str] = field(
        metadata={"help": "files or directories (raw text, read like `text prepare`)", "positional": True, "nargs": "+"}
    )
    out: str = field(metadata={"help": "tokenizer directory to write"})


def train_tokenizer(
    inputs: Paths,
    out_dir: str | Path,
    *,
    vocab_size: int | None = None,
    config: TokenizerTrainConfig | None = None,
    progress: bool = False,
    report: TextReport | None = None,
    also_write: Callable[[Tokenizer], None] | None = None,
) -> Tokenizer:
    """Train a unigram SentencePiece model on raw text and write out_dir/{spiece.model, litebert_tokenizer.json},
    with whatever `also_write(tokenizer)` writes into the tokenizer's directory (litebert.hf.write_hf_tokenizer_files:
    transformers' files). The files appear together, once all are written (litebert.io.staged_files): a failure,
    a full disk included, leaves out_dir as it was; out_dir is locked meanwhile (a second writer is refused)."""
    cfg = config or TokenizerTrainConfig()
    if vocab_size is not None:
        cfg = dataclasses.replace(cfg, vocab_size=vocab_size)
    report = report if report is not None else TextReport()
    out = Path(out_dir)
    check_tokenizer_out(out)  # before hours of reading and training
    with staged_files(out, "--out names the tokenizer directory to write") as stage:
        proto = _train(inputs, out, cfg, progress, report)
        settings = {"do_lower_case": cfg.do_lower_case, "strip_accents": cfg.strip_accents}
        tok = Tokenizer(proto, Normalizer(**settings), stage)
        write_bytes(stage / MODEL_FILE, proto)
        write_settings(tok, train=asdict(cfg) | {"corpus": report.summary()})
        if also_write is not None:
            also_write(tok)
    tok.dir = out
    return tok


def _train(inputs: Paths, out: Path, cfg: TokenizerTrainConfig, progress: bool, report: TextReport) -> bytes:
    """The trained model, finalized (serialized ModelProto)."""
    # imported here: the package's other modules run without sentencepiece and tqdm (the ONNX predictor's
    # deployments install neither; litebert.finetune.tasks reads truncate_pair from litebert.tokenizer)
    import sentencepiece as spm
    from tqdm import tqdm

    docs = read_documents(inputs, report=report, config=cfg.read, exclude=[out])  # checks the paths now
    model = io.BytesIO()
    spm.set_random_generator_seed(cfg.seed)
    with tqdm(desc="sentences read", unit=" sent", disable=not progress) as bar:
        read = _sentences(docs, cfg, bar, report)
        sentences = sample_sentences(read, cfg.input_sentence_size, random.Random(cfg.seed))
        if not sentences:  # sentencepiece would stop on its internal check "!sentences_.empty()"
            notes = f"; {report.messages[-1]}" if report.messages else ""
            raise ValueError(
                f"empty corpus: none of the {report.sentences:,} sentences read from {report.files:,} file(s) is "
                f"left to train on (empty after normalisation, e.g. only zero-width or control characters, or too "
                f"long{notes})"
            )
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=_handed_over(sentences),
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
            msg = f"sentencepiece training failed ({report.sentences:,} sentences read from {report.files:,} file(s)"
            raise ValueError(f"{msg}{notes}): {exc}") from exc
    return _finalize_model(model.getvalue())


def _finalize_model(model: bytes) -> bytes:
    """Two edits to the trained ModelProto, ids unchanged.

    1. Pieces ending in digit+comma ("▁1990,") become UNUSED: sentencepiece never emits them, so a comma after a
       digit is always its own piece, the intent of the official "3.0," re-split (tokenization.encode_pieces),
       with nothing for transformers' tokenizer.json to copy.
    2. Scores are rounded to multiples of 1/256 (a change of at most 0.002 in a log-probability). Sentencepiece
       sums path scores in float32, tokenizers in float64, so near-ties could be resolved differently (rarely, but
       measurably: docs/log.md at `fca5adb`); on this grid both sums are exact for any path
       below 65,536 in magnitude, and both engines then pick the same segmentation.
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2  # protobuf: imported by what edits a model

    proto = model_pb2.ModelProto.FromString(model)
    for piece in proto.pieces:
        if piece.type == piece.NORMAL and DIGIT_COMMA.search(piece.piece):
            piece.type = piece.UNUSED
        piece.score = round(piece.score * 256) / 256
    return proto.SerializeToString()
