"""`torchrun --nproc_per_node 2` on CPU (gloo): replicas stay identical and match one process on the same batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiny
import torch
from tiny import T, V

import litebert
from litebert.train import TrainConfig, pretrain
from litebert.train.synthetic import SyntheticBatches

GLOBAL_BATCH, STEPS = 8, 4


def model_config() -> litebert.ModelConfig:
    # No dropout: the ranks draw different masks than one process would.
    return tiny.model_config(hidden_dropout=0.0, attention_dropout=0.0, classifier_dropout=0.0)


def train_config(**kw: object) -> TrainConfig:
    base = dict(max_steps=STEPS, batch_size=GLOBAL_BATCH, lr=3e-3, warmup_steps=1, save_every=2, eval_every=100)
    return tiny.train_config({**base, "log_every": 1}, **kw)


def eval_source() -> SyntheticBatches:
    """A held-out pass whose batches split unevenly over 2 ranks is not needed here: sizes divide evenly."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    return SyntheticBatches(
        vocab_size=V, seq_len=T, batch_size=GLOBAL_BATCH, seed=5, num_batches=2, rank=rank, world_size=world
    )


def _launch(tmp_path: Path, parallel: str) -> tuple[list[dict], Path]:
    out = tmp_path / parallel
    worker = tmp_path / "worker.py"
    worker.write_text(
        textwrap.dedent(f"""
        import hashlib, json, os, signal, sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import test_dist as t
        from litebert.train import TrainingInterrupted
        from litebert.train.synthetic import Interrupted
        torch.set_num_threads(1)
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        def source(stop=None):
            inner = t.SyntheticBatches(vocab_size=t.V, seq_len=t.T, batch_size=t.GLOBAL_BATCH, rank=rank,
                                       world_size=world)
            return Interrupted(inner, stop)

        torch.distributed.init_process_group("gloo")  # ours: pretrain leaves it open for the hashing below
        cfg = t.train_config(parallel={parallel!r})
        # A held-out split that leaves rank 1 without a batch: FSDP refuses before training (DDP is unaffected).
        small = lambda: t.SyntheticBatches(vocab_size=t.V, seq_len=t.T, batch_size=t.GLOBAL_BATCH, seed=5,
                                           num_batches=1 - rank, rank=rank, world_size=world)
        try:
            t.pretrain(t.model_config(), cfg, None, {str(out)!r} + "-small", batches=source(), held_out=small)
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        summary = t.pretrain(t.model_config(), cfg, None, {str(out)!r}, batches=source(), held_out=t.eval_source)
        digest = hashlib.sha256()
        for name, p in sorted(summary.model.named_parameters()):
            full = p.full_tensor() if hasattr(p, "full_tensor") else p
            digest.update(name.encode() + full.detach().cpu().numpy().tobytes())
        # Stopped in step 4 (after the step-2 checkpoint), then resumed by the same two ranks.
        try:
            t.pretrain(t.model_config(), cfg, None, {str(out)!r} + "-cut", batches=source(stop=3))
        except KeyboardInterrupt:
            pass
        resumed = t.pretrain(t.model_config(), cfg, None, {str(out)!r} + "-cut", batches=source(), resume=True)
        # SIGTERM reaches rank 1 alone, while its batches are built: both ranks stop after the same step and save it
        class Signalled(t.SyntheticBatches):
            def __iter__(self):
                for batch in super().__iter__():
                    if rank == 1 and self.index == 3:
                        os.kill(os.getpid(), signal.SIGTERM)
                    yield batch
        term = t.train_config(parallel={parallel!r}, save_every=100)
        try:
            t.pretrain(t.model_config(), term, None, {str(out)!r} + "-term", batches=Signalled(vocab_size=t.V,
                       seq_len=t.T, batch_size=t.GLOBAL_BATCH, rank=rank, world_size=world))
            stopped = None
        except TrainingInterrupted as exc:
            stopped = exc.step
        after = t.pretrain(t.model_config(), term, None, {str(out)!r} + "-term", batches=source(), resume=True)
        with open({str(tmp_path)!r} + f"/rank{{rank}}.json", "w") as f:
            json.dump({{"losses": summary.losses, "digest": digest.hexdigest(), "eval": summary.eval,
                        "resumed": resumed.losses, "start": resumed.start_step, "refused": refused,
                        "stopped": stopped, "after": after.losses}}, f)
        torch.distributed.destroy_process_group()
        # Results are on disk: skip the interpreter's teardown. One CI run lost a rank to "terminate called
        # without an active exception" (not reproduced in 40 runs since), which pytorch/pytorch#90549 reports
        # from FSDP/gloo threads at exit; the failure message below says whether the ranks got this far.
        sys.stdout.flush(); sys.stderr.flush(); os._exit(0)
    """)
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    written = sorted(p.name for p in tmp_path.glob("rank*.json"))
    assert proc.returncode == 0, f"results written: {written}\n" + proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)], out


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_torchrun_two_processes_match_one_process(tmp_path: Path, parallel: str) -> None:
    ranks, out = _launch(tmp_path, parallel)
    assert ranks[0]["digest"] == ranks[1]["digest"]  # replicas identical after training
    assert ranks[0]["losses"] == ranks[1]["losses"]  # the logged loss is the global mean on every rank
    assert ranks[0]["start"] == 2 and ranks[0]["resumed"] == ranks[0]["losses"][2:]  # exact resume, sharded too
    stopped = ranks[0]["stopped"]  # SIGTERM to rank 1 alone: every rank stopped after the same step, saved it
    assert stopped is not None and stopped == ranks[1]["stopped"] and 1 <= stopped <= STEPS
    assert (out.parent / f"{parallel}-term" / "checkpoints" / f"step_{stopped:08d}" / "complete.json").is_file()
    assert ranks[0]["after"] == ranks[1]["after"] == ranks[0]["losses"][stopped:]
    if parallel == "fsdp":  # the same message on both ranks, before any step was trained
        assert ranks[0]["refused"] == ranks[1]["refused"]
        assert "too small to give each of the 2 ranks" in ranks[0]["refused"]
        assert not (tmp_path / "fsdp-small" / "checkpoints").exists()
    else:
        assert ranks[0]["refused"] == ""
    torch.set_num_threads(1)
    single = pretrain(
        model_config(),
        train_config(),
        None,
        tmp_path / "single",
        held_out=eval_source,
        batches=SyntheticBatches(vocab_size=V, seq_len=T, batch_size=GLOBAL_BATCH),
    )
    torch.testing.assert_close(torch.tensor(ranks[0]["losses"]), torch.tensor(single.losses), rtol=1e-5, atol=1e-6)
    for key in ("eval_mlm_loss", "eval_sop_loss", "eval_mlm_acc", "eval_masked_tokens"):
        assert ranks[0]["eval"][key] == pytest.approx(single.eval[key], rel=1e-5), key
    # Rank 0 alone wrote the run directory, and its final model is the single-process one (within float noise).
    assert (out / "checkpoints" / "step_00000004" / "complete.json").is_file()
    a, b = litebert.load(out / "model").state_dict(), litebert.load(single.model_dir).state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
