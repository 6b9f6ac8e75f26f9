"""litebert's model format: config.json + model.safetensors (with a digest of its tensors), saved atomically and
loaded with every problem named (shape mismatch, missing or corrupt weights, bad config). No pickle.

This module knows litebert's own files only; a directory that may also be transformers' (and the tokenizer files
beside a model) is litebert.hf's concern: `litebert.save` and `litebert.load` are litebert.hf.directory's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from litebert.io import atomic_path, check_whole, read_json, write_json
from litebert.model.config import ModelConfig
from litebert.model.heads import AlbertForPretraining
from litebert.model.params import LOADING_COPIES, check_model_size

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
# A fine-tuned model directory (litebert.finetune) holds these beside the pretrained model: the task head's
# weights and the task's settings. Named here so that every reader of a model directory knows them.
HEAD_FILE, META_FILE = "head.safetensors", "finetune.json"
LITEBERT_MARKER = "litebert"  # the config.json key that says litebert wrote it (every field is then present)

_DIGEST_KEY = "litebert_sha256"


def tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over names, shapes, dtypes and bytes, in name order: detects a corrupted weights file."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def write_safetensors(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    """Write through litebert.io.atomic_path, fsynced: a crash never leaves half a file, nor loses a whole one."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    with atomic_path(path, needed=sum(t.numel() * t.element_size() for t in tensors.values()), fsync=True) as tmp:
        save_file(tensors, tmp, metadata={**metadata, _DIGEST_KEY: tensors_digest(tensors)})
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # safetensors writes 0600, which would keep a shared model from other users


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Read every tensor, verifying litebert's digest when the file carries one."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: weights file not found")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except (SafetensorError, OSError, ValueError) as exc:
        raise ValueError(f"{path}: corrupt or unreadable safetensors file ({exc})") from None
    expected = metadata.get(_DIGEST_KEY)
    if expected is not None and tensors_digest(tensors) != expected:
        raise ValueError(f"{path}: weights do not match their recorded checksum (file is corrupt)")
    return tensors


def recorded_digest(path: Path) -> str | None:
    """The weights digest a litebert safetensors file records in its metadata (None when absent or unreadable):
    tells whether two files hold the same weights without reading them."""
    try:
        with safe_open(str(path), framework="pt") as f:
            return (f.metadata() or {}).get(_DIGEST_KEY)
    except (SafetensorError, OSError, ValueError):
        return None


def check_state_dict(
    model: nn.Module, tensors: dict[str, torch.Tensor], source: Path, against: str = "config.json"
) -> None:
    """Refuse weights that do not fit the model built from the config file `against`, naming every offending
    tensor."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = [
        f"{k}: file {tuple(tensors[k].shape)} vs config {tuple(v.shape)}"
        for k, v in expected.items()
        if k in tensors and tensors[k].shape != v.shape
    ]
    problems = []
    if missing:
        problems.append(f"missing tensors {missing}")
    if unexpected:
        problems.append(f"unexpected tensors {unexpected}")
    if wrong:
        problems.append("shapes disagree with the config: " + "; ".join(wrong))
    if problems:
        raise ValueError(f"{source}: weights do not match {against}: " + " | ".join(problems))


def save_model(model: nn.Module, directory: str | Path) -> Path:
    """Write config.json and model.safetensors into `directory` (`litebert.save` also copies a tokenizer)."""
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper: save the module it wraps
    if not isinstance(model, AlbertForPretraining):
        raise TypeError(
            f"save() writes an AlbertForPretraining (what load() reads back), got {type(model).__name__}; "
            "a backbone is saved with the model that holds it"
        )
    return write_model(directory, model.state_dict(), model.config)


def write_model(directory: str | Path, state: dict[str, torch.Tensor], config: ModelConfig) -> Path:
    """The files of `save_model` from a state dict (a training run's, gathered from every rank)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(state, directory / WEIGHTS_FILE, {"format": "pt", "producer": "litebert"})
    write_json({LITEBERT_MARKER: True, **config.to_dict()}, directory / CONFIG_FILE)
    return directory


def read_config_json(directory: Path) -> dict[str, Any]:
    path = directory / CONFIG_FILE
    if not directory.is_dir():
        what = "is a file, not a model directory" if directory.exists() else "model directory not found"
        raise FileNotFoundError(f"{directory}: {what}")
    check_whole(directory)  # a model a killed writer was moving in is finished first, never read mixed
    if not path.is_file() and (directory / "model" / CONFIG_FILE).is_file():  # a pretraining run directory
        raise FileNotFoundError(
            f"{directory}: no {CONFIG_FILE}; a pretraining run keeps its model in {directory / 'model'}"
        )
    data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def config_from_json(data: dict[str, Any], where: Path) -> ModelConfig:
    """The ModelConfig a litebert config.json (with its marker) or a plain ModelConfig file holds."""
    fields = {k: v for k, v in data.items() if k != LITEBERT_MARKER}
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    missing = sorted(known - set(fields)) if data.get(LITEBERT_MARKER) else []
    if missing:  # save() writes every field: defaults would build another model silently
        raise ValueError(f"{where}: a litebert model's config without field(s) {missing} (damaged or edited?)")
    return ModelConfig.from_dict(fields, source=str(where))


def load_model_config(directory: str | Path) -> ModelConfig:
    """The ModelConfig of a litebert model directory."""
    directory = Path(directory)
    return config_from_json(read_config_json(directory), directory / CONFIG_FILE)


def load_model(directory: str | Path) -> AlbertForPretraining:
    """The AlbertForPretraining of a litebert model directory, in eval mode."""
    directory = Path(directory)
    config = load_model_config(directory)
    check_model_size(config, copies=LOADING_COPIES, what=str(directory / CONFIG_FILE))  # before any tensor is made
    model = AlbertForPretraining(config)
    tensors = read_safetensors(directory / WEIGHTS_FILE)
    check_state_dict(model, tensors, directory / WEIGHTS_FILE)
    model.load_state_dict(tensors)
    return model.eval()
