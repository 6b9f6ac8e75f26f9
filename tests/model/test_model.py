"""The model's behaviour: shapes, masked-only MLM, loss definition, sharing, padding, init, config validation."""

from __future__ import annotations

import pytest
import torch

import litebert
from litebert.model import albert as model_module
from litebert.model.albert import attend, layer_schedule
from litebert.model.heads import mlm_loss
from litebert.model.kernels import SFC64_MIN_WORDS, dropout, random_words

CFG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64)


def _model(**kw) -> litebert.AlbertForPretraining:
    torch.manual_seed(0)
    return litebert.AlbertForPretraining(litebert.ModelConfig(**{**CFG, **kw})).eval()


def _ids(b=2, t=10, seed=0):
    return torch.randint(5, CFG["vocab_size"], (b, t), generator=torch.Generator().manual_seed(seed))


def test_output_shapes():
    out = _model()(_ids())
    assert out.last_hidden_state.shape == (2, 10, 32)
    assert out.pooled.shape == (2, 32)
    assert out.mlm_logits.shape == (2, 10, 97)
    assert out.sop_logits.shape == (2, 2)
    assert out.loss is None


def test_masked_positions_give_the_same_logits_as_full():
    model, ids = _model(), _ids()
    positions = torch.tensor([[1, 4, 0], [2, 3, 9]])
    full = model(ids).mlm_logits
    part = model(ids, masked_positions=positions).mlm_logits
    assert part.shape == (2, 3, 97)
    torch.testing.assert_close(part, torch.stack([full[i, positions[i]] for i in range(2)]))


def test_loss_is_weighted_mlm_plus_sop():
    model, ids = _model(), _ids()
    positions = torch.tensor([[1, 4, 0], [2, 3, 9]])
    labels = torch.tensor([[7, 8, -100], [9, 10, 11]])
    sop = torch.tensor([0, 1])
    out = model(ids, masked_positions=positions, masked_labels=labels, sentence_order_label=sop)
    logits = out.mlm_logits
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 97), labels.reshape(-1).clamp(min=0), reduction="none")
    w = (labels.reshape(-1) != -100).float()
    expected_mlm = (ce * w).sum() / (w.sum() + 1e-5)  # official get_masked_lm_output
    torch.testing.assert_close(out.mlm_loss, expected_mlm)
    torch.testing.assert_close(out.sop_loss, torch.nn.functional.cross_entropy(out.sop_logits, sop))
    torch.testing.assert_close(out.loss, out.mlm_loss + out.sop_loss)


def test_no_pair_label_skips_sop_but_keeps_graph():
    model, ids = _model().train(), _ids()
    out = model(
        ids,
        masked_positions=torch.tensor([[1], [2]]),
        masked_labels=torch.tensor([[5], [6]]),
        sentence_order_label=torch.tensor([-100, -100]),
    )
    assert out.sop_loss.item() == 0.0
    out.loss.backward()
    assert model.sop_head.weight.grad is not None


def test_mlm_loss_all_padding_is_zero():
    assert mlm_loss(torch.randn(1, 2, 5), torch.tensor([[-100, -100]])).item() == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mlm_loss_in_chunks_equals_one_piece(monkeypatch, dtype):
    # Chunks of 2 rows of 97 logits (the last one shorter): the loss and the gradient are those of one piece
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(2, 5, 97, generator=g) * 4).to(dtype)
    labels = torch.randint(0, 97, (2, 5), generator=g)
    labels[1, 3:] = -100
    runs = []
    for chunk in (2 * 97 * 4, 1 << 30):
        monkeypatch.setattr(litebert.model.heads, "CE_CHUNK_BYTES", chunk)
        x = logits.clone().requires_grad_()
        loss = mlm_loss(x, labels)
        loss.backward()
        runs.append((loss, x.grad))
    (loss, grad), (ref_loss, ref_grad) = runs
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-6, atol=1e-7)
    assert loss.dtype == torch.float32 and grad.dtype == dtype and bool((grad[1, 3:] == 0).all())


def test_padding_does_not_change_real_positions():
    model, ids = _model(), _ids(b=1, t=6)
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(1, 6), torch.zeros(1, 4)], dim=1).long()
    a = model(ids).last_hidden_state
    b = model(padded, attention_mask=mask).last_hidden_state[:, :6]
    torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("length", [16, 100, 300])
def test_explicit_attention_matches_fused_kernel(monkeypatch, dtype, length):
    # Short CPU sequences take the explicit softmax(QK^T)V path, long ones torch's fused kernel: both paths must
    # give the same outputs and gradients, with and without a padding mask.
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 2, length, 8, generator=g).to(dtype) for _ in range(3))
    lengths = torch.tensor([length, length // 2, 1])
    mask = (torch.arange(length)[None] < lengths[:, None])[:, None, None, :]
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    for m in (None, mask):
        runs = []
        for limit in (0, 1 << 40):  # fused only, explicit whenever the length allows it
            monkeypatch.setattr(model_module, "EXPLICIT_MAX_SCORES", limit)
            monkeypatch.setattr(model_module, "EXPLICIT_MAX_LENGTH", {dtype: 1 << 20})
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            out = attend(*leaves, m, 0.0)
            out.float().square().sum().backward()
            runs.append([out, *(t.grad for t in leaves)])
        torch.testing.assert_close(runs[0][0].float(), runs[1][0].float(), **tol)
        for a, b in zip(runs[0][1:], runs[1][1:], strict=True):  # gradients: summed over the whole row
            torch.testing.assert_close(a.float(), b.float(), **{k: 10 * t for k, t in tol.items()})


def test_attention_dropout_on_cpu_takes_the_explicit_path_at_any_length(monkeypatch):
    # torch has no fused CPU attention with dropout (SDPA falls back to Bernoulli masks over its own explicit
    # product), so with dropout the explicit path runs, here beyond every length limit; without, the fused kernel.
    calls, fused = [], torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        model_module.F, "scaled_dot_product_attention", lambda *a, **kw: calls.append(1) or fused(*a, **kw)
    )
    monkeypatch.setattr(model_module, "EXPLICIT_MAX_SCORES", 0)
    q, k, v = (torch.randn(2, 2, 300, 8) for _ in range(3))
    out = attend(q, k, v, None, 0.5)
    assert calls == []
    # with uniform weights (Q = 0) and V the identity, the output is the keep-mask itself: 1 / (T (1 - p)) or 0
    eye = torch.eye(300).expand(2, 2, 300, 300)
    kept = attend(torch.zeros_like(q), k, eye, None, 0.5) * 300 * 0.5
    torch.testing.assert_close(kept, kept.round().clamp(0, 1), atol=1e-5, rtol=0)
    assert abs(kept.mean().item() - 0.5) < 0.01  # dropped at rate p
    assert attend(q, k, v, None, 0.0).shape == out.shape and calls == [1]


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_drops_at_rate_p_and_rescales(p):
    torch.manual_seed(0)
    x = torch.ones(1000, 257, requires_grad=True)  # an odd element count: the last random word is cut
    y = dropout(x, p)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.005
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # the gradient goes through the same mask and scale
    assert dropout(x, p, training=False) is x and dropout(x, 0.0) is x
    assert not torch.equal(dropout(x, p), dropout(x, p))  # a fresh mask every call


@pytest.mark.parametrize("count", [SFC64_MIN_WORDS - 1, SFC64_MIN_WORDS])  # torch's generator, then SFC64
def test_dropout_masks_are_fixed_by_torch_seed_and_fresh_each_call(count):
    torch.manual_seed(7)
    first, second = random_words(count), random_words(count)
    torch.manual_seed(7)
    assert torch.equal(random_words(count), first) and torch.equal(random_words(count), second)
    assert not torch.equal(first, second)
    slices = first.view(torch.int16).float()  # every 16-bit slice uniform on [-32768, 32767]
    assert abs(slices.mean().item()) < 600 and abs(slices.std().item() - 65536 / 12**0.5) < 300


def test_sharing_schedules():
    c = litebert.ModelConfig(**{**CFG, "num_layers": 4, "num_hidden_groups": 2, "inner_group_num": 2})
    assert layer_schedule(c) == [(0, 0), (1, 1), (0, 0), (1, 1), (2, 2), (3, 3), (2, 2), (3, 3)]
    assert layer_schedule(litebert.ModelConfig(**{**CFG, "sharing": "attention"})) == [(0, 0), (0, 1), (0, 2)]
    assert layer_schedule(litebert.ModelConfig(**{**CFG, "sharing": "ffn"})) == [(0, 0), (1, 0), (2, 0)]
    assert layer_schedule(litebert.ModelConfig(**{**CFG, "sharing": "none"})) == [(0, 0), (1, 1), (2, 2)]


def test_shared_layers_accumulate_gradient_with_checkpointing():
    model, ids = _model(), _ids()
    model.train()
    model.albert.encoder.gradient_checkpointing = True
    torch.manual_seed(1)
    model(ids).mlm_logits.sum().backward()
    with_ckpt = model.albert.encoder.attentions[0].qkv.weight.grad.clone()
    model.zero_grad()
    model.albert.encoder.gradient_checkpointing = False
    torch.manual_seed(1)
    model(ids).mlm_logits.sum().backward()
    torch.testing.assert_close(with_ckpt, model.albert.encoder.attentions[0].qkv.weight.grad)


def test_init_is_truncated_normal():
    model = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=5000))
    w = model.albert.embeddings.word_embeddings.weight
    assert w.abs().max() <= 0.04 + 1e-7
    assert 0.015 < w.std().item() < 0.02
    assert model.albert.pooler.bias.abs().sum() == 0
    assert torch.all(model.albert.encoder.ffns[0].norm.weight == 1)


def test_left_padding_pools_a_computed_position_0():
    model = _model()
    ids = _ids(b=3)
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # left padding
    mask[2, 6:] = 0  # right padding
    ids[mask == 0] = 0
    hidden, pooled = model.albert(ids, mask)
    assert hidden[mask == 0].abs().max() == 0  # padded positions are zeros, position 0 of row 1 included
    assert not torch.allclose(pooled[1], torch.tanh(model.albert.pooler.bias))  # ...but it was computed
    # row 1's position 0 is a query only: what stands there changes the pooled output, never a real token
    other = ids.clone()
    other[1, 0] = 7
    hidden2, pooled2 = model.albert(other, mask)
    torch.testing.assert_close(hidden2, hidden, atol=0, rtol=0)
    assert not torch.allclose(pooled2[1], pooled[1])


def test_decoder_is_tied_to_word_embeddings():
    model = _model()
    names = [n for n, _ in model.named_parameters()]
    assert not any("decoder" in n for n in names)
    model.albert.embeddings.word_embeddings.weight.data.zero_()
    out = model(_ids())
    torch.testing.assert_close(out.mlm_logits, model.mlm_head.bias.expand_as(out.mlm_logits))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_heads", 5, "hidden_size .* divisible by num_heads"),
        ("sharing", "some", "sharing must be one of"),
        ("num_hidden_groups", 4, "num_hidden_groups .* must not exceed num_layers"),
        ("vocab_size", 0, "vocab_size must be a positive integer"),
        ("hidden_dropout", 1.5, "hidden_dropout"),
        ("hidden_act", "swish", "hidden_act"),
        ("layer_norm_eps", float("nan"), "layer_norm_eps must be a positive finite number"),
        ("initializer_range", float("inf"), "initializer_range must be a positive finite number"),
        ("embedding_projection", "yes", "embedding_projection must be true, false or null"),
    ],
)
def test_config_validation_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        litebert.ModelConfig(**{**CFG, field: value})


def test_sequence_longer_than_max_position_is_named():
    model = litebert.AlbertForPretraining(litebert.ModelConfig(**{**CFG, "max_position": 8}))
    with pytest.raises(ValueError, match="sequence length 10 exceeds the model's max_position 8"):
        model(_ids(t=10))
    with pytest.raises(ValueError, match=r"input_ids hold 97, outside \[0, 97\)"):
        model(torch.tensor([[5, 97]]))
    with pytest.raises(ValueError, match=r"input_ids of shape \(2, 0\) hold no tokens"):
        model(torch.zeros(2, 0, dtype=torch.long))  # a bare IndexError in the pooler otherwise
    with pytest.raises(ValueError, match=r"token_type_ids hold 2, outside \[0, 2\)"):
        model(torch.tensor([[5, 6]]), token_type_ids=torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match=r"masked_labels \(1, 2\) do not match the MLM logits \(1, 3\)"):
        model(torch.tensor([[5, 6, 7]]), masked_labels=torch.tensor([[5, 6]]))
    # the backbone alone gets the official initialisation too (std 0.02, cut at 2 std)
    w = litebert.Albert(litebert.ModelConfig(**CFG)).embeddings.word_embeddings.weight
    assert w.abs().max() <= 0.04 and 0.015 < w.std() < 0.02
    with pytest.raises(ValueError, match=r"input_ids must be \(batch, length\), got shape \(4,\)"):
        model(torch.tensor([5, 6, 7, 8]))
    ids = _ids(t=6)
    for mask in (torch.ones(ids.shape[0], 5), torch.ones(ids.shape[0], 1, 1, 6)):  # all ones: once not looked at
        with pytest.raises(ValueError, match=r"attention_mask of shape \(.*\) must match input_ids' \(2, 6\)"):
            model(ids, mask)
    with pytest.raises(ValueError, match=r"token_type_ids of shape \(2, 5\) must match input_ids' \(2, 6\)"):
        model(ids, token_type_ids=torch.zeros(2, 5, dtype=torch.long))


def test_masked_positions_and_pair_labels_that_do_not_fit_the_batch_are_named():
    # torch's gather and cross-entropy said "index 12 is out of bounds" or "multi-target not supported"
    model = litebert.AlbertForPretraining(litebert.ModelConfig(**CFG))
    ids, labels = _ids(t=10), torch.zeros(2, 2, dtype=torch.long)
    for positions, message in (
        (torch.full((2, 2), 12), r"masked_positions hold 12, outside \[0, 10\)"),
        (torch.full((2, 2), -1), r"masked_positions hold -1, outside \[0, 10\)"),
        (torch.zeros(3, 2, dtype=torch.long), r"masked_positions of shape \(3, 2\) must be \(batch, slots\)"),
        (torch.zeros(2, dtype=torch.long), r"masked_positions of shape \(2,\) must be \(batch, slots\)"),
    ):
        with pytest.raises(ValueError, match=message):
            model(ids, masked_positions=positions, masked_labels=labels[: positions.shape[0]])
    for sop in (torch.zeros(2, 1, dtype=torch.long), torch.zeros(3, dtype=torch.long)):
        with pytest.raises(ValueError, match=r"sentence_order_label of shape .* must be \(batch,\) = \(2,\)"):
            model(ids, sentence_order_label=sop)
    assert model(ids, masked_positions=torch.tensor([[0, 9], [3, 3]]), masked_labels=labels).loss is not None
    # -1 (another codebase's "ignore") was clamped to id 0 and trained; 97 and a pair label 2 were bare IndexErrors
    for bad, message in ((-1, r"masked_labels hold -1, outside \[0, 97\)"), (97, r"masked_labels hold 97, outside")):
        with pytest.raises(ValueError, match=message):
            model(
                ids, masked_positions=torch.tensor([[0, 9], [3, 3]]), masked_labels=torch.tensor([[5, -100], [bad, 6]])
            )
    for bad in (2, -1):
        with pytest.raises(ValueError, match=rf"sentence_order_label hold {bad}, outside \[0, 2\)"):
            model(ids, sentence_order_label=torch.tensor([0, bad]))
    assert model(ids, sentence_order_label=torch.tensor([1, -100])).loss is not None
    # int32 batches (numpy's usual int arrays): the embeddings and gather took them, cross-entropy did not
    model.eval()  # no dropout: the two forwards must agree
    ref = model(
        ids,
        masked_positions=torch.tensor([[0, 9], [3, 3]]),
        masked_labels=labels,
        sentence_order_label=torch.tensor([1, 0]),
    )
    out = model(
        ids.int(),
        masked_positions=torch.tensor([[0, 9], [3, 3]]).int(),
        masked_labels=labels.int(),
        sentence_order_label=torch.tensor([1, 0]).int(),
    )
    assert torch.equal(out.loss, ref.loss)


def test_config_from_dict_rejects_unknown_and_wrong_types():
    with pytest.raises(ValueError, match=r"unknown ModelConfig field\(s\) \['hidden'\]"):
        litebert.ModelConfig.from_dict({"hidden": 3})
    with pytest.raises(ValueError, match="num_layers must be a positive integer"):
        litebert.ModelConfig.from_dict({"num_layers": "12"})


def test_presets():
    assert litebert.preset("albert-xxlarge").num_heads == 64
    assert litebert.preset("bert-base").has_projection is False
    assert litebert.preset("albert-base").has_projection is True
    with pytest.raises(ValueError, match="unknown preset"):
        litebert.preset("albert-huge")


def _padded_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Right padding, left padding (a padded position 0) and a row without any real token."""
    ids = _ids(4, 10)
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    mask[1, :3] = 0
    mask[3] = 0
    return ids.masked_fill(mask == 0, 0), mask


def test_real_tokens_found_on_the_host_give_the_model_s_own_unpadding():
    from litebert.model.padding import find_real_tokens

    model, (ids, mask) = _model(), _padded_batch()
    real = find_real_tokens(mask)
    assert real.pad0 and real.max_seqlen == 10 and real.cu_seqlens.tolist() == [0, 6, 14, 24, 24]
    assert find_real_tokens(torch.ones_like(mask)) is None  # nothing to unpad: the mask is dropped
    with torch.no_grad():
        for a, b in zip(model.albert(ids, mask), model.albert(ids, mask, real_tokens=real), strict=True):
            assert torch.equal(a, b)
    with pytest.raises(ValueError, match="real_tokens describe an attention_mask"):
        model.albert(ids, real_tokens=real)


def test_the_padded_grid_gives_what_the_unpadded_path_gives():
    # A GPU forward without the host's RealTokens (and torch.compile) computes every position and masks the padded
    # keys: the real tokens' states, the zeros at padding and the pooled output are those of the unpadded path.
    model, (ids, mask) = _model(), _padded_batch()
    with torch.no_grad():
        hidden, pooled = model.albert(ids, mask)
        grid_hidden, grid_pooled = model.albert._padded_grid(ids, torch.zeros_like(ids), mask.bool())
    torch.testing.assert_close(grid_hidden, hidden, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grid_pooled, pooled, rtol=1e-5, atol=1e-5)
    assert not grid_hidden[mask == 0].any() and torch.isfinite(grid_pooled).all()


@pytest.mark.parametrize("padded", [False, True])
def test_a_compiled_training_step_has_no_graph_break(padded):
    # fullgraph=True refuses any break (aot_eager: the graph is captured and run through autograd, no codegen)
    from litebert.model.padding import find_real_tokens

    model = _model(hidden_dropout=0.1, attention_dropout=0.1).train()
    ids = _ids(4, 10)
    batch = dict(
        input_ids=ids,
        masked_positions=torch.tensor([[1, 2]] * 4),
        masked_labels=torch.tensor([[7, 8]] * 4),
        sentence_order_label=torch.tensor([0, 1, -100, 1]),
    )
    if padded:
        ids, mask = _padded_batch()
        batch.update(input_ids=ids, attention_mask=mask, real_tokens=find_real_tokens(mask))
    step = torch.compile(model, fullgraph=True, backend="aot_eager")
    step(**batch).loss.backward()
    assert all(p.grad is not None for p in model.albert.encoder.parameters())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_packed_attention_on_a_gpu_gives_the_padded_reference_in_bf16():
    from litebert.model import compat
    from litebert.model.albert import packs
    from litebert.model.padding import find_real_tokens

    if compat.varlen_attn() is None or torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("FlashAttention's variable-length kernel needs torch >= 2.9 and compute capability 8.0")
    model = _model(num_heads=2).cuda()  # head size 16
    ids, mask = _padded_batch()
    mask[3, :4] = 1  # packed attention is used without a padded position 0
    mask[1] = 1
    ids, mask = ids.cuda(), mask.cuda()
    real = find_real_tokens(mask.cpu()).to("cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        packed, packed_pooled = model.albert(ids, mask, real_tokens=real)
        grid, grid_pooled = model.albert(ids, mask)  # no RealTokens: the padded grid, SDPA with a mask
    qkv = torch.zeros(5, 3 * 32, device="cuda", dtype=torch.bfloat16)
    from litebert.model.padding import Unpadded

    assert packs(qkv, Unpadded.of(real, mask.shape), 2, 0.0)
    with compat.use_fallbacks("varlen_attn"):  # torch without the kernel: the padded grid, the same figures
        assert not packs(qkv, Unpadded.of(real, mask.shape), 2, 0.0)
        fallback, _ = model.albert(ids, mask, real_tokens=real)
    torch.testing.assert_close(fallback.float(), grid.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(packed.float(), grid.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(packed_pooled.float(), grid_pooled.float(), rtol=2e-2, atol=2e-2)
