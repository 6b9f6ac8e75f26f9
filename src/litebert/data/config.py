"""DataConfig: every setting of the pretraining-data step, validated, with the official defaults (docs/paper.md §3)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from litebert.io.limits import MAX_POSITIONS

OBJECTIVES = ("sop", "nsp", "none")
MASKINGS = ("static", "dynamic")


@dataclass(kw_only=True)
class DataConfig:
    """How documents become pretraining examples.

    Defaults are those of the official create_pretraining_data.py (random_seed 12345, dupe_factor 40 for static
    masks). ``max_predictions_per_seq=None`` resolves to the official 20, or to max_seq_length when that is
    shorter (as ``--max-predictions``). ``dupe_factor=None`` resolves to 40 for static masking and 1 for dynamic
    masking, whose masks are redrawn every epoch anyway (RoBERTa). ``window_chars`` bounds memory: documents
    are shuffled, paired with random other documents and their examples shuffled within windows of about this
    many characters, and a window is the unit of work of one process (see build.py). 1M characters is about
    250k tokens; with dupe_factor 40 a window's examples then take about 50 MB.
    """

    max_seq_length: int = field(default=512, metadata={"help": "tokens per example, [CLS] and [SEP]s included"})
    max_predictions_per_seq: int | None = field(
        default=None,
        metadata={
            "help": "masked positions per example at most (default: the official 20, or max_seq_length when that is "
            "shorter)",
            "flag": "--max-predictions",
        },
    )
    masked_lm_prob: float = field(default=0.15, metadata={"help": "share of the tokens masked"})
    dupe_factor: int | None = field(
        default=None,
        metadata={
            "help": "passes over the corpus, each with other pairs and masks (default: 40 with static masking, 1 with "
            "dynamic)",
        },
    )
    short_seq_prob: float = field(
        default=0.1,
        metadata={
            "help": "share of examples cut to a random shorter length (as the official code, to match fine-tuning)",
        },
    )
    max_ngram: int = field(default=3, metadata={"help": "longest masked n-gram of whole words"})
    objective: str = field(
        default="sop",
        metadata={
            "help": "sentence-pair task: sentence order (ALBERT), next sentence (BERT) or none",
            "choices": OBJECTIVES,
        },
    )
    masking: str = field(
        default="static",
        metadata={
            "help": "masks drawn once here (static) or again every epoch by the loader (dynamic)",
            "choices": MASKINGS,
        },
    )
    seed: int = field(default=12345, metadata={"help": "seed of the shuffles, pairs and masks"})
    eval_fraction: float = field(default=0.02, metadata={"help": "share of documents held out for evaluation"})
    examples_per_shard: int = field(default=16384, metadata={"help": "examples per shard file"})
    window_chars: int = field(
        default=1_000_000,
        metadata={
            "help": "shuffle window and unit of work of one process, in characters",
        },
    )

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"DataConfig.objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.masking not in MASKINGS:
            raise ValueError(f"DataConfig.masking must be one of {MASKINGS}, got {self.masking!r}")
        if self.dupe_factor is None:
            self.dupe_factor = 40 if self.masking == "static" else 1
        # [CLS] A [SEP] B [SEP] needs room for at least one token of each segment and then some.
        _check_int("max_seq_length", self.max_seq_length, 8, 1 << 20)
        MAX_POSITIONS.check(self.max_seq_length, "DataConfig.max_seq_length (--max-seq-length)")
        if self.max_predictions_per_seq is None:  # a fixed 20 was refused for sequences shorter than 20
            self.max_predictions_per_seq = min(20, self.max_seq_length)
        _check_int("max_predictions_per_seq", self.max_predictions_per_seq, 1, self.max_seq_length)
        _check_int("dupe_factor", self.dupe_factor, 1, 10_000)
        _check_int("max_ngram", self.max_ngram, 1, 64)
        _check_int("seed", self.seed, 0, (1 << 63) - 1)
        _check_int("examples_per_shard", self.examples_per_shard, 1, 1 << 30)
        _check_int("window_chars", self.window_chars, 1, 1 << 40)
        for name in ("masked_lm_prob", "short_seq_prob", "eval_fraction"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise ValueError(f"DataConfig.{name} must be a probability in [0, 1], got {value!r}")
        if self.masked_lm_prob == 0:  # every example needs a masked position: the MLM loss and accuracy are over them
            raise ValueError(
                "DataConfig.masked_lm_prob must be above 0 (--masked-lm-prob): with nothing masked there "
                "is no MLM loss to train or evaluate"
            )
        if self.eval_fraction == 1.0:
            raise ValueError("DataConfig.eval_fraction must be below 1 (no training documents would be left)")

    def to_dict(self) -> dict:
        return asdict(self)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"DataConfig.{name} must be an integer in [{low}, {high}], got {value!r}")
