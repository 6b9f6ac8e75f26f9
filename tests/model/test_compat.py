"""litebert.model.compat: each fallback of a private torch API, forced on the torch at hand, gives what the fast
path gives (where this torch has the fast path), and the model's CPU inference runs with every fallback at once."""

from __future__ import annotations

import pytest
import torch

import litebert
from litebert.model import compat

CFG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)


def _needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not compat.fast(name), reason=f"this torch has no fast path for {name}")


def test_use_fallbacks_turns_fast_paths_off_and_back_on():
    before = {name: compat.fast(name) for name in compat.FAST_PATHS}
    with compat.use_fallbacks():
        assert not any(compat.fast(name) for name in compat.FAST_PATHS)
        assert compat.varlen_attn() is None and compat.onednn_linear() is None and compat.mkl_linear() is None
        assert compat.onednn_bf16() is False
    assert {name: compat.fast(name) for name in compat.FAST_PATHS} == before
    with pytest.raises(ValueError, match="unknown fast path"), compat.use_fallbacks("no_such_path"):
        pass


def _adam_tensors(seed: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 3), (7,), (2, 2, 2)]
    make = lambda s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    params = [make(s) for s in shapes]
    grads = [make(s) for s in shapes]
    exp_avgs = [make(s) * 0.1 for s in shapes]
    exp_avg_sqs = [make(s).abs() * 0.01 for s in shapes]
    return params, grads, exp_avgs, exp_avg_sqs


@_needs("fused_adam")
@pytest.mark.parametrize("step", [1.0, 7.0, float(torch.finfo(torch.float32).max)])
@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_fused_adam_fallback_matches_torchs_kernel(step, scaled, weight_decay):
    results = []
    for forced in (False, True):
        tensors = _adam_tensors(0)
        steps = [torch.tensor(step)] * 3
        grad_scale = torch.tensor(4.0) if scaled else None
        kwargs = dict(lr=-1.0 if step > 1e30 else 1e-2, beta1=0.9, beta2=0.999, eps=1e-6, weight_decay=weight_decay)
        with compat.use_fallbacks("fused_adam") if forced else torch.no_grad():
            compat.fused_adam_(*tensors, steps, grad_scale=grad_scale, found_inf=torch.tensor(0.0), **kwargs)
        results.append(tensors)
    for fast_list, slow_list in zip(*results, strict=True):
        for a, b in zip(fast_list, slow_list, strict=True):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    # the update moved the parameters (a fallback that did nothing would fail above only by luck)
    assert not torch.equal(results[1][0][0], _adam_tensors(0)[0][0])


@pytest.mark.parametrize("forced", [False, True])
def test_fused_adam_with_found_inf_leaves_every_tensor_as_it_was(forced):
    if not forced and not compat.fast("fused_adam"):
        pytest.skip("this torch has no torch._fused_adam_")
    tensors = _adam_tensors(1)
    before = [[t.clone() for t in group] for group in tensors]
    with compat.use_fallbacks("fused_adam") if forced else torch.no_grad():
        compat.fused_adam_(
            *tensors, [torch.tensor(3.0)] * 3, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-6, found_inf=torch.tensor(1.0)
        )
    for group, old in zip(tensors, before, strict=True):
        for a, b in zip(group, old, strict=True):
            assert torch.equal(a, b)


@_needs("foreach_norm")
def test_foreach_norm_fallback_matches():
    tensors = [t for group in _adam_tensors(2) for t in group]
    fast = compat.foreach_norm(tensors)
    with compat.use_fallbacks("foreach_norm"):
        slow = compat.foreach_norm(tensors)
    torch.testing.assert_close(torch.stack(slow), torch.stack(fast))
    torch.testing.assert_close(slow[0], tensors[0].norm())


class _Counting(torch.optim.Optimizer):
    """Plain gradient descent that takes GradScaler's flag, as litebert's LAMB and torch's fused Adam do."""

    _step_supports_amp_scaling = True

    def __init__(self, params, lr: float):  # noqa: ANN001
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001
        found = getattr(self, "found_inf", None)
        self.seen = None if found is None else float(found)
        if found is not None and float(found):
            return None
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(p.grad, alpha=group["lr"])
        return None


@pytest.mark.parametrize("forced", [False, True])
@pytest.mark.parametrize("flag", [0.0, 1.0])
def test_step_unless_steps_exactly_when_the_flag_is_clear(forced, flag):
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.full((3,), 0.5)
    opt = _Counting([w], lr=1.0)
    with compat.use_fallbacks("found_inf") if forced else torch.no_grad():
        compat.step_unless(opt, torch.tensor(flag))
    assert torch.equal(w.detach(), torch.ones(3) if flag else torch.full((3,), 0.5))
    # the fast path hands the flag to the optimizer; the fallback reads it itself and calls a plain step
    assert getattr(opt, "seen", "not called") == (("not called" if flag else None) if forced else flag)
    assert not hasattr(opt, "found_inf")  # the attribute is taken away after the step


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_inference_with_every_fallback_matches_the_fast_paths(dtype):
    torch.manual_seed(0)
    model = litebert.Albert(litebert.ModelConfig(**CFG, initializer_range=0.3)).eval()
    ids = torch.randint(5, 97, (3, 10))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        fast, _ = model(ids, mask)
        with compat.use_fallbacks():
            slow, _ = model(ids, mask)
    if dtype == torch.float32:
        torch.testing.assert_close(slow, fast, atol=1e-5, rtol=1e-5)
        return
    # bf16: the two paths round at different places (oneDNN's fused bf16 kernels keep fp32 accumulators longer than
    # the plain ops, more so on CPUs without AMX), so single elements may differ by a few bf16 ulps after the layers;
    # what must hold is that the fallback is as close to the fp32 result as the fast path is.
    with torch.no_grad():
        exact, _ = model(ids, mask)
    err = lambda x: ((x.float() - exact).norm() / exact.norm()).item()
    assert err(fast) < 2e-2 and err(slow) < 2e-2
    assert err(slow) < 2 * err(fast) + 1e-3
    assert ((slow.float() - fast.float()).norm() / fast.float().norm()).item() < 2e-2
