"""LAMB and the official fine-tuning Adam against hand-computed steps (docs/paper.md §5 and §7), AdamW groups and
the learning-rate schedule."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch
from torch import nn

from litebert.cli import build_parser
from litebert.cli.flags import config_flags, given
from litebert.finetune import FinetuneConfig
from litebert.train import PretrainJob
from litebert.train.config import OPTIMIZERS
from litebert.train.optim import AdamWeightDecay, Lamb, build_optimizer, is_excluded, lr_schedule


class Toy(nn.Module):
    """Names chosen like the official checkpoint: a dense kernel, its bias, a LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.dense = nn.Linear(3, 2)
        self.LayerNorm = nn.LayerNorm(2)


def _hand_lamb(w, g, m, v, *, lr, wd, excluded, b1=0.9, b2=0.999, eps=1e-6):
    """One official LAMB step written with numpy float64, element by element."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    if not excluded:
        u = u + wd * w
        wn, un = math.sqrt(float((w * w).sum())), math.sqrt(float((u * u).sum()))
        ratio = wn / un if wn > 0 and un > 0 else 1.0
    else:
        ratio = 1.0
    return w - lr * ratio * u, m, v


@pytest.mark.parametrize("with_excluded", [True, False])
def test_lamb_matches_hand_computed_steps(with_excluded: bool) -> None:
    torch.manual_seed(0)
    model = Toy().double()
    with torch.no_grad():
        model.LayerNorm.weight.uniform_(0.5, 1.5)
        model.LayerNorm.bias.uniform_(-0.5, 0.5)
    named = [(n, p) for n, p in model.named_parameters() if with_excluded or n == "dense.weight"]
    opt = Lamb(named, lr=0.1, weight_decay=0.01)
    ref = {n: (p.detach().numpy().copy(), 0.0, 0.0) for n, p in named}
    rng = np.random.default_rng(0)
    for _ in range(3):  # several steps so m and v carry over
        grads = {n: rng.normal(size=tuple(p.shape)) for n, p in named}
        for n, p in named:
            p.grad = torch.from_numpy(grads[n].copy())
        opt.step()
        for n, _p in named:
            w, m, v = ref[n]
            ref[n] = _hand_lamb(w, grads[n], m, v, lr=0.1, wd=0.01, excluded=is_excluded(n))
    for n, p in named:
        np.testing.assert_allclose(p.detach().numpy(), ref[n][0], rtol=1e-12, atol=1e-14)
    # The excluded ones really took the plain (no decay, ratio 1) path, the dense kernel the adapted one.
    assert is_excluded("LayerNorm.weight") and is_excluded("dense.bias") and not is_excluded("dense.weight")


def _steps(named: list, grads: list[list[torch.Tensor]], **kw: object) -> Lamb:
    opt = Lamb(named, **kw)
    for step in grads:
        for (_, p), g in zip(named, step, strict=True):
            p.grad = g
        opt.step()
    return opt


def test_lamb_ignores_memory_layout() -> None:
    """torch's fused Adam kernel walks memory: a transposed weight, a grad with other strides and moments loaded
    back contiguous must move exactly like contiguous ones."""
    torch.manual_seed(0)
    w = torch.randn(6, 4, dtype=torch.float64)
    grads = [torch.randn(6, 4, dtype=torch.float64) for _ in range(3)]
    plain = nn.Parameter(w.clone())
    _steps([("dense.weight", plain)], [[g.clone()] for g in grads], lr=0.1)
    transposed = nn.Parameter(w.t().contiguous().t())  # (6, 4) with strides (1, 6)
    assert not transposed.is_contiguous()
    opt = _steps([("dense.weight", transposed)], [[g.clone()] for g in grads[:2]], lr=0.1)
    state = opt.state_dict()
    state["state"][0] = {k: v.contiguous() for k, v in state["state"][0].items()}  # as a checkpoint gives them
    opt.load_state_dict(state)
    transposed.grad = grads[2].clone()  # contiguous, unlike the weight
    opt.step()
    torch.testing.assert_close(transposed.detach(), plain.detach(), rtol=0, atol=1e-15)


def test_lamb_on_bf16_weights_keeps_fp32_moments_and_tracks_fp32_weights() -> None:
    torch.manual_seed(0)
    w = torch.randn(16, 8)
    grads = [torch.randn(16, 8) for _ in range(3)]
    full = nn.Parameter(w.clone())
    half = nn.Parameter(w.to(torch.bfloat16))
    _steps([("dense.weight", full)], [[g] for g in grads], lr=0.01)
    opt = _steps([("dense.weight", half)], [[g.to(torch.bfloat16)] for g in grads], lr=0.01)
    assert half.dtype == torch.bfloat16 and opt.state[half]["exp_avg"].dtype == torch.float32
    torch.testing.assert_close(half.detach().float(), full.detach(), rtol=2e-2, atol=2e-2)
    assert not torch.equal(half.detach(), w.to(torch.bfloat16))  # it moved
    # Resumed from a state dict (torch casts loaded state to the weight's dtype by default), it goes on exactly.
    resumed = nn.Parameter(w.to(torch.bfloat16))
    first = _steps([("dense.weight", resumed)], [[g.to(torch.bfloat16)] for g in grads[:2]], lr=0.01)
    state = first.state_dict()
    again = Lamb([("dense.weight", resumed)], lr=0.01)
    again.load_state_dict(state)
    assert again.state[resumed]["exp_avg"].dtype == torch.float32
    resumed.grad = grads[2].to(torch.bfloat16)
    again.step()
    assert torch.equal(resumed.detach(), half.detach())


@pytest.mark.parametrize("betas", [(0.0, 0.0), (0.5, 0.9), (0.99, 0.999999)])
def test_lamb_has_no_bias_correction_for_any_betas(betas: tuple[float, float]) -> None:
    """The official LAMB has no bias correction; the fused kernel's is neutralised for every beta < 1."""
    w = nn.Parameter(torch.ones(4, dtype=torch.float64))
    w.grad = torch.full((4,), 2.0, dtype=torch.float64)
    Lamb([("LayerNorm.weight", w)], lr=1.0, betas=betas, eps=1e-6).step()  # excluded: w -= lr * u
    m, v = (1 - betas[0]) * 2.0, (1 - betas[1]) * 4.0
    torch.testing.assert_close(w.detach(), torch.full((4,), 1.0 - m / (math.sqrt(v) + 1e-6), dtype=torch.float64))


def test_lamb_trust_ratio_is_one_for_zero_weights_and_not_clipped() -> None:
    w = nn.Parameter(torch.zeros(4, dtype=torch.float64))
    opt = Lamb([("w", w)], lr=1.0, weight_decay=0.0)
    w.grad = torch.full((4,), 2.0, dtype=torch.float64)
    opt.step()
    # ||w|| = 0 -> ratio 1: update = m / (sqrt(v) + eps) = 0.2 / (sqrt(0.004) + 1e-6).
    expected = -0.2 / (math.sqrt(0.004) + 1e-6)
    torch.testing.assert_close(w.detach(), torch.full((4,), expected, dtype=torch.float64))
    # A large ||w|| / ||u|| is used as is (not clipped to 10 as some LAMB variants do).
    big = nn.Parameter(torch.full((4,), 1000.0, dtype=torch.float64))
    opt = Lamb([("big", big)], lr=1e-3, weight_decay=0.0)
    big.grad = torch.ones(4, dtype=torch.float64)
    opt.step()
    u = 0.1 / (math.sqrt(0.001) + 1e-6)
    ratio = 2000.0 / (2 * u)
    torch.testing.assert_close(big.detach(), torch.full((4,), 1000.0 - 1e-3 * ratio * u, dtype=torch.float64))


def test_lamb_fused_qkv_gets_one_trust_ratio_per_block() -> None:
    """A fused (3H, H) qkv kernel must move exactly like three separate official tensors."""
    torch.manual_seed(1)
    fused = nn.Parameter(torch.randn(6, 2, dtype=torch.float64))
    parts = [nn.Parameter(fused.detach()[2 * i : 2 * i + 2].clone()) for i in range(3)]
    grad = torch.randn(6, 2, dtype=torch.float64) * torch.tensor([[1.0], [1.0], [10.0], [10.0], [0.1], [0.1]])
    fused.grad = grad.clone()
    for i, p in enumerate(parts):
        p.grad = grad[2 * i : 2 * i + 2].clone()
    Lamb([("attn.qkv.weight", fused)], lr=0.1).step()
    Lamb([(f"attn.{k}.weight", p) for k, p in zip("qkv", parts, strict=True)], lr=0.1).step()
    torch.testing.assert_close(fused.detach(), torch.cat([p.detach() for p in parts]), rtol=0, atol=1e-15)


def test_litebert_names_are_excluded_like_the_official_ones() -> None:
    assert is_excluded("albert.encoder.attentions.0.norm.weight")
    assert is_excluded("albert.embeddings.LayerNorm.weight") and is_excluded("mlm_head.bias")
    assert not is_excluded("albert.encoder.ffns.0.up.weight") and not is_excluded("albert.normalizer.weight")


def test_lamb_refuses_unnamed_params() -> None:
    with pytest.raises(ValueError, match="named parameters"):
        Lamb(Toy().parameters())


def test_adamw_groups_skip_decay_by_name() -> None:
    opt = build_optimizer(Toy(), name="adamw", lr=1e-3, weight_decay=0.01)
    names = {g["weight_decay"]: sorted(g["param_names"]) for g in opt.param_groups}
    assert names == {0.01: ["dense.weight"], 0.0: ["LayerNorm.bias", "LayerNorm.weight", "dense.bias"]}
    with pytest.raises(ValueError, match="optimizer must be"):
        build_optimizer(Toy(), name="sgd", lr=1e-3, weight_decay=0.0)


def test_lr_schedule_warmup_then_polynomial_decay() -> None:
    kw = dict(peak_lr=0.00176, warmup_steps=3125, total_steps=125000)
    assert lr_schedule(0, **kw) == 0.0
    assert lr_schedule(1562, **kw) == pytest.approx(0.00176 * 1562 / 3125)
    assert lr_schedule(3125, **kw) == pytest.approx(0.00176 * (1 - 3125 / 125000))
    assert lr_schedule(125000, **kw) == 0.0
    assert lr_schedule(62500, power=2.0, **kw) == pytest.approx(0.00176 * 0.25)


def test_lamb_rounds_a_bf16_weight_once() -> None:
    """A bf16 weight takes the step computed in fp32 and is rounded once: exactly what an fp32 weight holding
    the same values, fed the same gradients, ends at, rounded to bf16."""
    torch.manual_seed(3)
    half = nn.Parameter(torch.randn(64, 32).to(torch.bfloat16))
    full = nn.Parameter(half.detach().float())
    grads = [torch.randn(64, 32).to(torch.bfloat16) for _ in range(2)]
    _steps([("dense.weight", half)], [[g] for g in grads[:1]], lr=0.05)
    _steps([("dense.weight", full)], [[g.float()] for g in grads[:1]], lr=0.05)
    assert torch.equal(half.detach(), full.detach().to(torch.bfloat16))


def test_lamb_applies_its_ratios_as_tensors_with_the_rounding_of_sub_alpha() -> None:
    # The step is w - scale * u with the scale a tensor (no read back); on a CPU it must round as the
    # w.sub_(u, alpha=scale) of every earlier litebert run (one fused multiply-add), or CPU runs would change.
    g = torch.Generator().manual_seed(0)
    w, u = torch.randn(100_003, generator=g), torch.randn(100_003, generator=g) * 1e-3
    scale = torch.tensor(0.0123456789)
    assert torch.equal(w.clone().addcmul_(u, -scale), w.clone().sub_(u, alpha=float(scale)))
    assert not torch.equal(w.clone().sub_(u * scale), w.clone().sub_(u, alpha=float(scale)))  # two roundings differ


def test_lamb_withholds_a_step_flagged_found_inf_moments_included() -> None:
    torch.manual_seed(0)
    model, guarded = Toy(), Toy()
    guarded.load_state_dict(model.state_dict())
    plain, flagged = (Lamb(list(m.named_parameters()), lr=1e-2) for m in (model, guarded))
    for found_inf in (0.0, 1.0, 0.0):
        grads = [torch.randn_like(p) for p in model.parameters()]
        for m, opt in ((model, plain), (guarded, flagged)):
            for p, grad in zip(m.parameters(), grads, strict=True):
                p.grad = grad.clone() if opt is plain or not found_inf else torch.full_like(grad, float("nan"))
        before = [p.clone() for p in guarded.parameters()], [s["exp_avg"].clone() for s in flagged.state.values()]
        flagged.found_inf, flagged.grad_scale = torch.tensor(found_inf), None  # torch's GradScaler protocol
        flagged.step()
        if found_inf:  # NaN gradients, withheld: weights and moments as they were
            assert all(torch.equal(a, b) for a, b in zip(before[0], guarded.parameters(), strict=True))
            assert all(torch.equal(a, s["exp_avg"]) for a, s in zip(before[1], flagged.state.values(), strict=True))
        else:
            plain.step()
    # the two unflagged steps equal plain LAMB's two steps, bit for bit
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), guarded.parameters(), strict=True))


def _hand_adam_wd(w, g, m, v, *, lr, wd, excluded, b1=0.9, b2=0.999, eps=1e-6):
    """One step of the official AdamWeightDecayOptimizer (optimization.py), numpy float64: no bias correction,
    eps outside the square root, decoupled decay inside the update, all of it times lr."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    if not excluded:
        u = u + wd * w
    return w - lr * u, m, v


def _check_official_steps(path: str, device: str, dtype: torch.dtype, rtol: float) -> None:
    torch.manual_seed(0)
    model = Toy().to(device, dtype)
    with torch.no_grad():
        model.LayerNorm.weight.uniform_(0.5, 1.5)
        model.LayerNorm.bias.uniform_(-0.5, 0.5)
    opt = build_optimizer(model, name="adamw_official", lr=0.1, weight_decay=0.3)
    for group in opt.param_groups:  # torch's three implementations of the same update, each checked
        group["foreach"], group["fused"] = path == "foreach", path == "fused"
    named = dict(model.named_parameters())
    ref = {n: (p.detach().cpu().double().numpy(), 0.0, 0.0) for n, p in named.items()}
    rng = np.random.default_rng(0)
    for step in range(6):  # m and v carry over; the bias corrections would grow ever closer to 1
        # Gradients of 1e-6 first: sqrt(v) is then below eps, so eps's place (outside the root) decides the step.
        grads = {n: rng.normal(size=tuple(p.shape)) * (1e-6 if step < 3 else 1.0) for n, p in named.items()}
        for n, p in named.items():
            p.grad = torch.from_numpy(grads[n]).to(device, dtype)
            w, m, v = ref[n]
            ref[n] = _hand_adam_wd(w, p.grad.cpu().double().numpy(), m, v, lr=0.1, wd=0.3, excluded=is_excluded(n))
        opt.step()
        for n, p in named.items():
            got = p.detach().cpu().double().numpy()
            np.testing.assert_allclose(got, ref[n][0], rtol=rtol, atol=rtol / 100, err_msg=f"{n} {step}")
    groups = {g["weight_decay"]: sorted(g["param_names"]) for g in opt.param_groups}
    assert groups == {0.3: ["dense.weight"], 0.0: ["LayerNorm.bias", "LayerNorm.weight", "dense.bias"]}


@pytest.mark.parametrize("path", ["single", "foreach", "fused"])
def test_adamw_official_matches_hand_computed_steps(path: str) -> None:
    _check_official_steps(path, "cpu", torch.float64, rtol=1e-13)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("path", ["foreach", "fused"])
def test_adamw_official_on_cuda_matches_hand_computed_steps(path: str) -> None:
    _check_official_steps(path, "cuda", torch.float32, rtol=1e-5)  # float32 against the float64 reference


def test_adamw_official_first_step_is_3x_torch_adamw_and_resumes_without_bias_correction() -> None:
    # torch's bias-corrected first step is lr * g / |g|; the official one lr * 0.1 g / (sqrt(0.001) |g|) = 3.16x.
    moved = {}
    for name in ("adamw", "adamw_official"):
        torch.manual_seed(0)
        model = Toy()
        before = model.dense.weight.detach().clone()
        opt = build_optimizer(model, name=name, lr=1e-3, weight_decay=0.0)
        model.dense.weight.grad = torch.ones_like(model.dense.weight)
        opt.step()
        moved[name] = (before - model.dense.weight.detach()).abs().mean().item()
    assert moved["adamw_official"] / moved["adamw"] == pytest.approx(0.1 / math.sqrt(0.001), rel=1e-4)
    # State saved by torch's AdamW (a true count of 3) loads with the count held again: no correction creeps in.
    model = Toy()
    source = build_optimizer(model, name="adamw", lr=1e-3, weight_decay=0.01)
    for _ in range(3):
        for p in model.parameters():
            p.grad = torch.ones_like(p)
        source.step()
    opt = build_optimizer(model, name="adamw_official", lr=1e-3, weight_decay=0.01)
    opt.load_state_dict(source.state_dict())
    assert {float(s["step"]) for s in opt.state.values()} == {torch.finfo(torch.float32).max}
    with pytest.raises(ValueError, match="no amsgrad"):
        AdamWeightDecay(model.parameters(), amsgrad=True)


def test_the_optimizer_flags_offer_every_optimizer_and_finetune_defaults_to_the_official_one() -> None:
    parser = build_parser()
    need = ["--task", "classification", "--train", "t", "--dev", "d", "--init", "i", "--out", "o"]
    assert FinetuneConfig(task="classification", train="t", dev="d", init="i", out="o").optimizer == "adamw_official"
    for name in OPTIMIZERS:
        args = parser.parse_args(["finetune", *need, "--optimizer", name])
        assert given(args, config_flags(FinetuneConfig))["optimizer"] == name
        args = parser.parse_args(["pretrain", "--optimizer", name])
        assert given(args, config_flags(PretrainJob))["train"]["optimizer"] == name


@pytest.mark.parametrize("found_inf", [None, 0.0, 1.0])
def test_lamb_with_torchs_private_kernels_forced_off_steps_as_with_them(found_inf) -> None:
    # litebert.model.compat: the plain-op fallbacks of torch._fused_adam_ and torch._foreach_norm, as on a torch
    # that drops them, give LAMB the same steps (and the same withheld step)
    from litebert.model import compat

    results = []
    for forced in (False, True):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(4), nn.Linear(4, 3))
        opt = Lamb(list(model.named_parameters()), lr=0.05, weight_decay=0.01)
        with compat.use_fallbacks("fused_adam", "foreach_norm") if forced else contextlib.nullcontext():
            for step in range(3):
                model.zero_grad()
                model(torch.randn(5, 6, generator=torch.Generator().manual_seed(step))).square().mean().backward()
                if found_inf is None:
                    opt.step()
                else:
                    compat.step_unless(opt, torch.tensor(found_inf))
        results.append([p.detach().clone() for p in model.parameters()])
    for fast, slow in zip(*results, strict=True):
        torch.testing.assert_close(slow, fast, rtol=1e-5, atol=1e-6)
    torch.manual_seed(0)
    untouched = [p.detach() for p in nn.Sequential(nn.Linear(6, 4), nn.LayerNorm(4), nn.Linear(4, 3)).parameters()]
    assert all(torch.equal(a, b) for a, b in zip(results[1], untouched, strict=True)) == (found_inf == 1.0)
