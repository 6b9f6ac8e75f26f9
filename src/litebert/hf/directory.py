"""A model directory, whoever wrote it: `load` and `load_config` read litebert's or transformers', `save` writes
litebert's with the tokenizer files both libraries read, and `import_hf` / `export_hf` convert between the two.

litebert.load, litebert.save and the `litebert convert` commands are these functions; `convert_model` runs the one a
`ConvertConfig` (the command's flags) names, the official TF checkpoints' (`convert_tf`) included.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from litebert.hf.convert import (
    check_destination,
    check_distinct,
    export_finetuned,
    load_hf,
    model_files,
    save_hf,
)
from litebert.hf.names import config_from_hf
from litebert.hf.tf_checkpoint import CONFIG_NAME as TF_CONFIG_FILE
from litebert.hf.tf_checkpoint import convert_tf, is_tf_checkpoint_dir, load_tf, read_albert_config
from litebert.hf.tokenizer import copy_tokenizer_with_hf_files
from litebert.io import field_flag, read_json, staged_files
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.weights import (
    CONFIG_FILE,
    META_FILE,
    config_from_json,
    load_model,
    read_config_json,
    save_model,
)


def is_transformers_config(data: dict) -> bool:
    return data.get("model_type") == "albert"


def _config(data: dict, where: Path) -> ModelConfig:
    return config_from_hf(data) if is_transformers_config(data) else config_from_json(data, where)


def load_config(directory: str | Path) -> ModelConfig:
    """The ModelConfig of a litebert, transformers ALBERT or official TF checkpoint directory."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file() and is_tf_checkpoint_dir(directory):
        return read_albert_config(directory / TF_CONFIG_FILE)
    return _config(read_config_json(directory), directory / CONFIG_FILE)


def read_model_config(path: str | Path) -> ModelConfig:
    """The ModelConfig of a model directory, or of a JSON file: a model's config.json (litebert's or
    transformers') or a plain ModelConfig file."""
    path = Path(path)
    if path.is_dir():
        return load_config(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return _config(data, path)


def load(directory: str | Path) -> AlbertForPretraining:
    """Load an AlbertForPretraining from a litebert directory, a transformers ALBERT directory or an official TF
    checkpoint directory (albert_config.json beside model.ckpt-*), in eval mode (as transformers' from_pretrained;
    call .train() to train it)."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file() and is_tf_checkpoint_dir(directory):
        return load_tf(directory)
    if is_transformers_config(read_config_json(directory)):
        return load_hf(directory).eval()
    return load_model(directory)


def save(model: nn.Module, directory: str | Path, tokenizer_dir: str | Path | None = None) -> Path:
    """Write config.json and model.safetensors into `directory`, and the tokenizer of `tokenizer_dir` (if given)
    with transformers' tokenizer files, so that both libraries read the directory. The files appear together
    (litebert.io.staged_files): a kill at any instant leaves the directory's old files or all the new ones."""
    with staged_files(directory, "the directory to save the model into") as stage:
        write_saved(model, stage, tokenizer_dir)
    return Path(directory)


def write_saved(model: nn.Module, directory: str | Path, tokenizer_dir: str | Path | None = None) -> Path:
    """The files of `save`, written into `directory` as they come (a staging or checkpoint directory)."""
    directory = save_model(model, directory)
    if tokenizer_dir is not None:
        copy_tokenizer_with_hf_files(tokenizer_dir, directory)
    return directory


def import_hf(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert a transformers ALBERT directory into a litebert directory (tokenizer files included); dst_dir is
    new or empty (see convert.check_destination)."""
    check_distinct(src_dir, dst_dir)
    check_destination(dst_dir, model_files(dst_dir))
    model = load_hf(src_dir)
    with _converting_into(dst_dir) as stage:
        write_saved(model, stage, tokenizer_dir=src_dir)
    return Path(dst_dir)


def export_hf(src_dir: str | Path, dst_dir: str | Path) -> Path:
    """Convert a litebert directory into a transformers ALBERT directory (tokenizer files included). A
    fine-tuned directory becomes the transformers task model of its head (AlbertForSequenceClassification,
    ...ForTokenClassification, ...ForQuestionAnswering, ...ForMultipleChoice) with its labels; a head transformers
    has no class for (mean pooling, the similarity bi-encoder) is left out, with a warning. dst_dir is new or
    empty (see convert.check_destination)."""
    check_distinct(src_dir, dst_dir)
    check_destination(dst_dir, model_files(dst_dir))
    with _converting_into(dst_dir) as stage:
        if (Path(src_dir) / META_FILE).is_file():
            export_finetuned(Path(src_dir), stage)
        else:
            save_hf(load(src_dir), stage, tokenizer_dir=src_dir)
    return Path(dst_dir)


DIRECTIONS = ("to-hf", "from-hf", "from-tf")


@dataclass(kw_only=True)
class ConvertConfig:
    """One conversion: litebert -> transformers (to-hf), back (from-hf), or an official TF checkpoint -> litebert
    (from-tf, which alone reads the fields after dst)."""

    direction: str = field(
        metadata={
            "help": "to-hf: litebert -> transformers; from-hf: transformers -> litebert; from-tf: an official TF "
            "checkpoint (albert_config.json beside model.ckpt-*, or a prefix) -> litebert",
            "choices": DIRECTIONS,
            "positional": True,
        }
    )
    src: str = field(
        metadata={"help": "the model directory (from-tf: the checkpoint or its prefix)", "positional": True}
    )
    dst: str = field(metadata={"help": "the directory to write (new or empty)", "positional": True})
    tf_config: str | None = field(
        default=None,
        metadata={"help": "from-tf: albert_config.json (default: beside the checkpoint)", "metavar": "FILE"},
    )
    spm_model: str | None = field(
        default=None,
        metadata={
            "help": "from-tf: the SentencePiece model (default: the *.model beside the checkpoint)",
            "metavar": "FILE",
        },
    )
    do_lower_case: bool = field(
        default=True,
        metadata={
            "help": "from-tf: a cased model: no lower-casing (the releases are uncased)",
            "flag": "--cased",
            "const": False,
        },
    )
    strip_accents: bool = field(
        default=True,
        metadata={
            "help": "from-tf: no accent stripping (the releases strip them)",
            "flag": "--keep-accents",
            "const": False,
        },
    )

    def __post_init__(self) -> None:
        self.src, self.dst = str(self.src), str(self.dst)  # Paths from the Python API
        if self.direction not in DIRECTIONS:
            raise ValueError(f"ConvertConfig.direction must be one of {DIRECTIONS}, got {self.direction!r}")
        defaults = {"tf_config": None, "spm_model": None, "do_lower_case": True, "strip_accents": True}
        tf_only = [field_flag(ConvertConfig, n) for n, default in defaults.items() if getattr(self, n) != default]
        if tf_only and self.direction != "from-tf":
            raise ValueError(f"{', '.join(tf_only)}: for from-tf only")


def convert_model(config: ConvertConfig) -> Path:
    """Run the conversion `config` names (`litebert convert`); returns the directory written."""
    if config.direction == "to-hf":
        return export_hf(config.src, config.dst)
    if config.direction == "from-hf":
        return import_hf(config.src, config.dst)
    return convert_tf(
        config.src,
        config.dst,
        config_file=config.tf_config,
        spm_model=config.spm_model,
        do_lower_case=config.do_lower_case,
        strip_accents=config.strip_accents,
    )


@contextmanager
def _converting_into(dst_dir: str | Path) -> Iterator[Path]:
    """dst_dir locked, and a staging directory whose files move into it once all are written (a failure, a full
    disk or a kill included, leaves dst_dir as it was or the conversion whole, see staged_files); checked again
    under the lock, for a conversion that wrote there meanwhile."""
    with staged_files(dst_dir, "the destination names the directory to convert into", discard_unfinished=True) as stage:
        check_destination(dst_dir, model_files(dst_dir))
        yield stage
