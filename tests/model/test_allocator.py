"""keep_freed_memory: a training step stops faulting in fresh pages for the tensors it allocates every step."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from litebert.model import allocator

# Five training steps of a small model after three warm-up steps; prints the minor page faults they cost.
PROBE = """
import resource, sys, torch, litebert
from litebert.model.allocator import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "tuned" else False
torch.manual_seed(0)
m = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=8000, num_layers=2))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
ids = torch.randint(5, 8000, (32, 128))
masked = torch.arange(20).repeat(32, 1) * 6
def step():
    out = m(ids, torch.ones_like(ids), torch.zeros_like(ids), masked, ids[:, :20], torch.zeros(32, dtype=torch.long))
    out.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(3): step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5): step()
print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    ).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not allocator.is_glibc(), reason="glibc malloc only")
def test_training_steps_reuse_freed_pages():
    # Plain glibc raises its mmap threshold as large blocks are freed, at moments that vary from run to run
    # (5,000 to 120,000 faults measured for the same five steps): the most of three runs is the baseline.
    plain_runs = [_faults("plain") for _ in range(3)]
    plain = max(faults for _, faults in plain_runs)
    tuned_applied, tuned = _faults("tuned")
    assert not any(applied for applied, _ in plain_runs) and tuned_applied
    # The (640 x 8000) MLM logits alone are 20 MB: plain malloc maps them afresh every step.
    assert plain > 5 * (20 * 2**20 // 4096)
    assert tuned < plain / 4, (plain, tuned)


def test_the_opt_out_leaves_malloc_alone(monkeypatch):
    monkeypatch.setenv(allocator.ENV, "0")
    assert allocator.keep_freed_memory() is False


def test_the_command_line_applies_it(monkeypatch):
    from litebert import cli
    from litebert.model import allocator

    calls = []
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append(1) or True)
    assert cli.main(["params", "--preset", "tiny"]) == 0
    assert calls == [1]
