"""How far each layer moves a token: the L2 distance and cosine similarity between every layer's input and output
embeddings (the paper's Figure 2, "smoother" layer transitions with cross-layer sharing).

For layer l (1..L), over the real (non-padding) tokens: the mean of ||h_l - h_{l-1}||_2 and of
cos(h_l, h_{l-1}), where h_0 is the embedding output (projected to H when E != H) and h_l the output of the l-th
block applied (with sharing, the same parameters at every layer). The paper reports BERT-large's distances and
similarities oscillating across layers and ALBERT-large's changing smoothly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from litebert.model.albert import Albert


@dataclass
class LayerTransitions:
    """Per-layer sums over tokens (float64), so batches add up: ``a + b`` pools their tokens."""

    l2_sum: torch.Tensor  # (L,)
    cosine_sum: torch.Tensor  # (L,)
    tokens: int

    def __add__(self, other: LayerTransitions) -> LayerTransitions:
        return LayerTransitions(
            self.l2_sum + other.l2_sum, self.cosine_sum + other.cosine_sum, self.tokens + other.tokens
        )

    def means(self) -> dict[str, list[float]]:
        """{"l2": mean distance per layer, "cosine": mean cosine similarity per layer} (layer 1 first)."""
        if self.tokens == 0:
            raise ValueError("no real tokens were measured (every attention_mask entry is 0)")
        return {"l2": (self.l2_sum / self.tokens).tolist(), "cosine": (self.cosine_sum / self.tokens).tolist()}


@torch.no_grad()
def layer_transitions(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> LayerTransitions:
    """The sums of one padded batch (B, T) over its real tokens; ``model`` is an Albert or holds one as
    ``.albert`` and is run in eval mode (no dropout), in float32, its mode left as it was."""
    backbone: Albert = getattr(model, "albert", model)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    real = attention_mask.bool()  # (B, T)
    was_training = backbone.training
    backbone.eval()
    try:
        x = backbone.embeddings(input_ids, token_type_ids)  # (B, T, H)
        states = backbone.encoder(x, real[:, None, None, :], return_all=True)  # L + 1 of (B, T, H)
    finally:
        backbone.train(was_training)
    tokens = [s[real].double() for s in states]  # (N, H) each: padding left out
    l2 = torch.stack([(b - a).norm(dim=-1).sum() for a, b in zip(tokens, tokens[1:], strict=False)])
    cosine = torch.stack([F.cosine_similarity(a, b, dim=-1).sum() for a, b in zip(tokens, tokens[1:], strict=False)])
    return LayerTransitions(l2.cpu(), cosine.cpu(), int(real.sum()))
