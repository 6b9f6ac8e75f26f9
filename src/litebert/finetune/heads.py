"""Task heads on the shared ALBERT backbone, and `FinetuneModel` (backbone + one head).

Every head takes the backbone and a batch and returns a dict of outputs (plus "loss" when the batch has
targets), so heads that run the backbone differently (several options per example, two sentences per pair)
need nothing special from the training loop. Shapes follow the official ALBERT fine-tuning code:
classification reads the pooled [CLS] state through dropout (run_classifier.py), span QA scores every token
as a start and an end (the BERT-style SQuAD head), multiple choice scores each option's pooled state with one
unit and normalises over the options (run_race.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from litebert.model.albert import Albert, init_weights
from litebert.model.config import ModelConfig

IGNORE = -100


def encode(backbone: Albert, batch: dict[str, torch.Tensor], prefix: str = "") -> tuple[torch.Tensor, ...]:
    return backbone(batch[f"{prefix}input_ids"], batch[f"{prefix}attention_mask"], batch[f"{prefix}token_type_ids"])


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of the token states where mask is 1 ([CLS]/[SEP] included, as Sentence-BERT's MEAN)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)  # (B, H)


POOLINGS = ("cls", "mean")
POOLED_HEADS = ("sequence", "choice")  # the heads that read one pooled state per sequence


def _check_pooling(pooling: str) -> str:
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    return pooling


class SequenceHead(nn.Module):
    """Pooled state -> dropout -> Linear: classification (cross-entropy) or, with one output, regression (MSE).
    pooling "cls" is the official [CLS] pooler (dense + tanh, pretrained by SOP); "mean" averages the token
    states (mean_pool), which does not lean on a pooler pretrained for another objective."""

    def __init__(self, config: ModelConfig, num_outputs: int, pooling: str = "cls"):
        super().__init__()
        self.pooling = _check_pooling(pooling)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.out = nn.Linear(config.hidden_size, num_outputs)

    def forward(self, backbone: Albert, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        hidden, pooled = encode(backbone, batch)
        if self.pooling == "mean":
            pooled = mean_pool(hidden, batch["attention_mask"])
        logits = self.out(self.dropout(pooled))  # (B, num_outputs)
        out = {"logits": logits}
        if "labels" in batch:
            if logits.shape[-1] == 1:
                out["loss"] = F.mse_loss(logits.squeeze(-1).float(), batch["labels"].float())
            else:
                out["loss"] = F.cross_entropy(logits.float(), batch["labels"])
        return out


class TokenHead(nn.Module):
    """Every token state -> dropout -> Linear over the tags; -100 targets (later pieces, padding) ignored."""

    def __init__(self, config: ModelConfig, num_outputs: int):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.out = nn.Linear(config.hidden_size, num_outputs)

    def forward(self, backbone: Albert, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        hidden, _ = encode(backbone, batch)
        logits = self.out(self.dropout(hidden))  # (B, T, num_labels)
        out = {"logits": logits}
        if "labels" in batch:  # the mean over tagged tokens; 0 for a batch without any (all cut by truncation)
            labels = batch["labels"].flatten()
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels, ignore_index=IGNORE, reduction="sum")
            out["loss"] = loss / (labels != IGNORE).sum().clamp(min=1)
        return out


class SpanHead(nn.Module):
    """Linear(H, 2) on every token: start and end logits; position 0 ([CLS]) stands for "no answer"."""

    def __init__(self, config: ModelConfig, num_outputs: int = 2):
        super().__init__()
        self.out = nn.Linear(config.hidden_size, 2)

    def forward(self, backbone: Albert, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        hidden, _ = encode(backbone, batch)
        logits = self.out(hidden).float()  # (B, T, 2)
        # Padding can never be a start or an end.
        logits = logits.masked_fill(batch["attention_mask"].unsqueeze(-1) == 0, -1e4)
        start, end = logits.unbind(-1)  # (B, T) each
        out = {"start_logits": start, "end_logits": end}
        if "start_positions" in batch:
            out["loss"] = (
                F.cross_entropy(start, batch["start_positions"]) + F.cross_entropy(end, batch["end_positions"])
            ) / 2
        return out


class ChoiceHead(nn.Module):
    """Each option's pooled state ([CLS] pooler or mean, as SequenceHead) -> dropout -> Linear(H, 1);
    softmax over the options of an example."""

    def __init__(self, config: ModelConfig, num_outputs: int = 1, pooling: str = "cls"):
        super().__init__()
        self.pooling = _check_pooling(pooling)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.out = nn.Linear(config.hidden_size, 1)

    def forward(self, backbone: Albert, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        b, c, t = batch["input_ids"].shape
        flat = {k: batch[k].reshape(b * c, t) for k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden, pooled = encode(backbone, flat)  # (B*C, T, H), (B*C, H)
        if self.pooling == "mean":
            pooled = mean_pool(hidden, flat["attention_mask"])
        logits = self.out(self.dropout(pooled)).view(b, c)  # (B, C)
        out = {"logits": logits}
        if "labels" in batch:
            out["loss"] = F.cross_entropy(logits.float(), batch["labels"])
        return out


class PairEmbeddingHead(nn.Module):
    """Bi-encoder: mean-pool each sentence. One output: cosine similarity, MSE to the target score
    (CosineSimilarityLoss); k outputs: Linear(3H, k) on (u, v, |u - v|), cross-entropy (Sentence-BERT's
    softmax objective for labelled pairs)."""

    def __init__(self, config: ModelConfig, num_outputs: int = 1):
        super().__init__()
        self.classifier = nn.Linear(3 * config.hidden_size, num_outputs) if num_outputs > 1 else None

    def forward(self, backbone: Albert, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        u = mean_pool(encode(backbone, batch)[0], batch["attention_mask"])
        v = mean_pool(encode(backbone, batch, "b_")[0], batch["b_attention_mask"])
        cos = F.cosine_similarity(u.float(), v.float(), dim=-1)  # (B,)
        out = {"cosine": cos}
        if self.classifier is not None:
            out["logits"] = self.classifier(torch.cat([u, v, (u - v).abs()], dim=-1))  # (B, k)
        if "labels" in batch:
            if self.classifier is None:
                out["loss"] = F.mse_loss(cos, batch["labels"].float())
            else:
                out["loss"] = F.cross_entropy(out["logits"].float(), batch["labels"])
        return out


HEADS: dict[str, type[nn.Module]] = {
    "sequence": SequenceHead,
    "token": TokenHead,
    "span": SpanHead,
    "choice": ChoiceHead,
    "pair-embedding": PairEmbeddingHead,
}


def build_head(kind: str, config: ModelConfig, num_outputs: int, pooling: str = "cls") -> nn.Module:
    """A freshly initialised head; `pooling` applies to the POOLED_HEADS (classification, regression,
    multiple choice) and must stay "cls" for the others, which read every token or always mean-pool."""
    if kind not in HEADS:
        raise ValueError(f"unknown head {kind!r}; choose one of {sorted(HEADS)}")
    if kind in POOLED_HEADS:
        head = HEADS[kind](config, num_outputs, pooling)
    elif pooling != "cls":
        raise ValueError(f"pooling {pooling!r} applies to the {POOLED_HEADS} heads, not to {kind!r}")
    else:
        head = HEADS[kind](config, num_outputs)
    init_weights(head, config.initializer_range)
    return head


class FinetuneModel(nn.Module):
    """A pretrained model (its `.albert` backbone is fine-tuned; MLM/SOP heads are kept for saving) + a head."""

    def __init__(self, pretrained: nn.Module, head: nn.Module):
        super().__init__()
        self.pretrained = pretrained
        self.head = head

    @property
    def backbone(self) -> Albert:
        return self.pretrained.albert

    def trainable(self) -> nn.Module:
        """The modules fine-tuning updates: backbone and head (not the unused pretraining heads)."""
        return nn.ModuleDict({"albert": self.backbone, "head": self.head})

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The head's outputs for a batch of tensors (moved to the model's device: Tokenizer.batch makes them
        on the CPU)."""
        device = self.backbone.embeddings.word_embeddings.weight.device
        return self.head(self.backbone, {k: v.to(device) for k, v in batch.items()})
