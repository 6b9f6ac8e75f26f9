"""Padding found on the host, and removed: where a padded batch's real tokens are (RealTokens, found from its mask
by `find_real_tokens` on the CPU, before the step), and the gather and scatter that let dense layers skip the
padding (Unpadded). The encoder (albert.py) unpads with them; a training loop builds RealTokens with the batch."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F


@dataclass
class RealTokens:
    """Where the real tokens of a padded batch are, found from its mask on the host (`find_real_tokens`).

    The model unpads with it instead of reading the mask itself: on a GPU that read is a host synchronisation
    (the number of real tokens sizes the tensors that follow), and under torch.compile a data-dependent branch. A
    training loop builds it with the batch, on the CPU, before the step needs it.
    """

    index: torch.Tensor  # (N,) flat positions (row * T + column) of the tokens computed, row by row
    cu_seqlens: torch.Tensor  # (B + 1,) int32: row b's computed tokens are index[cu_seqlens[b] : cu_seqlens[b + 1]]
    max_seqlen: int  # the most tokens any row computes
    pad0: bool  # some row computes its padded position 0, as a query only (see Albert.forward)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> RealTokens:
        index, cu = (t.to(device, non_blocking=non_blocking) for t in (self.index, self.cu_seqlens))
        return replace(self, index=index, cu_seqlens=cu)


def find_real_tokens(attention_mask: torch.Tensor) -> RealTokens | None:
    """The RealTokens of a (B, T) mask (1 = real token) on the CPU, or None when every position is real."""
    real = attention_mask.bool()
    if bool(real.all()):
        return None
    # The pooler reads position 0 even where it is padding (left padding): it is computed there too, as a query
    # only that no real token attends to, so the pooled output is the one a padded model gives (rows without any
    # real token stay zeros).
    pad0 = ~real[:, 0] & real.any(1)  # (B,)
    computed = real | F.pad(pad0[:, None], (0, real.shape[1] - 1))
    counts = computed.sum(1)
    return RealTokens(
        index=computed.reshape(-1).nonzero().squeeze(1),
        cu_seqlens=F.pad(counts.cumsum(0), (1, 0)).to(torch.int32),
        max_seqlen=int(counts.max()),
        pad0=bool(pad0.any()),
    )


class Unpadded:
    """The real (non-padding) tokens of a padded batch, so dense layers skip the padding.

    Linear layers, LayerNorms and the FFN see only the N real tokens (N, C); attention scatters them back to
    the (B, T) grid it needs, or (on a GPU) runs FlashAttention's variable-length kernel on them as they are.
    Padded positions come back as zeros: they carry no meaning in any model. With `rows` > N the unpadded tensors
    carry that many rows, the extra ones copies of the first real token that `pad` leaves out (FusedDense.rows: so
    that oneDNN sees shapes it has seen before).
    """

    def __init__(self, attention_mask: torch.Tensor, rows: int | None = None):
        self._locate(attention_mask.shape, attention_mask.reshape(-1).nonzero().squeeze(1), rows)
        self.cu_seqlens, self.max_seqlen = None, 0

    @classmethod
    def of(cls, real: RealTokens, shape: torch.Size, rows: int | None = None) -> Unpadded:
        """The unpadding `real` describes, for a batch of `shape` (B, T)."""
        unpad = cls.__new__(cls)
        unpad._locate(shape, real.index, rows)
        # Packed attention needs the same tokens as queries and keys: a padded position 0 is a query only.
        unpad.cu_seqlens, unpad.max_seqlen = (None, 0) if real.pad0 else (real.cu_seqlens, real.max_seqlen)
        return unpad

    def _locate(self, shape: torch.Size, index: torch.Tensor, rows: int | None) -> None:
        self.batch, self.length = shape
        self.index = index  # (N,) flat positions of real tokens
        self.gather = self.index
        if rows is not None and rows > len(self.index) > 0:
            self.gather = F.pad(self.index, (0, rows - len(self.index)), value=int(self.index[0]))  # (rows,)

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.batch * self.length, -1).index_select(0, self.gather)  # (N, C)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        full = x.new_zeros(self.batch * self.length, x.shape[-1])
        full.index_copy_(0, self.index, x[: len(self.index)])  # in place: index_copy would clone the grid
        return full.view(self.batch, self.length, -1)  # (B, T, C)
