"""Fine-tuning on the shared training loop: a non-finite loss stops the run before it is saved as best, and DDP
under torchrun trains what one process trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import litebert
from litebert.finetune import finetune
from litebert.train import NonFiniteLossError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_a_non_finite_loss_stops_fine_tuning_before_it_is_saved_as_best(ft_cfg, tmp_path, monkeypatch):
    import litebert.finetune.heads as heads

    real, calls = heads.SequenceHead.forward, [0]

    def diverging(self, backbone, batch):  # noqa: ANN001, ANN202
        out = real(self, backbone, batch)
        if "labels" in batch and self.training:
            calls[0] += 1
            if calls[0] >= 3:  # the loss of step 3 on
                out["loss"] = out["loss"] * float("nan")
        return out

    monkeypatch.setattr(heads.SequenceHead, "forward", diverging)
    data = str(FIXTURES / "sst2.tsv")
    with pytest.raises(NonFiniteLossError, match=r"fine-tuning loss nan at step 3: stopped before updating"):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=6, eval_every=1))
    saved = json.loads((tmp_path / "best" / "finetune.json").read_text())
    assert saved["config"]["max_steps"] == 6 and not (tmp_path / "results.json").exists()
    best = litebert.load(tmp_path / "best").state_dict()
    assert all(torch.isfinite(t).all() for t in best.values())  # the step-2 model, never a NaN one
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000002"]


@pytest.mark.slow
def test_fine_tuning_under_torchrun_trains_what_one_process_trains(model_dir, tmp_path):
    words = ["a fine film", "dull and long", "the whale was grand", "a sea of boredom"]
    rows = [f"{words[i % 4]} {i}\t{i % 2}" for i in range(16)]  # 16 = 4 full batches of 4 an epoch
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    data = str(tmp_path / "train.tsv")
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
        "6",
        "--eval-every",
        "3",
        "--batch-size",
        "4",
        "--lr",
        "1e-3",
        "--max-seq-length",
        "32",
    ]
    worker = tmp_path / "worker.py"
    worker.write_text(
        textwrap.dedent(f"""
        import sys, torch
        from litebert.cli import main
        torch.set_num_threads(1)
        sys.exit(main({[*argv, "--out", str(tmp_path / "ddp")]!r}))
    """)
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker)]
    proc = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    from litebert.cli import main

    torch.set_num_threads(1)
    assert main([*argv, "--out", str(tmp_path / "one")]) == 0
    ddp, one = (json.loads((tmp_path / d / "results.json").read_text())["history"] for d in ("ddp", "one"))
    # The model has no dropout and each batch of 4 splits into 2 x 2 rows: the same gradients, up to rounding.
    assert [h["step"] for h in ddp] == [3, 6]
    for a, b in zip(ddp, one, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
        assert a["dev"]["accuracy"] == pytest.approx(b["dev"]["accuracy"])
