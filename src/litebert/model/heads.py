"""Pretraining heads and the pretraining model: masked-LM (tied to the word embeddings) and SOP/NSP.

Fine-tuning heads live in litebert.finetune.heads; both sit on the same backbone (albert.Albert).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from litebert.model.albert import Albert, host_range, init_weights, on_host
from litebert.model.allocator import MMAP_THRESHOLD_MAX
from litebert.model.config import ModelConfig
from litebert.model.kernels import activation
from litebert.model.padding import RealTokens

IGNORE = -100  # label value for padding slots (masked LM) and for "no pair label" (SOP)


class MLMHead(nn.Module):
    """Linear(H, E) -> GELU -> LayerNorm -> logits = h @ word_embeddingsᵀ + bias (decoder tied to the input
    embeddings, as the official code: the only V-sized parameter of its own is the bias)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.act = config.hidden_act
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.norm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        h = self.norm(activation(self.act, self.dense(h)))  # (B, P, E)
        return F.linear(h, word_embeddings, self.bias)  # (B, P, V)


@dataclass
class PretrainingOutput:
    last_hidden_state: torch.Tensor  # (B, T, H)
    pooled: torch.Tensor  # (B, H)
    mlm_logits: torch.Tensor  # (B, P, V) at the given masked positions, else (B, T, V)
    sop_logits: torch.Tensor  # (B, 2)
    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None


# The MLM cross-entropy's fp32 temporaries (the logits' copy, their log-softmax, its zero-filled gradient) stay
# below glibc's largest mmap threshold, which litebert.model.allocator sets: a larger block is fresh pages from the
# kernel on every step. With 30,000 pieces a chunk is 270 masked slots (13 sequences of 20 predictions).
CE_CHUNK_BYTES = MMAP_THRESHOLD_MAX - 2**20


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """sum(w * CE) / (sum(w) + 1e-5) with w = 1 on real slots (official run_pretraining.get_masked_lm_output).

    The cross-entropy is computed in fp32, in row chunks of at most CE_CHUNK_BYTES of fp32 logits: the same values
    and gradients, and faster on CPU (python benchmarks/mlm_loss.py; docs/log.md at `e333630`), since the chunks'
    memory is reused from step to step instead of page-faulted in again.
    """
    flat = logits.reshape(-1, logits.shape[-1])
    targets = labels.reshape(-1).long().clamp(min=0)  # int32 labels too, as the embeddings take int32 ids
    rows = max(1, CE_CHUNK_BYTES // (4 * flat.shape[1]))
    if flat.shape[0] <= rows:
        ce = F.cross_entropy(flat.float(), targets, reduction="none")
    else:
        pieces = zip(flat.split(rows), targets.split(rows), strict=True)
        ce = torch.cat([F.cross_entropy(x.float(), y, reduction="none") for x, y in pieces])
    weights = (labels != IGNORE).reshape(-1).float()
    return (ce * weights).sum() / (weights.sum() + 1e-5)


def sop_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over examples that have a pair label; zero when none has (objective "none").

    The sum over the count, which is torch's mean bit for bit (forward and backward), written without asking
    whether any label is there: that question is a host synchronisation on a GPU and a graph break under
    torch.compile. With no label the sum is 0 and the head stays in the graph (DDP's gradient buckets) at 0."""
    total = F.cross_entropy(logits.float(), labels.long(), ignore_index=IGNORE, reduction="sum")
    return total / (labels != IGNORE).sum().clamp(min=1)


def check_targets(
    input_ids: torch.Tensor,
    masked_positions: torch.Tensor | None,
    masked_labels: torch.Tensor | None,
    sentence_order_label: torch.Tensor | None,
    vocab_size: int,
) -> None:
    """A clear error for masked positions or labels that do not fit the batch (torch's gather and cross-entropy
    name neither). Position and label ranges are checked on CPU only, as albert.check_ids does."""
    if input_ids.dim() != 2:  # the embeddings name that
        return
    B, T = input_ids.shape
    if masked_positions is not None:
        if masked_positions.dim() != 2 or masked_positions.shape[0] != B:
            raise ValueError(
                f"masked_positions of shape {tuple(masked_positions.shape)} must be (batch, slots) for "
                f"input_ids of shape {tuple(input_ids.shape)}"
            )
        if on_host(masked_positions) and masked_positions.numel():
            low, high = host_range(masked_positions)
            if low < 0 or high >= T:
                raise ValueError(
                    f"masked_positions hold {low if low < 0 else high}, outside [0, {T}) (input_ids' length)"
                )
    if sentence_order_label is not None and tuple(sentence_order_label.shape) != (B,):
        raise ValueError(f"sentence_order_label of shape {tuple(sentence_order_label.shape)} must be (batch,) = ({B},)")
    # A label is IGNORE or a class: mlm_loss clamps targets at 0, so another negative label (-1, the "ignore" of
    # some codebases) would silently train the slot towards id 0.
    targets = (("masked_labels", masked_labels, vocab_size), ("sentence_order_label", sentence_order_label, 2))
    for name, labels, size in targets:
        if labels is None or not on_host(labels):
            continue
        values = labels.detach().numpy()  # on the host: read from memory
        bad = (values != IGNORE) & ((values < 0) | (values >= size))
        if bad.any():
            raise ValueError(
                f"{name} hold {int(values[bad][0])}, outside [0, {size}) ({IGNORE} marks a slot to ignore)"
            )


class AlbertForPretraining(nn.Module):
    """Backbone + MLM head + SOP head; loss = MLM + SOP (paper section 4.1)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.albert = Albert(config, init=False)  # initialised below, with the heads
        self.mlm_head = MLMHead(config)
        self.sop_dropout = nn.Dropout(config.classifier_dropout)
        self.sop_head = nn.Linear(config.hidden_size, 2)
        init_weights(self, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        masked_labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        real_tokens: RealTokens | None = None,
    ) -> PretrainingOutput:
        """`real_tokens`: see Albert.forward (a training loop finds them on the host, ahead of the step)."""
        check_targets(input_ids, masked_positions, masked_labels, sentence_order_label, self.config.vocab_size)
        hidden, pooled = self.albert(input_ids, attention_mask, token_type_ids, real_tokens)
        h = hidden
        if masked_positions is not None:
            # Only the P masked slots reach the V-wide decoder: the largest saving of the MLM head.
            index = masked_positions.long().unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
            h = torch.gather(hidden, 1, index)  # (B, P, H)
        mlm_logits = self.mlm_head(h, self.albert.embeddings.word_embeddings.weight)
        sop_logits = self.sop_head(self.sop_dropout(pooled))  # (B, 2)
        out = PretrainingOutput(hidden, pooled, mlm_logits, sop_logits)
        if masked_labels is not None:
            if masked_labels.shape != mlm_logits.shape[:2]:
                raise ValueError(
                    f"masked_labels {tuple(masked_labels.shape)} do not match the MLM logits "
                    f"{tuple(mlm_logits.shape[:2])}: labels per masked slot (B, P) go with masked_positions, "
                    "labels per token (B, T) without"
                )
            out.mlm_loss = mlm_loss(mlm_logits, masked_labels)
            out.loss = out.mlm_loss
        if sentence_order_label is not None:
            out.sop_loss = sop_loss(sop_logits, sentence_order_label)
            out.loss = out.sop_loss if out.loss is None else out.loss + out.sop_loss
        return out
