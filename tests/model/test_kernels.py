"""CPU inference's fused dense layers (`FusedDense`, model/kernels.py): the same outputs as eager torch, and when
they apply."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch

import litebert
from litebert.model import compat
from litebert.model import kernels as fused_module
from litebert.model.kernels import FusedDense, padded_rows
from litebert.model.padding import Unpadded

CFG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64)

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, CFG["vocab_size"], (4, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # right padding
    mask[2, :3] = 0  # left padding: position 0 is computed as a query only
    mask[3, 1:] = 0  # a single real token
    return ids.masked_fill(mask == 0, 0), mask


def _model(**kw) -> litebert.Albert:
    torch.manual_seed(0)
    return litebert.Albert(litebert.ModelConfig(**{**CFG, **kw})).eval()


@needs_onednn
@pytest.mark.parametrize("act", ["gelu_new", "gelu", "relu"])
@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("mkl", [True, False])
def test_inference_matches_the_eager_forward(act, padded, mkl, monkeypatch):
    # MKL's packed product for every layer without an activation, or none (a torch built without MKL)
    monkeypatch.setattr(fused_module, "MKL_MIN_WEIGHT", 0)
    model = _model(hidden_act=act, initializer_range=0.3)  # pre-activations of a few units: erf and tanh differ
    ids, mask = _batch()
    if not padded:
        mask = torch.ones_like(mask)
    eager = model(ids, mask)  # autograd on: the eager path
    with torch.no_grad(), contextlib.nullcontext() if mkl else compat.use_fallbacks("mkl_linear"):
        fused = model(ids, mask)
    for a, b in zip(fused, eager, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@needs_onednn
@pytest.mark.parametrize("shape", [(2, 5), (1, 1)])
@pytest.mark.parametrize("real", [0, 1])
@pytest.mark.parametrize("mkl_min_weight", [0, fused_module.MKL_MIN_WEIGHT])
def test_inference_on_no_real_token_or_a_single_one(shape, real, mkl_min_weight, monkeypatch):
    monkeypatch.setattr(fused_module, "MKL_MIN_WEIGHT", mkl_min_weight)  # MKL's product or oneDNN's
    model = _model()
    ids = torch.randint(5, CFG["vocab_size"], shape, generator=torch.Generator().manual_seed(2))
    mask = torch.full_like(ids, real)
    eager = model(ids, mask)
    with torch.no_grad():
        fused = model(ids, mask)
    for a, b in zip(fused, eager, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@needs_onednn
@pytest.mark.parametrize("projection", [True, False])
def test_bf16_inference_is_as_close_to_fp32_as_the_eager_bf16_forward(projection):
    # Without a projection (E == H) eager autocast keeps the residual stream in fp32: bf16 products added to it.
    model = _model(num_layers=4, **({} if projection else dict(embedding_size=32, embedding_projection=False)))
    ids, mask = _batch(1)
    with torch.no_grad():
        reference, _ = model(ids, mask)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fused, _ = model(ids, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager, _ = model(ids, mask)
    assert fused.dtype == eager.dtype
    fused_error, eager_error = (fused - reference).abs().max(), (eager.detach() - reference).abs().max()
    assert 0 < fused_error < 0.1
    assert fused_error <= 2 * eager_error


def test_fused_path_only_where_it_applies():
    x = torch.zeros(2, 3)
    with torch.no_grad():
        assert FusedDense.for_forward(x, training=True) is None  # dropout sits before the residual add
        assert FusedDense.for_forward(x.double(), training=False) is None  # oneDNN has no fp64
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fused = FusedDense.for_forward(x, training=False)
            if torch.backends.mkldnn.is_available() and compat.onednn_bf16():
                assert fused.dtype == torch.bfloat16
            else:  # no oneDNN bf16 kernels on this CPU (AVX2): eager torch runs it
                assert fused is None
            assert FusedDense.for_forward(x.double(), training=False) is None  # autocast leaves fp64 as it is
    assert FusedDense.for_forward(x, training=False) is None  # autograd on: the fused operator has no backward


def test_an_fp64_model_under_bf16_autocast_runs_in_fp64():
    model = _model().double()
    ids, mask = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager, _ = model(ids, mask)
        with torch.no_grad():
            inference, _ = model(ids, mask)
    assert inference.dtype == torch.float64
    torch.testing.assert_close(inference, eager.detach(), atol=1e-12, rtol=0)


def test_quantized_and_hooked_layers_run_their_own_forward():
    model = _model()
    ids, mask = _batch()
    calls = []
    model.encoder.ffns[0].up.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        model(ids, mask)
    assert len(calls) == 3  # once per layer: the hook sees every application of the shared FFN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization is deprecated in favour of torchao
        quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    eager, _ = quantized(ids, mask)
    with torch.no_grad():
        inference, _ = quantized(ids, mask)
    torch.testing.assert_close(inference, eager.detach(), atol=1e-5, rtol=0)


def test_fused_forward_leaves_gradients_alone():
    model = _model()
    ids, mask = _batch()
    with torch.no_grad():
        model(ids, mask)
    hidden, pooled = model(ids, mask)
    (hidden.sum() + pooled.sum()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100, 511, 512, 513, 1000, 4097, 100_003])
def test_padded_rows_round_up_by_at_most_a_sixteenth(n):
    rows = padded_rows(n)
    assert n <= rows <= max(n + 15, n * 17 // 16)
    assert padded_rows(rows) == rows


def test_bf16_carries_padded_rows_and_fp32_the_tokens():
    assert FusedDense(torch.bfloat16).rows(1000) == padded_rows(1000) == 1024
    assert FusedDense(torch.float32).rows(1000) == 1000


def test_padded_rows_take_few_sizes():
    assert len({padded_rows(n) for n in range(1, 4097)}) <= 16 * 4 + 32  # 16 per power of two from 512 up


def test_unpadded_rows_beyond_the_real_tokens_are_left_out_of_the_grid():
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]]).bool()
    x = torch.arange(6.0).view(2, 3, 1)
    unpad = Unpadded(mask, rows=8)
    rows = unpad.unpad(x)
    assert rows.shape == (8, 1)
    assert rows[:4].flatten().tolist() == [0.0, 1.0, 4.0, 5.0]
    assert rows[4:].flatten().tolist() == [0.0] * 4  # copies of the first real token
    assert unpad.pad(rows * 10).flatten().tolist() == [0.0, 10.0, 0.0, 0.0, 40.0, 50.0]
