"""SIGTERM and Ctrl-C in real processes: pretraining and fine-tuning write a checkpoint at the step in hand, say
so and exit 128 + the signal; a second signal ends the process at once; the resumed run equals an uninterrupted
one bit for bit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import litebert
from litebert.cli import main
from litebert.train.checkpoint import list_checkpoints

TESTS = Path(__file__).parent
FIXTURES = TESTS.parent / "fixtures" / "tasks"

PRETRAIN = textwrap.dedent(
    """
    import sys, torch
    sys.path.insert(0, {tests!r})
    import test_train as t
    from tiny import SlowBatches
    from litebert.train import TrainingInterrupted
    torch.set_num_threads(1)

    try:  # each batch takes {pause} s: the parent signals mid-run
        t.pretrain(t.model_config(), t.train_config(max_steps=40, save_every=100), None, {out!r},
                   batches=SlowBatches({pause}), held_out=t.eval_source)
    except TrainingInterrupted as exc:
        print(f"stopped at {{exc.step}}", flush=True)
        sys.exit(exc.exit_code)
    """
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same kernels here as in the signalled process
    yield
    torch.set_num_threads(threads)


def _start(script: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _train_records(run: Path) -> int:
    path = run / "metrics.jsonl"
    return path.read_text().count('"split": "train"') if path.is_file() else 0


def _wait_for(condition, proc: subprocess.Popen, seconds: float = 120) -> None:  # noqa: ANN001
    deadline = time.time() + seconds
    while not condition() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signalled_pretraining_saves_its_step_and_resumes_bit_identical(tmp_path: Path, signum, code) -> None:  # noqa: ANN001
    import test_train as t

    out = tmp_path / "signalled"
    proc = _start(PRETRAIN.format(tests=str(TESTS), out=str(out), pause=0.2))
    _wait_for(lambda: _train_records(out) >= 3, proc)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    assert f"{signal.Signals(signum).name} received: finishing the pretraining step in hand" in stderr
    step = int(stdout.split("stopped at ")[1])
    assert [p.name for p in list_checkpoints(out)] == [f"step_{step:08d}"]  # save_every 100: the signal's own
    resumed = t.run(out, resume=True, max_steps=40, save_every=100)
    full = t.run(tmp_path / "full", max_steps=40, save_every=100)
    assert resumed.start_step == step and resumed.losses == full.losses[step:]
    a, b = load_file(out / "model" / "model.safetensors"), load_file(full.model_dir / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_second_signal_ends_the_process_at_once(tmp_path: Path) -> None:
    out = tmp_path / "twice"
    proc = _start(PRETRAIN.format(tests=str(TESTS), out=str(out), pause=1.0))  # a step waits ~1 s for its batch
    _wait_for(lambda: _train_records(out) >= 2, proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # the first one is handled: it asked to finish the step
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGINT, stderr  # ended by the signal itself, mid-step
    assert "send it again to exit at once" in stderr and not list_checkpoints(out)


FINETUNE = textwrap.dedent(
    """
    import sys, time, torch
    import litebert.finetune.batches as batches
    from litebert.cli import main
    torch.set_num_threads(1)
    every = batches.TrainBatches.__iter__

    def slow(self):
        for batch in every(self):
            time.sleep(0.1)
            yield batch

    batches.TrainBatches.__iter__ = slow
    sys.exit(main({argv!r}))
    """
)


def test_a_signalled_finetuning_saves_its_step_and_resumes_to_the_same_results(
    model_dir: Path, tmp_path: Path, capsys
) -> None:  # noqa: ANN001
    data = str(FIXTURES / "sst2.tsv")
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--max-steps",
        "30",
        "--eval-every",
        "4",
        "--save-every",
        "3",
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--max-seq-length",
        "32",
        "--seed",
        "3",
    ]
    out = tmp_path / "signalled"
    proc = _start(FINETUNE.format(argv=[*argv, "--out", str(out)]))
    _wait_for(lambda: any(p.name >= "step_00000006" for p in list_checkpoints(out)), proc)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "SIGTERM received: checkpoint" in stderr and "with --resume to continue" in stderr
    assert not (out / "results.json").exists()
    assert main([*argv, "--out", str(out)]) == 2  # a fresh run would overwrite it: refused
    assert "holds an interrupted fine-tuning run" in capsys.readouterr().err
    assert main([*argv, "--out", str(out), "--resume"]) == 0
    assert main([*argv, "--out", str(tmp_path / "full")]) == 0
    resumed, full = (json.loads((d / "results.json").read_text()) for d in (out, tmp_path / "full"))
    assert resumed["history"] and [(h["step"], h["train_loss"], h["dev"]) for h in resumed["history"]] == [
        (h["step"], h["train_loss"], h["dev"]) for h in full["history"]
    ]
    assert resumed["best"] == full["best"] and not (out / "checkpoints").exists()  # finished: none left
    a, b = (litebert.load(d / "best").state_dict() for d in (out, tmp_path / "full"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert main([*argv, "--out", str(out), "--resume", "--lr", "2e-3"]) == 2  # nothing left to resume
    assert "--resume given but it holds no usable fine-tuning checkpoint" in capsys.readouterr().err
