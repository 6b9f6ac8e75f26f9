"""The pretraining loop: exact resume (interrupt and SIGKILL), accumulation, checkpointing, refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import tiny
import torch
from tiny import T, V, model_config

import litebert
from litebert.train import NonFiniteLossError, TrainConfig, pretrain
from litebert.train.checkpoint import latest_checkpoint, list_checkpoints
from litebert.train.synthetic import Interrupted, SyntheticBatches


def train_config(**kw: object) -> TrainConfig:
    base = dict(max_steps=6, batch_size=4, lr=1e-3, warmup_steps=1, save_every=2, eval_every=3, log_every=1)
    return tiny.train_config(base, **kw)


def eval_source() -> SyntheticBatches:
    return SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4, seed=99, num_batches=2)


def run(out: Path, *, stop: int | None = None, resume: bool = False, **kw: object):  # noqa: ANN201
    batches = Interrupted(SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4), stop)
    return pretrain(model_config(), train_config(**kw), None, out, batches=batches, held_out=eval_source, resume=resume)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # same kernels in every run (and in the SIGKILL subprocess)
    yield
    torch.set_num_threads(threads)


def test_resume_after_interrupt_is_bit_identical(tmp_path: Path) -> None:
    torch.manual_seed(5)
    full = run(tmp_path / "full")
    after = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3))  # the run seeds its own stream; the caller's goes on as it was
    assert not full.model.training  # returned ready for inference, as litebert.load returns a model
    assert len(full.losses) == 6 and all(x == x for x in full.losses)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", stop=3)  # stops in step 4; checkpoint of step 2 is the last complete one
    resumed = run(tmp_path / "cut", resume=True)
    assert resumed.start_step == 2
    assert resumed.losses == full.losses[2:]  # to the last bit (dropout is on: RNG state matters)
    a = litebert.load(full.model_dir).state_dict()
    b = litebert.load(resumed.model_dir).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(x)["step"] for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [s for s in steps if s] == [
        json.loads(x)["step"] for x in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()
    ]


def test_a_run_directory_in_use_is_refused(tmp_path: Path) -> None:
    import fcntl

    run(tmp_path / "r", max_steps=2)
    with open(tmp_path / "r" / ".lock", "a+") as held:  # as another process still training there would
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="is in use by another litebert process"):
            run(tmp_path / "r", resume=True, max_steps=4)
    assert run(tmp_path / "r", resume=True, max_steps=4).start_step == 2  # released: it goes on


def test_resumed_train_records_average_the_same_steps(tmp_path: Path) -> None:
    # checkpoints every 2 steps, records every 3: the resumed run must carry steps 1-2 into its step-3 record
    def records(out: Path) -> list[dict]:
        lines = (out / "metrics.jsonl").read_text().splitlines()
        keys = ("step", "loss", "mlm_acc", "sop_acc", "grad_norm", "lr")
        return [{k: r[k] for k in keys} for r in map(json.loads, lines) if r["split"] == "train"]

    run(tmp_path / "full", log_every=3)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", stop=3, log_every=3)
    assert run(tmp_path / "cut", resume=True, log_every=3).start_step == 2
    assert [r["step"] for r in records(tmp_path / "full")] == [3, 6]
    assert records(tmp_path / "cut") == records(tmp_path / "full")


SIGKILL_SCRIPT = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {tests!r})
    import test_train as t
    from tiny import SlowBatches
    torch.set_num_threads(1)

    batches = SlowBatches(0.3)  # give the parent time to kill us mid-run
    t.pretrain(t.model_config(), t.train_config(max_steps=40, save_every=1), None, {out!r}, batches=batches,
               held_out=t.eval_source)
    """
)


def test_resume_after_sigkill_is_bit_identical(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    script = SIGKILL_SCRIPT.format(tests=str(Path(__file__).parent), out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 60
    while len(list_checkpoints(out)) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    state = torch.load(latest_checkpoint(out) / "trainer.pt", weights_only=True)
    assert state["data"] == [{"index": state["step"], "seed": 0}]  # batches consumed, not those built ahead
    resumed = run(out, resume=True, max_steps=40, save_every=1)
    assert 3 <= resumed.start_step < 40
    full = run(tmp_path / "full", max_steps=40, save_every=40)
    assert resumed.losses == full.losses[resumed.start_step :]


def test_grad_accumulation_matches_one_big_batch(tmp_path: Path) -> None:
    mc = model_config(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0)
    kw = dict(max_steps=3, save_every=10, eval_every=10)
    big = pretrain(
        mc,
        train_config(batch_size=8, **kw),
        None,
        tmp_path / "big",
        batches=SyntheticBatches(vocab_size=V, seq_len=T, batch_size=8),
    )
    # Global batch k of size 8 = micro-batches 2k, 2k+1 of size 4 only if the source is read that way, so
    # build the accumulated source from the halves of the same global batches.
    halves = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=8, world_size=2)

    class Halves:
        def __init__(self) -> None:
            self.index = 0

        def state_dict(self) -> dict:
            return {"index": self.index}

        def load_state_dict(self, state: dict) -> None:
            self.index = state["index"]

        def __iter__(self):  # noqa: ANN204
            while True:
                g = halves.global_batch(self.index // 2)
                rows = slice(4 * (self.index % 2), 4 * (self.index % 2) + 4)
                self.index += 1
                yield {k: v[rows] for k, v in g.items()}

    acc = pretrain(mc, train_config(batch_size=4, grad_accum=2, **kw), None, tmp_path / "acc", batches=Halves())
    torch.testing.assert_close(torch.tensor(acc.losses), torch.tensor(big.losses), rtol=1e-5, atol=1e-6)


def test_compiled_model_trains_like_the_eager_one_and_saves_the_same_names(tmp_path: Path) -> None:
    # Dropout on: the compiled model calls the eager dropout mask as an operator, so it draws the same masks.
    mc = model_config(classifier_dropout=0.0)  # the SOP head's nn.Dropout is torch's, which inductor redraws
    kw = dict(max_steps=3, save_every=3, eval_every=10)
    runs = {}
    for name, compile_ in (("eager", False), ("compiled", True)):
        batches = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
        runs[name] = pretrain(mc, train_config(compile=compile_, **kw), None, tmp_path / name, batches=batches)
    eager, compiled = runs["eager"], runs["compiled"]
    torch.testing.assert_close(torch.tensor(compiled.losses), torch.tensor(eager.losses), rtol=1e-5, atol=1e-6)
    a, b = litebert.load(eager.model_dir).state_dict(), litebert.load(compiled.model_dir).state_dict()
    assert list(a) == list(b)  # no "_orig_mod." prefixes: a compiled run's checkpoints load anywhere
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-4, atol=1e-6)


def test_gradient_checkpointing_with_shared_layers_gives_the_same_gradients() -> None:
    mc = model_config(num_layers=4)  # one block shared by 4 layers, dropout on
    batch = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4).global_batch(0)
    grads = []
    for flag in (False, True):
        torch.manual_seed(0)
        model = litebert.AlbertForPretraining(mc)
        model.albert.encoder.gradient_checkpointing = flag
        model.train()
        torch.manual_seed(1)
        model(**batch).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-5, atol=1e-7, msg=name)


def test_steps_without_pair_labels_leave_the_pooler_and_pair_head_alone(tmp_path: Path) -> None:
    # Objective "none": sop_loss keeps the pair head in the graph with zero gradients, and LAMB's weight decay,
    # scaled by the trust ratio ||w|| / ||0.01 w||, shrank the pooler and SOP head by lr every step (to 40% of
    # their norm in 200 steps at lr 1e-2). The official optimizer skips variables the loss does not reach.
    class NoPairLabels(SyntheticBatches):
        def __iter__(self):  # noqa: ANN204
            for batch in super().__iter__():
                yield {**batch, "sentence_order_label": torch.full_like(batch["sentence_order_label"], -100)}

    mc = model_config()
    for optimizer in ("lamb", "adamw", "adamw_official"):  # each resumes exactly, too
        cfg = train_config(max_steps=4, lr=1e-2, optimizer=optimizer)

        def source(stop: int | None = None) -> Interrupted:
            return Interrupted(NoPairLabels(vocab_size=V, seq_len=T, batch_size=4), stop)

        full = pretrain(mc, cfg, None, tmp_path / optimizer, batches=source())
        torch.manual_seed(0)  # the run's initial weights (TrainConfig.seed 0)
        before = litebert.AlbertForPretraining(mc).state_dict()
        after = litebert.load(full.model_dir).state_dict()
        for name in ("albert.pooler.weight", "albert.pooler.bias", "sop_head.weight", "sop_head.bias"):
            assert torch.equal(after[name], before[name]), (optimizer, name)
        assert not torch.equal(after["mlm_head.dense.weight"], before["mlm_head.dense.weight"])
        # their optimizer state stays empty, which a resume must accept (it refused "missing optimizer state")
        with pytest.raises(KeyboardInterrupt):
            pretrain(mc, cfg, None, tmp_path / f"{optimizer}-cut", batches=source(stop=3))
        resumed = pretrain(mc, cfg, None, tmp_path / f"{optimizer}-cut", batches=source(), resume=True)
        assert resumed.start_step == 2 and resumed.losses == full.losses[2:]


def test_bf16_autocast_trains_on_cpu(tmp_path: Path) -> None:
    summary = run(tmp_path / "bf16", precision="bf16", max_steps=4, lr=3e-3)
    assert all(torch.isfinite(torch.tensor(summary.losses)))
    assert summary.eval["eval_mlm_loss"] > 0


@pytest.mark.parametrize(
    ("caps", "native"),
    [
        ({"architecture": "x86_64", "avx2": True, "avx512_f": False, "avx512_bf16": False, "amx_bf16": False}, False),
        ({"architecture": "x86_64", "avx512_f": True, "avx512_bf16": False, "amx_bf16": False}, False),  # emulated
        ({"architecture": "x86_64", "avx512_f": True, "avx512_bf16": True, "amx_bf16": False}, True),
        ({"architecture": "x86_64", "avx512_f": True, "avx512_bf16": False, "amx_bf16": True}, True),
    ],
)
def test_auto_precision_is_bf16_only_where_the_cpu_has_bf16_units(monkeypatch, caps, native) -> None:  # noqa: ANN001
    from litebert.train.precision import native_bf16, resolve_precision

    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: caps)
    cpu = torch.device("cpu")
    assert native_bf16(cpu) is native
    assert resolve_precision("auto", cpu) == ("bf16" if native else "fp32")
    assert resolve_precision("fp32", cpu) == "fp32"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_precision("bf16", cpu) == "bf16"  # an explicit choice is kept ...
    slow = [w for w in caught if "without bf16 units" in str(w.message)]
    assert len(slow) == (0 if native else 1)  # ... with a warning where it is slow


@pytest.mark.parametrize("native", [False, True])
def test_a_run_saves_the_precision_auto_resolved_to(tmp_path: Path, monkeypatch, native: bool) -> None:  # noqa: ANN001
    import litebert.train.precision

    monkeypatch.setattr(litebert.train.precision, "native_bf16", lambda device: native)
    summary = run(tmp_path / "auto", precision="auto", max_steps=2, save_every=2)
    saved = json.loads((summary.run_dir / "run_config.json").read_text())["train"]
    assert saved["precision"] == ("bf16" if native else "fp32")


MARK = 5  # every masked label of a poisoned batch (random labels are never all one id)


def _poisoned_from_step_4(monkeypatch, poison):  # noqa: ANN001, ANN202
    """A SyntheticBatches class whose 4th batch on makes the MLM loss poison(loss, logits). The batches carry the
    mark themselves: they are built ahead of the step that uses them, on another thread."""
    import litebert.model.heads

    real_loss = litebert.model.heads.mlm_loss

    def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = real_loss(logits, labels)
        return poison(loss, logits) if bool((labels == MARK).all()) else loss

    class Poisoned(SyntheticBatches):
        def __iter__(self):  # noqa: ANN204
            for batch in super().__iter__():
                if self.index >= 4:  # the batch of step 4 diverges
                    batch = {**batch, "masked_labels": torch.full_like(batch["masked_labels"], MARK)}
                yield batch

    monkeypatch.setattr(litebert.model.heads, "mlm_loss", mlm_loss)
    return Poisoned


def test_nan_loss_stops_and_names_the_last_good_checkpoint(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    Poisoned = _poisoned_from_step_4(monkeypatch, lambda loss, logits: loss * float("nan"))
    batches = Poisoned(vocab_size=V, seq_len=T, batch_size=4)
    with pytest.raises(NonFiniteLossError, match=r"at step 4.*step_00000002"):
        pretrain(model_config(), train_config(save_every=2), None, tmp_path / "nan", batches=batches)
    assert [p.name for p in list_checkpoints(tmp_path / "nan")] == ["step_00000002"]
    # diverging before the first checkpoint: nothing to resume from
    with pytest.raises(
        NonFiniteLossError,
        match=r"pretraining loss nan at step 4: stopped before updating the weights; start again with a lower --lr",
    ):
        pretrain(
            model_config(),
            train_config(save_every=10),
            None,
            tmp_path / "nan2",
            batches=Poisoned(vocab_size=V, seq_len=T, batch_size=4),
        )


def test_a_nan_gradient_under_a_finite_loss_stops_before_the_weights_change(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    # LAMB applied it: every weight became NaN, step 4's checkpoint kept them, and step 5's NaN loss named that
    # checkpoint as the last good one
    nan_gradient = lambda loss, logits: loss + torch.sqrt(logits.sum() * 0)  # value + 0, gradient NaN
    Poisoned = _poisoned_from_step_4(monkeypatch, nan_gradient)
    batches = Poisoned(vocab_size=V, seq_len=T, batch_size=4)
    with pytest.raises(NonFiniteLossError, match=r"gradient norm nan \(loss .*\) at step 4.*step_00000002"):
        pretrain(model_config(), train_config(save_every=2), None, tmp_path / "nan", batches=batches)
    assert [p.name for p in list_checkpoints(tmp_path / "nan")] == ["step_00000002"]


def test_refuses_existing_run_without_resume_and_foreign_model_config(tmp_path: Path) -> None:
    run(tmp_path / "r", max_steps=2)
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="already holds a run; pass --resume"):
        run(tmp_path / "r", max_steps=2)
    batches = SyntheticBatches(vocab_size=V, seq_len=T, batch_size=4)
    with pytest.raises(ValueError, match=r"model config differs.*hidden_size: 32 vs 48"):
        pretrain(
            model_config(hidden_size=48), train_config(max_steps=4), None, tmp_path / "r", batches=batches, resume=True
        )
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        run(tmp_path / "empty", resume=True)
    after = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    assert before == after  # nothing overwritten


def test_train_config_refuses_unknown_keys_and_wrong_types() -> None:
    with pytest.raises(ValueError, match=r"unknown TrainConfig field\(s\) \['learning_rate'\]"):
        TrainConfig.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match="TrainConfig.max_steps must be int, got '10'"):
        TrainConfig.from_dict({"max_steps": "10"})
    with pytest.raises(ValueError, match="TrainConfig.precision must be one of"):
        TrainConfig(precision="fp8")
    with pytest.raises(ValueError, match="TrainConfig.grad_checkpointing must be bool"):
        TrainConfig.from_dict({"grad_checkpointing": 1})
    for field in ("lr", "weight_decay", "max_grad_norm"):
        with pytest.raises(ValueError, match=f"TrainConfig.{field} must be a finite number, got nan"):
            TrainConfig(**{field: float("nan")})
    # 0 held-out batches passed validation, then stopped the run at its first evaluation ("no masked tokens")
    with pytest.raises(ValueError, match=r"TrainConfig.eval_batches must be >= 1 or null .*got 0"):
        TrainConfig(eval_batches=0)
    # a negative seed passed validation, wrote the run directory, then failed in numpy ("expected non-negative integer")
    with pytest.raises(ValueError, match=r"TrainConfig.seed must be an integer in \[0, 2\*\*63\), got -1"):
        TrainConfig(seed=-1)


def test_warmup_follows_max_steps_unless_given() -> None:
    from litebert.train.job import PretrainJob

    assert TrainConfig(max_steps=125_000).resolved_warmup_steps == 3125  # the paper's
    assert PretrainJob().train.resolved_warmup_steps == 160  # the embedded default run: 10% of 1,600
    job = PretrainJob()
    assert TrainConfig(**{**job.train.to_dict(), "max_steps": 20}).resolved_warmup_steps == 2
    assert TrainConfig(max_steps=20, warmup_steps=5).resolved_warmup_steps == 5
    with pytest.raises(ValueError, match=r"warmup_steps \(100\) exceeds max_steps \(3\)"):
        TrainConfig(max_steps=3, warmup_steps=100)
    with pytest.raises(ValueError, match=r"TrainConfig.warmup_ratio must be in \[0, 1\]"):
        TrainConfig(warmup_ratio=1.5)


def test_evaluate_counts_and_baselines() -> None:
    from types import SimpleNamespace

    from litebert.train import evaluate

    class Constant(torch.nn.Module):
        """Always predicts token 7 and SOP label 1; losses fixed."""

        def forward(self, masked_labels: torch.Tensor, sentence_order_label: torch.Tensor, **_: torch.Tensor):
            logits = torch.zeros(*masked_labels.shape, 10)
            logits[..., 7] = 1.0
            sop = torch.tensor([[0.0, 1.0]]).expand(len(sentence_order_label), 2)
            return SimpleNamespace(
                mlm_logits=logits, sop_logits=sop, mlm_loss=torch.tensor(2.0), sop_loss=torch.tensor(0.5)
            )

    batch = {
        "masked_labels": torch.tensor([[7, 7, 3, -100], [7, 5, -100, -100]]),
        "sentence_order_label": torch.tensor([1, 0]),
        "input_ids": torch.zeros(2, 4, dtype=torch.long),
    }
    result = evaluate(Constant(), [batch, batch], vocab_size=10)
    assert result["eval_mlm_acc"] == pytest.approx(3 / 5) and result["eval_masked_tokens"] == 10
    assert result["eval_majority_acc"] == pytest.approx(3 / 5)
    assert result["eval_unigram_acc"] == pytest.approx((3 / 5) ** 2 + 2 * (1 / 5) ** 2)
    assert result["eval_sop_acc"] == 0.5 and result["eval_sop_majority_acc"] == 0.5
    assert result["eval_loss"] == pytest.approx(2.5)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"inner_group_num": 2},
        {"num_hidden_groups": 2, "inner_group_num": 2},
        {"sharing": "none"},
        {"embedding_size": 128},
    ],
)
def test_train_flops_count_every_block_run(overrides):
    """The FLOPs logged per step are 3x the forward matmuls torch's own counter sees, grouped blocks included."""
    from torch.utils.flop_counter import FlopCounterMode

    from litebert.train.metrics import train_flops_per_sequence

    config = litebert.preset("tiny", vocab_size=500, **overrides)
    model = litebert.AlbertForPretraining(config).eval()
    g = torch.Generator().manual_seed(0)
    B, T, P = 2, 32, 5
    ids = torch.randint(5, 500, (B, T), generator=g)
    positions, labels = torch.randint(1, T, (B, P), generator=g), torch.randint(5, 500, (B, P), generator=g)
    with FlopCounterMode(display=False) as counter:
        model(ids, masked_positions=positions, masked_labels=labels, sentence_order_label=torch.zeros(B).long())
    assert train_flops_per_sequence(config, T, P) * B == 3 * counter.get_total_flops()


def test_throughput_times_training_steps_only(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    # Evaluation and checkpoints ran inside the next log window: the step after them read ~80x slower.
    import importlib

    from litebert.train import loop

    pretraining = importlib.import_module("litebert.train.pretrain")  # the module (the package exports the function)
    clock = [0.0]
    monkeypatch.setattr(loop.time, "perf_counter", lambda: clock[0])

    def costing(seconds: float, real):  # noqa: ANN001, ANN202
        def timed(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            clock[0] += seconds
            return real(*args, **kwargs)

        return timed

    monkeypatch.setattr(loop, "optimizer_step", costing(1.0, loop.optimizer_step))
    monkeypatch.setattr(pretraining, "_eval", costing(100.0, pretraining._eval))
    monkeypatch.setattr(pretraining, "save_training_state", costing(50.0, pretraining.save_training_state))
    run(tmp_path / "timed")
    records = [json.loads(line) for line in (tmp_path / "timed" / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r["split"] == "train"]
    assert speeds == [4 * T] * 6  # a batch of 4 x 32 real tokens a (fake) second, after evaluations and saves too


def test_step_tokens_are_the_real_ones_not_the_padding() -> None:
    from litebert.train.pretrain import prepare_batch

    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    labels = torch.tensor([[3, -100], [4, 5]])
    batch = {
        "input_ids": torch.ones(2, 8, dtype=torch.long),
        "attention_mask": mask,
        "masked_labels": labels,
        "sentence_order_label": torch.tensor([0, -100]),
    }
    prepared, host = prepare_batch(batch)
    assert host.tolist() == [2, 13, 3, 1]  # sequences, real tokens, masked positions, pair labels
    assert prepared["real_tokens"].index.tolist() == [*range(8), 8, 9, 10, 11, 12]  # where the model computes
    full, host = prepare_batch({**batch, "attention_mask": torch.ones_like(mask)})
    assert "attention_mask" not in full and "real_tokens" not in full and host[1] == 16  # nothing to unpad
