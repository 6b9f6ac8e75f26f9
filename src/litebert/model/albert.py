"""The ALBERT encoder: factorized embeddings, post-LN Transformer blocks with cross-layer sharing, pooler.

Reads top to bottom, parts before the whole. Nothing about training, parallelism or Hugging Face lives here
(pretraining heads are in heads.py, the activation, dropout and fused CPU kernels it calls in kernels.py, the
transformers name map in litebert.hf).
Shapes: B batch, T sequence length, E embedding size, H hidden size, N heads, D head size (H / N).
"""

from __future__ import annotations

import math
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from litebert.model import compat
from litebert.model.config import ModelConfig
from litebert.model.kernels import Dropout, FusedDense, activation, dropout
from litebert.model.padding import RealTokens, Unpadded, find_real_tokens


def on_host(t: torch.Tensor) -> bool:
    """Whether reading `t`'s values costs nothing: an eager CPU tensor. On a GPU a read waits for every queued
    kernel (a host synchronisation); inside torch.compile it would break the graph."""
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def host_range(t: torch.Tensor) -> tuple[int, int]:
    """(min, max) of a CPU integer tensor, read from its memory (the tensor is on the host: no device to wait for)."""
    values = t.detach().numpy()
    return int(values.min()), int(values.max())


def check_ids(input_ids: torch.Tensor, token_type_ids: torch.Tensor, config: ModelConfig) -> None:
    """A clear error for input the embedding lookups would reject with a bare IndexError. Id ranges are
    checked on CPU only: on a GPU (and inside torch.compile) reading them back would stall the step."""
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
    if input_ids.shape[1] == 0:
        raise ValueError(f"input_ids of shape {tuple(input_ids.shape)} hold no tokens: a sequence needs at least [CLS]")
    if input_ids.shape[1] > config.max_position:
        raise ValueError(f"sequence length {input_ids.shape[1]} exceeds the model's max_position {config.max_position}")
    if not on_host(input_ids) or not input_ids.numel():
        return
    for name, ids, size in (
        ("input_ids", input_ids, config.vocab_size),
        ("token_type_ids", token_type_ids, config.type_vocab_size),
    ):
        low, high = host_range(ids)
        if low < 0 or high >= size:
            raise ValueError(f"{name} hold {low if low < 0 else high}, outside [0, {size})")


class Embeddings(nn.Module):
    """Word (V x E) + position (P x E) + token type (2 x E) -> LayerNorm -> dropout -> Linear E -> H.

    Factorisation (paper section 3.1): V x E + E x H parameters instead of V x H. Without a projection
    (E == H, the BERT baseline as the official code builds it) the output stays in E.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        E = config.embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, E)
        self.position_embeddings = nn.Embedding(config.max_position, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout)
        self.projection = nn.Linear(E, config.hidden_size) if config.has_projection else None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        unpad: Unpadded | None = None,
        fused: FusedDense | None = None,
    ) -> torch.Tensor:
        check_ids(input_ids, token_type_ids, self.config)
        T = input_ids.shape[1]
        positions = torch.arange(T, device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = x + self.token_type_embeddings(token_type_ids)  # (B, T, E)
        x = self.dropout(self.norm(x))
        if unpad is not None:
            x = unpad.unpad(x)  # (N, E): the projection skips padding too
        if self.projection is not None:
            x = fused(self.projection, x) if fused else self.projection(x)  # (B, T, H) or (N, H)
        return x


# On CPU, torch's fused attention kernel is slower than the explicit product for short sequences, its backward
# above all (bf16 up to T = 256: docs/log.md at `12bc363`), so there the scores are materialised as long as they
# stay small; longer sequences, and every GPU, use the fused kernel. With attention dropout the CPU has no fused
# kernel at all: SDPA falls back to its own explicit product, which materialises the same scores and draws
# Bernoulli masks, so the explicit path with `keep_mask` is used at every length (as fast at T = 512 with padding,
# faster elsewhere in fp32: docs/log.md at `c47038e`). In fp32 the explicit forward + backward is faster up to
# T = 128, a forward alone (inference) only up to T = 64 (docs/log.md at `2bd06ba`; python
# benchmarks/attention.py --dropout 0.1, --dtype float32 and --forward measure each case).
EXPLICIT_MAX_LENGTH = {torch.float32: 128, torch.float64: 128}  # other dtypes (bf16, fp16): 256
EXPLICIT_MAX_LENGTH_FORWARD = {torch.float32: 64, torch.float64: 64}  # without a backward pass
EXPLICIT_MAX_SCORES = 1 << 25  # B * N * T * T elements kept for the backward pass


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
) -> torch.Tensor:
    """softmax(Q K^T / sqrt(D) + mask) V for (B, N, T, D) inputs; `mask` is a boolean (B, 1, 1, T) or None."""
    length = q.shape[2]
    longest = EXPLICIT_MAX_LENGTH if torch.is_grad_enabled() and q.requires_grad else EXPLICIT_MAX_LENGTH_FORWARD
    short = length <= longest.get(q.dtype, 256) and q.shape[:2].numel() * length**2 <= EXPLICIT_MAX_SCORES
    if q.device.type != "cpu" or not (short or dropout_p > 0):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    # The softmax runs in the scores' dtype: torch's CPU kernel accumulates bf16/fp16 in fp32 anyway, and the fp32
    # copy of the scores and its cast back cost more than the softmax (python benchmarks/attention.py --softmax;
    # docs/log.md at `e333630`). Scaled and masked in place (the product's backward needs only q and k), the mask as
    # an added 0 / -inf bias: torch's broadcast masked_fill is several times slower than a broadcast add on CPU,
    # forward and backward (python benchmarks/attention.py --inplace; docs/log.md at `2bd06ba`).
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5)  # (B, N, T, T)
    if mask is not None:
        scores.add_(torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device).masked_fill_(~mask, -math.inf))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(dropout(probs, dropout_p), v)


def packs(qkv: torch.Tensor, unpad: Unpadded | None, num_heads: int, dropout_p: float) -> bool:
    """Whether attention can run on the unpadded tokens as they are (`attend_packed`): a GPU with FlashAttention
    (compute capability 8.0 on), bf16 or fp16, no attention dropout (the kernel has none), head size a multiple of
    8 up to 256, and every computed token a key as well as a query."""
    if unpad is None or unpad.cu_seqlens is None or dropout_p > 0 or not qkv.is_cuda:
        return False
    if compat.varlen_attn() is None:  # FlashAttention's variable-length kernel (torch 2.9 on), imported here
        return False
    head = qkv.shape[-1] // 3 // num_heads
    return qkv.dtype in (torch.bfloat16, torch.float16) and head % 8 == 0 and head <= 256 and _flash(qkv.device)


@cache
def _flash(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) >= (8, 0)


def attend_packed(qkv: torch.Tensor, unpad: Unpadded, num_heads: int) -> torch.Tensor:
    """softmax(Q K^T / sqrt(D)) V within each row, on the (N, 3H) projections of the real tokens only: no padded
    query, key or score is computed, and nothing is scattered to the (B, T) grid and back."""
    n, h3 = qkv.shape
    q, k, v = qkv.view(n, 3, num_heads, h3 // 3 // num_heads).unbind(1)  # (N, heads, D) each
    cu, longest = unpad.cu_seqlens, unpad.max_seqlen
    return compat.varlen_attn()(q, k, v, cu, cu, longest, longest).reshape(n, h3 // 3)  # (N, H)


class Attention(nn.Module):
    """Multi-head self-attention with a fused QKV projection, residual and post-LayerNorm.

    x = LN(x + Dropout(Dense(SDPA(Q, K, V)))) as in BERT/ALBERT. The padding mask is a boolean (B, 1, 1, T)
    with True where a key may be attended to.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        H = config.hidden_size
        self.num_heads = config.num_heads
        self.qkv = nn.Linear(H, 3 * H)  # one matmul instead of three; split per head below
        self.out = nn.Linear(H, H)
        self.norm = nn.LayerNorm(H, eps=config.layer_norm_eps)
        self.attention_dropout = config.attention_dropout
        self.dropout = Dropout(config.hidden_dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        unpad: Unpadded | None = None,
        fused: FusedDense | None = None,
    ) -> torch.Tensor:
        qkv = fused(self.qkv, x) if fused else self.qkv(x)  # (B, T, 3H), or (N, 3H) when unpadded
        p = self.attention_dropout if self.training else 0.0
        if packs(qkv, unpad, self.num_heads, p):
            y = attend_packed(qkv, unpad, self.num_heads)  # (N, H)
        else:
            y = self._attend(qkv, mask, unpad, p)
        if fused:
            return self.norm(fused(self.out, y, residual=x))
        return self.norm(x + self.dropout(self.out(y)))

    def _attend(self, qkv: torch.Tensor, mask: torch.Tensor | None, unpad: Unpadded | None, p: float) -> torch.Tensor:
        if unpad is not None:
            qkv = unpad.pad(qkv)  # attention itself needs the (B, T) grid
        B, T, H3 = qkv.shape
        H = H3 // 3
        q, k, v = qkv.view(B, T, 3, self.num_heads, H // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = attend(q, k, v, mask, p)  # (B, N, T, D)
        y = y.transpose(1, 2).reshape(B, T, H)
        return unpad.unpad(y) if unpad is not None else y  # (N, H) or (B, T, H)


class FeedForward(nn.Module):
    """Linear(H, 4H) -> GELU -> Linear(4H, H), residual and post-LayerNorm."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.act = config.hidden_act
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout)

    def forward(self, x: torch.Tensor, fused: FusedDense | None = None) -> torch.Tensor:
        if fused:
            return self.norm(fused(self.down, fused(self.up, x, act=self.act), residual=x))
        return self.norm(x + self.dropout(self.down(activation(self.act, self.up(x)))))


def layer_groups(num_layers: int, num_groups: int, rule: str = "transformers") -> list[int]:
    """The parameter group of each layer: transformers' int(i / (L / G)) (AlbertTransformer), or the official
    modeling.py's int(i / L * G) (rule "official"). Both mean i * G // L, and float rounding moves one or the
    other off it for 24 shapes up to 48 layers, 36 layers in all (L = G = 22: the official code runs group 14
    at layers 14 and 15 and never uses group 15; transformers runs group 15 there). Each must be read with its
    own rule to compute what it was trained to compute (ModelConfig.group_rule)."""
    L, G = num_layers, num_groups
    if rule == "official":
        return [int(i / L * G) for i in range(L)]
    return [int(i / (L / G)) for i in range(L)]


def layer_schedule(config: ModelConfig) -> list[tuple[int, int]]:
    """For every block applied in depth order, the index of the attention and of the FFN parameters it uses.

    With sharing "all", layer i uses group `layer_groups` gives it (by ModelConfig.group_rule: transformers'
    expression, or the official one) and runs that group's `inner_group_num` blocks in turn, so a group's blocks
    are numbered g * inner + j. "attention" and "ffn" share one module of that kind across all layers and give
    every layer its own other half (the paper's Table 5); "none" gives every layer its own block (BERT).
    """
    L, G, inner = config.num_layers, config.num_hidden_groups, config.inner_group_num
    if config.sharing == "all":
        groups = layer_groups(L, G, config.group_rule)
        return [(g * inner + j, g * inner + j) for g in groups for j in range(inner)]
    if config.sharing == "attention":
        return [(0, i) for i in range(L)]
    if config.sharing == "ffn":
        return [(i, 0) for i in range(L)]
    return [(i, i) for i in range(L)]


class Encoder(nn.Module):
    """The stack of blocks, each block drawing its attention and FFN from the shared parameter lists."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.schedule = layer_schedule(config)
        num_attention = 1 + max(a for a, _ in self.schedule)
        num_ffn = 1 + max(f for _, f in self.schedule)
        self.attentions = nn.ModuleList(Attention(config) for _ in range(num_attention))
        self.ffns = nn.ModuleList(FeedForward(config) for _ in range(num_ffn))
        # Recompute activations in backward to save memory; each application is checkpointed on its own,
        # so shared parameters simply accumulate gradient from every layer that used them.
        self.gradient_checkpointing = False

    def _block(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        unpad: Unpadded | None,
        a: int,
        f: int,
        fused: FusedDense | None = None,
    ) -> torch.Tensor:
        return self.ffns[f](self.attentions[a](x, mask, unpad, fused), fused)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        unpad: Unpadded | None = None,
        fused: FusedDense | None = None,
        *,
        return_all: bool = False,
    ) -> torch.Tensor | list[torch.Tensor]:
        states = [x]
        for a, f in self.schedule:
            if self.gradient_checkpointing and self.training:  # training: never fused
                x = checkpoint(self._block, x, mask, unpad, a, f, use_reentrant=False)
            else:
                x = self._block(x, mask, unpad, a, f, fused)
            states.append(x)
        return states if return_all else x


class Albert(nn.Module):
    """The backbone: embeddings -> encoder -> (last hidden state, tanh-pooled [CLS] state)."""

    def __init__(self, config: ModelConfig, *, init: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        if init:  # the official initialisation (AlbertForPretraining applies it once to backbone and heads)
            init_weights(self, config.initializer_range)
        if torch.cuda.is_available():  # looked up here, not while torch.compile traces the first GPU forward
            compat.varlen_attn()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        real_tokens: RealTokens | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`real_tokens`: the mask's RealTokens found on the host (`find_real_tokens`), so that a GPU forward
        unpads without reading the mask back; a CPU forward finds them itself."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
            if t is not None and t.shape != input_ids.shape:
                raise ValueError(f"{name} of shape {tuple(t.shape)} must match input_ids' {tuple(input_ids.shape)}")
        if real_tokens is not None and attention_mask is None:
            raise ValueError("real_tokens describe an attention_mask: pass the mask they were found in")
        # Inference on CPU runs each dense layer as one fused oneDNN or MKL call (kernels.py); training runs eager
        # torch.
        fused = FusedDense.for_forward(self.embeddings.word_embeddings.weight, self.training)
        if real_tokens is None and attention_mask is not None and on_host(attention_mask):
            real_tokens = find_real_tokens(attention_mask)
            if real_tokens is None:  # no padding
                attention_mask = None
        if attention_mask is None:
            x = self.embeddings(input_ids, token_type_ids, fused=fused)  # (B, T, H)
            x = self.encoder(x, None, fused=fused)  # (B, T, H)
            return x, torch.tanh(self.pooler(x[:, 0]))  # (B, T, H), (B, H)
        if real_tokens is None:  # a GPU or torch.compile, without the host's RealTokens
            return self._padded_grid(input_ids, token_type_ids, attention_mask.bool())
        # Padding: run the dense layers on real tokens only (often half the work on real sentences).
        real = attention_mask.bool()
        rows = fused.rows(len(real_tokens.index)) if fused else None
        unpad = Unpadded.of(real_tokens, real.shape, rows)
        x = self.embeddings(input_ids, token_type_ids, unpad, fused)  # (N, H)
        x = unpad.pad(self.encoder(x, real[:, None, None, :], unpad, fused))  # (B, T, H)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, H)
        if real_tokens.pad0:
            x = x.masked_fill(~real[..., None], 0.0)  # zeros at every padded position, position 0 included
        return x, pooled

    def _padded_grid(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, real: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every position computed, padded keys masked: what the unpadded path gives without knowing on the host
        where the real tokens are (no read of the mask, no data-dependent shape), at the cost of the padding's work."""
        any_real = real.any(1)  # (B,)
        attends = real | ~any_real[:, None]  # a row without real tokens attends to all (no NaN); zeroed below
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, H)
        x = self.encoder(x, attends[:, None, None, :])  # (B, T, H)
        pooled = torch.tanh(self.pooler(x[:, 0].masked_fill(~any_real[:, None], 0.0)))  # (B, H)
        return x.masked_fill(~real[..., None], 0.0), pooled


@torch.no_grad()
def init_weights(module: nn.Module, std: float) -> None:
    """Truncated normal (std, cut at 2 std) for every weight matrix and embedding, as the official code
    (modeling.create_initializer); zero biases; LayerNorm to identity."""
    for m in module.modules():
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
