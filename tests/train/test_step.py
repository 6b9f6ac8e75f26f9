"""The shared training step: no host synchronisation between log steps, the NaN guard that withholds updates on
the device, and batches built ahead whose resumable position counts only the batches consumed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tiny
import torch
from tiny import T, V, model_config
from torch.utils._python_dispatch import TorchDispatchMode

import litebert
from litebert.train import TrainConfig, dist, loop, pretrain
from litebert.train.loop import Objective, build_train_state, optimizer_step, read
from litebert.train.prefetch import Prefetcher
from litebert.train.synthetic import SyntheticBatches


def train_config(**kw: object) -> TrainConfig:
    base = dict(max_steps=10, batch_size=4, lr=1e-3, warmup_steps=1, save_every=100, eval_every=100, log_every=5)
    return tiny.train_config(base, **kw)


class Padded(SyntheticBatches):
    """Synthetic batches whose odd rows end in padding: the model unpads them with the host's RealTokens."""

    def __iter__(self):  # noqa: ANN204
        for batch in super().__iter__():
            mask = batch["attention_mask"].clone()
            mask[1::2, T - 7 :] = 0
            yield {**batch, "attention_mask": mask, "input_ids": batch["input_ids"].masked_fill(mask == 0, 0)}


class LocalScalarReads(TorchDispatchMode):
    """Counts aten._local_scalar_dense: what .item(), float(t), int(t) and bool(t) dispatch to (on a GPU each is a
    wait for every queued kernel). A CPU tensor's .tolist() and .numpy() read memory without dispatching; the CUDA
    test below catches those on a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func is torch.ops.aten._local_scalar_dense.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("extra", [{}, {"grad_accum": 2, "precision": "bf16"}])
def test_steps_between_log_steps_never_read_the_device(tmp_path: Path, monkeypatch, extra: dict) -> None:  # noqa: ANN001
    with LocalScalarReads() as probe:
        float(torch.ones(1).sum())  # the probe sees a read
    assert probe.count == 1
    reads, steps, real = LocalScalarReads(), [0], loop.optimizer_step

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        steps[0] += 1
        with reads:
            return real(*args, **kwargs)

    monkeypatch.setattr(loop, "optimizer_step", counted)
    batches = Padded(vocab_size=V, seq_len=T, batch_size=4)  # dropout on, padding in half the rows
    summary = pretrain(model_config(), train_config(**extra), None, tmp_path / "run", batches=batches)
    assert steps[0] == 10 and reads.count == 0
    assert len(summary.losses) == 10 and all(np.isfinite(summary.losses))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_steps_between_log_steps_never_synchronise(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    real, steps = loop.optimizer_step, [0]

    def checked(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        steps[0] += 1
        if steps[0] <= 2:  # the first steps allocate the optimizer's constants
            return real(*args, **kwargs)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return real(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(loop, "optimizer_step", checked)
    for precision in ("bf16", "fp32"):
        batches = Padded(vocab_size=V, seq_len=T, batch_size=4)
        cfg = train_config(device="cuda", precision=precision, max_steps=8, log_every=8)
        summary = pretrain(model_config(), cfg, None, tmp_path / precision, batches=batches)
        assert len(summary.losses) == 8 and all(np.isfinite(summary.losses))


def _poisoned_objective() -> Objective:
    """Pretraining's loss times the batch's "scale" (NaN poisons a step), counting nothing else."""

    def loss(model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        scale = batch.pop("scale")
        return model(**batch).loss * scale, torch.zeros(0)

    return Objective(
        loss=loss,
        prepare=lambda batch: (batch, np.zeros(1)),
        row=lambda loss, device, host, grad_norm, lr: {"loss": loss, "grad_norm": grad_norm},
    )


def test_a_non_finite_step_and_every_later_one_leave_weights_and_moments_alone() -> None:
    torch.manual_seed(0)
    model = litebert.AlbertForPretraining(model_config(hidden_dropout=0.0, attention_dropout=0.0))
    tr = build_train_state(model, train_config(), dist.DistEnv(), _poisoned_objective())
    source = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
    scales = iter([1.0, float("nan"), 1.0])
    batches = ((b | {"scale": torch.tensor(next(scales))}, np.zeros(1)) for b in source)

    def snapshot() -> list[torch.Tensor]:
        moments = [v for state in tr.optimizer.state.values() for v in state.values()]
        return [t.clone() for t in (*model.parameters(), *moments)]

    def vote(host):  # noqa: ANN001, ANN202
        return 0, host

    good, _ = optimizer_step(tr, batches, 0, vote)
    before = snapshot()
    bad, _ = optimizer_step(tr, batches, 1, vote)  # NaN loss: NaN gradients
    after_bad = snapshot()
    later, _ = optimizer_step(tr, batches, 2, vote)  # a finite step after it is withheld as well
    assert all(torch.equal(a, b) for a, b in zip(before, after_bad, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(), strict=True))
    rows = read([good, bad, later], tr)  # read back once: the bad step is found by its record
    assert [np.isfinite(r["loss"]) for r in rows] == [True, False, True] and tr.healthy.item() == 0.0


def test_batches_built_ahead_resume_from_the_last_one_consumed() -> None:
    source = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
    ahead = Prefetcher(source, torch.device("cpu"), depth=3)
    taken = [next(ahead)[0] for _ in range(2)]
    deadline = time.time() + 10
    while source.index < 5 and time.time() < deadline:  # the producer runs ahead: 2 taken, 3 queued (+1 in hand)
        time.sleep(0.01)
    assert source.index >= 5 and ahead.state_dict() == {"index": 2, "seed": 0}
    ahead.close()
    again = Prefetcher(SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4), torch.device("cpu"))
    again.load_state_dict(ahead.state_dict())
    fresh = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
    expected = [fresh.global_batch(i) for i in range(3)]
    assert all(torch.equal(taken[i]["input_ids"], expected[i]["input_ids"]) for i in range(2))
    assert torch.equal(next(again)[0]["input_ids"], expected[2]["input_ids"])  # batch 2, not 5
    again.close()
    assert not any(t.name == "litebert-batches" and t.is_alive() for t in threading.enumerate())


def test_a_failing_source_fails_the_loop_at_the_batch_that_failed() -> None:
    class Failing(SyntheticBatches):
        def __iter__(self):  # noqa: ANN204
            for batch in super().__iter__():
                if self.index == 3:
                    raise ValueError("shard_00003: bad offsets")
                yield batch

    ahead = Prefetcher(Failing(vocab_size=V, seq_len=T, batch_size=4), torch.device("cpu"))
    assert len([next(ahead) for _ in range(2)]) == 2  # the two good batches first, in order
    with pytest.raises(ValueError, match="shard_00003: bad offsets"):
        next(ahead)
    ahead.close()


def test_the_checkpoint_records_the_batches_its_steps_consumed(tmp_path: Path) -> None:
    batches = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
    pretrain(
        model_config(), train_config(max_steps=6, save_every=3, grad_accum=2), None, tmp_path / "r", batches=batches
    )
    state = torch.load(tmp_path / "r" / "checkpoints" / "step_00000003" / "trainer.pt", weights_only=True)
    assert state["data"] == [{"index": 6, "seed": 0}]  # 3 steps x 2 micro-batches, whatever was built ahead
    records = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == [5, 6] and all(0 < r["mfu"] < 1 for r in train)
