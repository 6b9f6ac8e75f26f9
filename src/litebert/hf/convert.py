"""Converting between litebert and transformers ALBERT directories: read transformers' weights (safetensors, sharded,
or a weights-only pytorch_model.bin), `load_hf` / `save_hf`, and `import_hf` / `export_hf` (a fine-tuned model
exports as its task's transformers class)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from litebert.hf.names import (
    OPTIONAL_PARTS,
    TASK_HEAD_PREFIXES,
    config_from_hf,
    config_to_hf,
    from_hf_state_dict,
    to_hf_state_dict,
)
from litebert.hf.tokenizer import HF_TOKENIZER_CONFIG, copy_tokenizer_with_hf_files
from litebert.io import read_json, unfinished_files, write_json
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import LOADING_COPIES, check_model_size
from litebert.model.weights import (
    CONFIG_FILE,
    HEAD_FILE,
    META_FILE,
    WEIGHTS_FILE,
    check_state_dict,
    load_model,
    read_config_json,
    read_safetensors,
    write_safetensors,
)


def read_hf_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The tensors of a transformers directory: model.safetensors, its sharded form (an index file), or a
    pytorch_model.bin read with torch.load(weights_only=True), which refuses anything but tensors."""
    if (directory / WEIGHTS_FILE).is_file():
        return read_safetensors(directory / WEIGHTS_FILE)
    index = directory / f"{WEIGHTS_FILE}.index.json"
    if index.is_file():
        data = read_json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise ValueError(f'{index}: no "weight_map" object naming the shard of each tensor')
        shards = sorted({shard for shard in weight_map.values() if _plain_name(shard, index)})
        return {k: v for shard in shards for k, v in read_safetensors(directory / shard).items()}
    legacy = directory / "pytorch_model.bin"
    if legacy.is_file():
        try:
            tensors = torch.load(legacy, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad or unsafe file
            raise ValueError(f"{legacy}: not a plain tensor checkpoint ({exc})") from None
        if not isinstance(tensors, dict) or not all(isinstance(v, torch.Tensor) for v in tensors.values()):
            raise ValueError(f"{legacy}: expected a dict of tensors (a state dict)")
        return tensors
    raise FileNotFoundError(f"{directory}: no {WEIGHTS_FILE}, {index.name} or pytorch_model.bin")


def _plain_name(shard: object, index: Path) -> bool:
    """True for a shard named by a plain file name; any other (a path such as "../../x.safetensors" or an absolute
    one, which would read weights from outside the model directory) is refused."""
    if not isinstance(shard, str) or shard in ("", ".", "..") or "\\" in shard or Path(shard).name != shard:
        raise ValueError(
            f"{index}: weight_map names the shard {shard!r}, which is not a file name in the model "
            "directory; shards are plain file names beside the index"
        )
    return True


def load_hf(directory: str | Path) -> AlbertForPretraining:
    """An AlbertForPretraining from a transformers ALBERT directory saved by any of its ALBERT classes."""
    directory = Path(directory)
    data = read_config_json(directory)
    if data.get("model_type") != "albert":
        what = "a litebert directory" if data.get("litebert") else "its config.json has no model_type 'albert'"
        raise ValueError(f"{directory}: not a transformers ALBERT directory ({what})")
    config = config_from_hf(data)
    check_model_size(config, copies=LOADING_COPIES, what=str(directory / CONFIG_FILE))  # before any tensor is made
    model = AlbertForPretraining(config)
    raw = read_hf_weights(directory)
    heads = sorted(k for k in raw if k.startswith(TASK_HEAD_PREFIXES))
    if heads:
        warnings.warn(
            f"{directory}: the checkpoint's task head ({', '.join(heads)}) is not loaded; litebert loads the "
            "pretrained backbone, and fine-tuning starts its own head fresh",
            stacklevel=2,
        )
    tensors = from_hf_state_dict(raw, config)
    fresh = tuple(prefix for prefix in OPTIONAL_PARTS if not any(k.startswith(prefix) for k in tensors))
    if fresh:
        warnings.warn(
            f"{directory}: the checkpoint has no {' and no '.join(OPTIONAL_PARTS[p] for p in fresh)} (saved by a "
            "transformers class other than AlbertForPreTraining); those weights keep a fresh initialisation",
            stacklevel=2,
        )
        tensors = {**{k: v for k, v in model.state_dict().items() if k.startswith(fresh)}, **tensors}
    check_state_dict(model, tensors, directory)
    model.load_state_dict(tensors)
    return model


def save_hf(
    model: AlbertForPretraining,
    directory: str | Path,
    tokenizer_dir: str | Path | None = None,
    *,
    task: TaskClass | None = None,
) -> Path:
    """Write `model` as a transformers ALBERT directory: AlbertForPreTraining's layout, or with `task` that
    task class's (the backbone, the pooler where the class has one, and the task's head)."""
    directory = Path(directory)
    hf_config = config_to_hf(model.config)  # refuses unsupported sharing before anything is written
    tensors = to_hf_state_dict(model)
    if task is not None:
        dropped = "predictions.", "sop_classifier.", *(() if task.pooler else ("albert.pooler.",))
        tensors = {**{k: v for k, v in tensors.items() if not k.startswith(dropped)}, **task.head}
        hf_config = {**hf_config, "architectures": [task.architecture], **task.fields}
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(tensors, directory / WEIGHTS_FILE, {"format": "pt"})
    write_json(hf_config, directory / CONFIG_FILE)
    if tokenizer_dir is not None:
        copy_tokenizer_with_hf_files(tokenizer_dir, directory)
        settings = directory / HF_TOKENIZER_CONFIG
        if settings.is_file():  # transformers truncates to this: the model's own maximum, not a default 512
            write_json({**read_json(settings), "model_max_length": model.config.max_position}, settings)
    return directory


@dataclass
class TaskClass:
    """A transformers ALBERT task class: its name, its head's Linear layer's name, whether it has the pooler (the
    token and span classes read every token and build their backbone without one); and what an export holds."""

    architecture: str
    linear: str
    pooler: bool
    head: dict[str, torch.Tensor] = field(default_factory=dict)  # tensors under transformers' names
    fields: dict[str, Any] = field(default_factory=dict)  # config.json fields: num_labels, id2label, ...


# litebert head kind -> the transformers class with that head.
_TASK_CLASSES = {
    "sequence": TaskClass("AlbertForSequenceClassification", "classifier", pooler=True),
    "token": TaskClass("AlbertForTokenClassification", "classifier", pooler=False),
    "span": TaskClass("AlbertForQuestionAnswering", "qa_outputs", pooler=False),
    "choice": TaskClass("AlbertForMultipleChoice", "classifier", pooler=True),
}


# The head kind of each fine-tuning task, for a finetune.json that does not record it.
_HEAD_OF_TASK = {
    "classification": "sequence",
    "regression": "sequence",
    "token-classification": "token",
    "squad": "span",
    "multiple-choice": "choice",
    "similarity": "pair-embedding",
}


# Files whose presence means a directory holds a model: litebert's, a fine-tuned one's, or transformers'.
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE, f"{WEIGHTS_FILE}.index.json", "pytorch_model.bin", HEAD_FILE, META_FILE)


def model_files(directory: str | Path) -> list[str]:
    """The MODEL_FILES in `directory`: a model there, which a tokenizer or a conversion must not be written over."""
    return [name for name in MODEL_FILES if (Path(directory) / name).is_file()]


def export_finetuned(src: Path, dst_dir: str | Path) -> Path:
    """A fine-tuned directory (its finetune.json and head.safetensors beside the model) as the transformers task
    model of its head, or as AlbertForPreTraining without the head where transformers has no class for it."""
    meta = read_json(src / META_FILE)
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise ValueError(f"{src / META_FILE}: not a {META_FILE} written by litebert (no task config)")
    task_name = meta.get("task")
    kind = meta.get("head", _HEAD_OF_TASK.get(task_name))
    pooling = meta["config"].get("pooling", "cls")
    model = load_model(src)
    if kind not in _TASK_CLASSES or pooling != "cls":
        why = "mean pooling" if kind in _TASK_CLASSES else f"the {task_name} head"
        warnings.warn(
            f"{src}: transformers has no ALBERT class for {why}; the export holds the fine-tuned model's backbone "
            f"(AlbertForPreTraining layout) and leaves out the task head and its settings ({HEAD_FILE}, {META_FILE})",
            stacklevel=3,
        )
        return save_hf(model, dst_dir, tokenizer_dir=src)
    head = read_safetensors(src / HEAD_FILE)
    if "out.weight" not in head:
        raise ValueError(f"{src / HEAD_FILE}: no out.weight, the {kind} head's layer (tensors: {sorted(head)})")
    state = meta.get("state") or {}
    labels = state.get("labels") if isinstance(state, dict) else None
    if labels is not None and not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
        raise ValueError(f"{src / META_FILE}: field 'state.labels' must be a list of label names, got {labels!r}")
    task = _TASK_CLASSES[kind]
    fields = task_config_fields(kind, labels, head["out.weight"].shape[0])
    tensors = {f"{task.linear}.{k.removeprefix('out.')}": v for k, v in head.items() if k.startswith("out.")}
    return save_hf(model, dst_dir, tokenizer_dir=src, task=dataclasses.replace(task, head=tensors, fields=fields))


def task_architecture(kind: str) -> str | None:
    """The transformers class of a litebert head kind (None: transformers has none, e.g. the bi-encoder)."""
    return _TASK_CLASSES[kind].architecture if kind in _TASK_CLASSES else None


def task_config_fields(kind: str, labels: list[str] | None, outputs: int) -> dict[str, Any]:
    """config.json's task fields for a head of `kind` with `outputs` units: num_labels, problem_type, and the
    labels as id2label / label2id, as transformers' task classes (and the ONNX runtimes that follow them) read."""
    fields: dict[str, Any] = {}
    if kind != "choice":  # the choice class has one unit whatever num_labels says
        fields["num_labels"] = outputs
    if kind == "sequence":
        fields["problem_type"] = "regression" if outputs == 1 else "single_label_classification"
    if labels and kind in ("sequence", "token"):
        fields["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        fields["label2id"] = {str(label): i for i, label in enumerate(labels)}
    return fields


def check_distinct(src_dir: str | Path, dst_dir: str | Path) -> None:
    if Path(src_dir).resolve() == Path(dst_dir).resolve():
        raise ValueError(f"{dst_dir}: the destination is the source; convert into another directory")


def check_destination(dst_dir: str | Path, found: list[str]) -> None:
    """Refuse a destination that is not new or empty (hidden files and a README aside): a conversion writes some
    files and leaves the others, so the directory would mix two models (one class's config.json beside another's
    weights or head), or the new model with an old tokenizer when the source has none. `found`: the model files
    it holds (litebert.hf.directory.model_files)."""
    dst = Path(dst_dir)
    if dst.exists() and not dst.is_dir():
        raise ValueError(f"{dst}: a file, not a directory; convert into a new or empty directory")
    # the files of a conversion killed while moving them in are its own: the conversion runs again over them
    unfinished = set(unfinished_files(dst))
    found = [name for name in found if name not in unfinished]
    if found:
        raise ValueError(
            f"{dst}: already holds a model ({', '.join(found)}); convert into a new or empty directory, "
            "or remove this one first to replace it"
        )
    # a clone of a hub repository (.git, .gitattributes, README.md) is where a converted model often goes
    others = (
        sorted(p.name for p in dst.iterdir() if not p.name.startswith((".", "README")) and p.name not in unfinished)
        if dst.is_dir()
        else []
    )
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise ValueError(
            f"{dst}: not empty ({shown}); convert into a new or empty directory, so that no file "
            "there is mistaken for part of the converted model"
        )
