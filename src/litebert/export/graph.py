"""The ONNX graph of a litebert model: the backbone alone or with a fine-tuning head, traced through the padded-grid
forward (no host reads, no data-dependent shapes), with dynamic batch and sequence axes.

The trace runs litebert's own modules, so a shared layer is one set of parameters however many layers apply it,
and the exporter writes each parameter once as an initializer. The head is the fine-tuned model's own module, called
with a backbone that computes every position (`GridBackbone`): the outputs are the model's, padding aside.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from litebert.model.albert import Albert

# The opset the graphs are written in: LayerNormalization is an operator from 17 on (one node instead of seven).
OPSET = 17
MIN_OPSET = 14  # scaled_dot_product_attention and Trilu, which the exporter needs, are not in older opsets


@dataclass(frozen=True)
class Signature:
    """The graph's inputs and outputs, by name, and which of their axes are dynamic."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    axes: dict[str, dict[int, str]]


BATCH, SEQUENCE = {0: "batch_size"}, {0: "batch_size", 1: "sequence_length"}
CHOICES = {0: "batch_size", 1: "num_choices", 2: "sequence_length"}  # (batch, choices, length), as transformers'
TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

# head kind -> its outputs and their dynamic axes, under the names transformers' own ONNX exports use, so that
# transformers.js and Optimum read a bundle as they read theirs.
OUTPUTS: dict[str, dict[str, dict[int, str]]] = {
    "backbone": {"last_hidden_state": SEQUENCE, "pooler_output": BATCH},
    "sequence": {"logits": BATCH},
    "token": {"logits": SEQUENCE},
    "span": {"start_logits": SEQUENCE, "end_logits": SEQUENCE},
    "choice": {"logits": {0: "batch_size", 1: "num_choices"}},
    "pair-embedding": {"cosine": BATCH, "logits": BATCH},  # the bi-encoder: both sentences in, their cosine out
}


def signature(kind: str) -> Signature:
    """The graph's inputs and outputs for a head kind ("backbone": the encoder alone)."""
    if kind not in OUTPUTS:
        raise ValueError(f"no ONNX signature for head kind {kind!r}; known: {sorted(OUTPUTS)}")
    inputs = (*TOKEN_INPUTS, *(f"b_{name}" for name in TOKEN_INPUTS)) if kind == "pair-embedding" else TOKEN_INPUTS
    axes = {**dict.fromkeys(inputs, CHOICES if kind == "choice" else SEQUENCE), **OUTPUTS[kind]}
    # the second sentence of a pair has a length of its own
    axes.update(dict.fromkeys(inputs[3:], {0: "batch_size", 1: "b_sequence_length"}))
    return Signature(inputs, tuple(OUTPUTS[kind]), axes)


class GridBackbone(nn.Module):
    """The backbone as a head calls it, every position computed and padded keys masked (Albert._padded_grid): the
    unpadded CPU path reads the mask on the host, which a trace would freeze into the graph."""

    def __init__(self, albert: Albert):
        super().__init__()
        self.albert = albert

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.albert._padded_grid(input_ids, token_type_ids, attention_mask.bool())


class Exported(nn.Module):
    """What the graph computes: int64 token inputs in, the head's (or the backbone's) outputs out, in Signature
    order."""

    def __init__(self, albert: Albert, head: nn.Module | None, kind: str):
        super().__init__()
        self.backbone = GridBackbone(albert)
        self.head = head
        self.kind = kind
        self.signature = signature(kind)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        batch = dict(zip(self.signature.inputs, tensors, strict=True))
        if self.head is None:
            return self.backbone(*(batch[name] for name in TOKEN_INPUTS))
        out = self.head(self.backbone, batch)
        if self.kind == "pair-embedding" and "logits" not in out:  # a regression bi-encoder: its cosine alone
            out["logits"] = out["cosine"][:, None]
        return tuple(out[name] for name in self.signature.outputs)

    def reference(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The same outputs from litebert's own forward (its unpadded CPU path, as `litebert predict` runs it)."""
        batch = dict(zip(self.signature.inputs, tensors, strict=True))
        albert = self.backbone.albert
        if self.head is None:
            return albert(*(batch[name] for name in TOKEN_INPUTS))
        out = self.head(albert, batch)
        if self.kind == "pair-embedding" and "logits" not in out:
            out["logits"] = out["cosine"][:, None]
        return tuple(out[name] for name in self.signature.outputs)


def example_inputs(kind: str, vocab_size: int, length: int = 7, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Token inputs to trace with: two rows, the second padded (so the mask's path is the one traced)."""
    shape = (batch, 3, length) if kind == "choice" else (batch, length)
    ids = torch.randint(5, vocab_size, shape, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(shape, dtype=torch.long)
    mask[1, ..., length // 2 :] = 0
    types = torch.zeros(shape, dtype=torch.long)
    types[..., length // 3 :] = 1
    tensors = (ids, mask, types)
    return tensors * 2 if kind == "pair-embedding" else tensors


def to_onnx(module: Exported, vocab_size: int, opset: int = OPSET) -> bytes:
    """The serialised ONNX model of `module` (weights inside the file: litebert's models are far below 2 GB)."""
    module = module.eval()
    sig = module.signature
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        # The trace reads the example's token-id range once (litebert.model.albert.check_ids): a check of these
        # inputs, not part of the graph, which the tracer warns about.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module,
            example_inputs(module.kind, vocab_size),
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=list(sig.inputs),
            output_names=list(sig.outputs),
            dynamic_axes=sig.axes,
            do_constant_folding=True,
        )
    return buffer.getvalue()
