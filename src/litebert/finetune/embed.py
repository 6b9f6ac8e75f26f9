"""Sentence and document embeddings: mean pooling of the backbone's last hidden states.

Mean pooling over the real tokens is Sentence-BERT's default (Reimers & Gurevych 2019) and beat the [CLS]
state there. A text longer than the model's maximum is split into consecutive windows of
max_seq_length - 2 pieces, each encoded as [CLS] window [SEP]; its embedding is the token-count-weighted
mean of the windows' mean-pooled states (so every piece of a document counts once), and the number of such
texts is reported. `litebert embed FILE` embeds one text per line, blank lines included, so row i of the
output is line i of the input.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from litebert.finetune.heads import mean_pool
from litebert.finetune.inference import EmbedConfig
from litebert.finetune.run import check_tokenizer_fits
from litebert.finetune.tasks.common import collate, open_text
from litebert.hf.directory import load
from litebert.hf.tokenizer import load_tokenizer
from litebert.io import check_not_an_input, write_bytes
from litebert.model.albert import Albert
from litebert.model.params import check_step_memory
from litebert.tokenizer.tokenizer import Tokenizer


@dataclass
class SentenceEmbeddings:
    vectors: np.ndarray  # (N, H) float32
    windowed: int  # texts longer than max_seq_length, embedded as several windows


def load_encoder(directory: str | Path) -> tuple[Albert, Tokenizer]:
    """The backbone and tokenizer of a litebert / transformers ALBERT / fine-tuned model directory; a tokenizer
    whose size is not the model's vocab_size is refused, as fine-tuning refuses it (run.load_pretrained)."""
    model, tok = load(directory), load_tokenizer(directory)
    check_tokenizer_fits(tok, model.config, directory)  # else wrong vectors, or an error on a rare word only
    return model.albert, tok


def _windows(ids: list[int], width: int) -> list[list[int]]:
    return [ids[i : i + width] for i in range(0, len(ids), width)] or [[]]


@torch.no_grad()
def embed_texts(
    backbone: Albert, tok: Tokenizer, texts: list[str], *, batch_size: int = 32, max_seq_length: int | None = None
) -> SentenceEmbeddings:
    """Mean-pooled embedding of each text (windows for long texts, see the module docstring). `backbone` is an
    Albert (or a model holding one as `.albert`); its train/eval mode is left as it was."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (one embedding each), not a single string")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size (--batch-size) must be a positive integer, got {batch_size!r}")
    backbone = getattr(backbone, "albert", backbone)
    positions = backbone.config.max_position
    max_len = positions if max_seq_length is None else max_seq_length
    if max_len > positions:
        raise ValueError(
            f"max_seq_length {max_len} (--max-seq-length) exceeds the model's {positions} positions "
            "(max_position); longer texts are embedded as several windows anyway"
        )
    if max_len < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS] + one token + [SEP]), got {max_len}")
    # before the first batch: a batch whose activations cannot fit would only end out of memory
    check_step_memory(
        backbone.config,
        min(batch_size, max(len(texts), 1)),
        max_len,
        training=False,
        device=next(backbone.parameters()).device,
    )
    was_training = backbone.training
    backbone.eval()
    try:
        return _embed(backbone, tok, texts, batch_size, max_len)
    finally:
        backbone.train(was_training)


def _embed(backbone: Albert, tok: Tokenizer, texts: list[str], batch_size: int, max_len: int) -> SentenceEmbeddings:
    device = next(backbone.parameters()).device
    owner, feats, windowed = [], [], 0
    for t, ids in enumerate(tok.encode(x) for x in texts):
        parts = _windows(ids, max_len - 2)
        windowed += len(parts) > 1
        for part in parts:
            seq = np.asarray([tok.cls_id, *part, tok.sep_id], dtype=np.int64)
            feats.append({"input_ids": seq, "token_type_ids": np.zeros_like(seq), "attention_mask": np.ones_like(seq)})
            owner.append(t)
    pad = {"input_ids": tok.pad_id, "token_type_ids": 0, "attention_mask": 0}
    # Sort windows by length so each batch pads little; results go back by index.
    order = np.argsort([len(f["input_ids"]) for f in feats], kind="stable")
    sums = np.zeros((len(texts), backbone.config.hidden_size), dtype=np.float64)
    counts = np.zeros(len(texts), dtype=np.float64)
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        batch = {k: v.to(device) for k, v in collate([feats[j] for j in idx], pad).items()}
        hidden, _ = backbone(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        pooled = mean_pool(hidden, batch["attention_mask"]).float().cpu().numpy()
        n_tokens = batch["attention_mask"].sum(1).cpu().numpy()
        for j, vec, n in zip(idx, pooled, n_tokens, strict=True):
            sums[owner[j]] += vec * n
            counts[owner[j]] += n
    return SentenceEmbeddings((sums / counts[:, None]).astype(np.float32), windowed)


def embed_file(
    path: str | Path,
    init: str | Path,
    out: str | Path | None = None,
    *,
    batch_size: int = EmbedConfig.batch_size,
    max_seq_length: int | None = EmbedConfig.max_seq_length,
) -> SentenceEmbeddings:
    """Embed every line of a text file with the model in `init`; save the (N, H) array to `out`, a .npy file
    written at exactly that path (numpy's np.save would add ".npy" to a name without it)."""
    if out is not None and Path(out).is_dir():  # before the model is loaded and every line embedded
        raise ValueError(f"{out}: a directory; --out names the .npy file to write (e.g. {Path(out) / 'emb.npy'})")
    if out is not None:
        check_not_an_input(out, path, init)
    with open_text(path) as f:  # rows are "\n"-terminated lines, as wc -l counts them (a lone "\r" is text)
        texts = [line.removesuffix("\r") for line in f.read().split("\n")]
    if texts and texts[-1] == "":
        texts.pop()  # the final newline ends the last line, it does not start another
    if not texts:
        raise ValueError(f"{path}: no lines to embed")
    backbone, tok = load_encoder(init)
    result = embed_texts(backbone, tok, texts, batch_size=batch_size, max_seq_length=max_seq_length)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        # through bytes: np.save into a file writes with tofile, whose short write on a full disk is an OSError
        # without its errno ("17024 requested and 992 written"); write_bytes names the file and the space
        buffer = io.BytesIO()
        np.save(buffer, result.vectors)
        write_bytes(out, buffer.getvalue())  # at the path the caller named, whole or not at all
    return result


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T
