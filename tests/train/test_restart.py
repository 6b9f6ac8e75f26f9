"""One command that starts or continues (`litebert pretrain ... --resume auto`), in one process; and the pieces
of dist.py that make it hold under torchrun: threads fitted to the cores, a process group per start of the job,
decisions and inputs shared by every rank (the launches themselves: test_elastic.py, slow)."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist
from safetensors.torch import load_file

from litebert.cli import main
from litebert.data import DataConfig, build
from litebert.data.collate import PretrainingBatches
from litebert.train import dist

TINY = {"num_layers": 2, "hidden_size": 32, "embedding_size": 16, "intermediate_size": 64, "num_heads": 2}
pytestmark = pytest.mark.filterwarnings("ignore:resuming .* with changed settings")


@pytest.fixture(scope="module")
def data_dir(tokenizer_dir: Path, moby_dick: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:4]
    out = tmp_path_factory.mktemp("data") / "data"
    settings = DataConfig(max_seq_length=64, max_predictions_per_seq=10, masking="dynamic", eval_fraction=0.25)
    build(chapters, tokenizer_dir, out, settings, progress=False)
    return out


def _command(tmp_path: Path, data: Path, out: Path) -> list[str]:
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"model": TINY, "train": {"eval_batches": 2, "log_every": 1}}))
    return [
        "pretrain",
        "--config",
        str(config),
        "--data",
        str(data),
        "--out",
        str(out),
        "--max-steps",
        "4",
        "--batch-size",
        "4",
        "--save-every",
        "2",
        "--eval-every",
        "4",
        "--no-progress",
        "--resume",
        "auto",
    ]


def _interrupt_at_batch(monkeypatch: pytest.MonkeyPatch, stop: int) -> None:
    """Ctrl-C while reading training batch `stop` (a kill, as far as the run directory can tell)."""
    iterate = PretrainingBatches.__iter__

    def interrupted(self):  # noqa: ANN001, ANN202
        for batch in iterate(self):
            if self.split == "train" and self.batch >= stop:
                raise KeyboardInterrupt
            yield batch

    monkeypatch.setattr(PretrainingBatches, "__iter__", interrupted)


def _train_losses(run: Path) -> list[float]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if r.get("split") == "train"]


def test_resume_auto_starts_continues_finishes_and_refuses_another_job(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(_command(tmp_path, data_dir, whole)) == 0  # an empty --out: started
    assert json.loads((whole / "job.json").read_text())["data_dir"] == str(data_dir)  # also a --config file
    _interrupt_at_batch(monkeypatch, 3)  # after the step-2 checkpoint
    assert main(_command(tmp_path, data_dir, cut)) == 130
    monkeypatch.undo()
    assert [p.name for p in (cut / "checkpoints").iterdir()] == ["step_00000002"]
    assert main(_command(tmp_path, data_dir, cut)) == 0  # the same command continues it
    assert _train_losses(cut) == _train_losses(whole)
    weights = [load_file(r / "model" / "model.safetensors") for r in (whole, cut)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    capsys.readouterr()
    # once more: finished, nothing to do, the same summary
    before = (cut / "metrics.jsonl").read_text()
    with pytest.warns(UserWarning, match=r"the job is finished \(step 4; its model is .*model\): nothing to do"):
        assert main(_command(tmp_path, data_dir, cut)) == 0
    assert json.loads(capsys.readouterr().out)["steps"] == 4 and (cut / "metrics.jsonl").read_text() == before
    # flags that contradict the stored job are named, whatever else is said; nothing is written
    changed = ["--lr", "0.5", "--seed", "3", "--preset", "albert-base", "--max-steps", "6"]
    other = [*_command(tmp_path, data_dir, cut), *changed]
    assert main(other) == 2
    err = capsys.readouterr().err
    for said in (
        "--preset 'albert-base' (the run has 'tiny')",
        "--lr 0.5 (train.lr; the run has 0.00176)",
        "--seed 3 (train.seed; the run has 0)",
        "--max-steps 6 (train.max_steps; the run has 4)",
        "continue it with changed settings with --resume",
    ):
        assert said in err, said
    assert (cut / "metrics.jsonl").read_text() == before
    # how often it saves or logs is not the job: continued (here: finished already); other data is
    with pytest.warns(UserWarning, match="the job is finished"):
        assert main([*_command(tmp_path, data_dir, cut), "--save-every", "3"]) == 0
    assert main([*_command(tmp_path, tmp_path / "whole" / "nothing", cut)]) == 2
    assert "--data " in capsys.readouterr().err
    # an explicit --resume changes the job (a longer run); the old command then names what it contradicts
    assert main(["pretrain", "--out", str(cut), "--resume", "--max-steps", "5", "--no-progress"]) == 0
    assert main(_command(tmp_path, data_dir, cut)) == 2
    assert "--max-steps 4 (train.max_steps; the run has 5)" in capsys.readouterr().err
    (whole / "job.json").unlink()  # a run of an earlier litebert, or of pretrain() itself
    assert main(_command(tmp_path, data_dir, whole)) == 2
    assert "no record of its job (job.json" in capsys.readouterr().err


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> dict[Path, int]:
    """How often each file was hashed against a checkpoint's marker."""
    from litebert.train import checkpoint

    counts: dict[Path, int] = {}
    real = checkpoint._sha256

    def counted(path: Path) -> str:
        counts[path] = counts.get(path, 0) + 1
        return real(path)

    monkeypatch.setattr(checkpoint, "_sha256", counted)
    return counts


def test_resume_auto_hashes_the_checkpoint_it_continues_once(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = tmp_path / "cut"
    _interrupt_at_batch(monkeypatch, 3)  # after the step-2 checkpoint
    assert main(_command(tmp_path, data_dir, cut)) == 130
    monkeypatch.undo()
    resumed = cut / "checkpoints" / "step_00000002"
    counts = _count_hashes(monkeypatch)
    assert main(_command(tmp_path, data_dir, cut)) == 0  # planned, checked, loaded and continued
    read = {p: n for p, n in counts.items() if resumed in p.parents}
    assert (resumed / "trainer.pt") in read and (resumed / "model.safetensors") in read
    assert set(read.values()) == {1}, read
    counts.clear()
    with pytest.warns(UserWarning, match="the job is finished"):
        assert main(_command(tmp_path, data_dir, cut)) == 0
    newest = cut / "checkpoints" / "step_00000004"
    assert {n for p, n in counts.items() if newest in p.parents} == {1}


def test_fit_threads_caps_unless_chosen_and_then_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    cpu = torch.device("cpu")
    monkeypatch.setattr(dist.os, "sched_getaffinity", lambda _: {0, 1, 2, 3})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(4)
        monkeypatch.setattr(dist, "_THREADS_AT_IMPORT", 4)  # 4 threads were the default
        monkeypatch.setattr(dist, "_THREADS_CHECKED", False)
        with pytest.warns(UserWarning, match=r"x 4 threads each would exceed the 4 cores .* using 2 thread"):
            assert dist.fit_threads(2, cpu) == 2
        assert torch.get_num_threads() == 2
        assert dist.fit_threads(2, cpu) == 2  # said once: checked once per process
        monkeypatch.setattr(dist, "_THREADS_CHECKED", False)
        torch.set_num_threads(3)  # the caller's own choice is kept, with the figures
        with pytest.warns(UserWarning, match=r"x 3 threads each \(torch.set_num_threads\) = 6 threads on the 4 cores"):
            assert dist.fit_threads(2, cpu) == 3
        monkeypatch.setattr(dist, "_THREADS_CHECKED", False)
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # torchrun's default for several processes: cores left idle
        torch.set_num_threads(1)
        with pytest.warns(UserWarning, match="leave 2 of the 4 cores idle; OMP_NUM_THREADS=2 uses them"):
            dist.fit_threads(2, cpu)
    finally:
        torch.set_num_threads(before)


def test_each_start_of_a_job_meets_in_a_store_of_its_own() -> None:
    """torchrun's agent keeps one store for the whole job; a restarted worker must not take what the workers of an
    earlier start left there for its own (start_store)."""
    timeout = timedelta(seconds=30)
    agent = torch_dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)
    foreign = torch_dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)

    def start(world: int) -> dict[int, str]:
        got: dict[int, str] = {}

        def join(rank: int) -> None:
            client = torch_dist.TCPStore("127.0.0.1", agent.port, is_master=False, timeout=timeout)
            store = dist.start_store(client, rank, world, "127.0.0.1", timeout_s=30)
            if rank == 0:
                store.set("rank 0 was here", "1")
            store.wait(["rank 0 was here"])  # each rank reached rank 0's store
            got[rank] = "ok"
            store.add("joined", 1)
            while rank == 0 and store.add("joined", 0) < world:  # rank 0's store serves until every rank is done
                time.sleep(0.01)

        threads = [threading.Thread(target=join, args=(r,)) for r in (*range(1, world), 0)]  # rank 0 comes last
        for t in threads:
            t.start()
            if t is threads[0]:
                t.join(1)  # rank 1 finds the earlier start's address first
        for t in threads:
            t.join(30)
        return got

    assert start(2) == {0: "ok", 1: "ok"}
    dead = agent.get("litebert/store").decode()  # the first start's store, gone with its rank 0
    assert start(3) == {0: "ok", 1: "ok", 2: "ok"}  # rank 2 joins no earlier start: the same store all the same
    assert agent.get("litebert/store").decode() != dead
    agent.set("litebert/store", f"0000@127.0.0.1:{foreign.port}")  # a live store that is not this start's
    with pytest.raises(RuntimeError, match="no store of this start of the job came up in 1 s"):
        dist.start_store(agent, 1, 2, "127.0.0.1", timeout_s=1)


def test_check_same_everywhere_names_what_each_rank_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    env = dist.DistEnv(rank=0, world_size=3)
    seen = [("node-a", "identity 1"), ("node-a", "identity 1"), ("node-b", "no usable data")]
    monkeypatch.setattr(dist, "gather_objects", lambda value, env: seen)
    said = r"at D: rank\(s\) 0 \(node-a\), 1 \(node-a\) see 'identity 1'; rank\(s\) 2 \(node-b\) see 'no usable"
    with pytest.raises(ValueError, match=said + " data'; share it"):
        dist.check_same_everywhere("identity 1", env, "data manifests at D", "share it")
    monkeypatch.setattr(dist, "gather_objects", lambda value, env: [("a", 1)] * 3)
    dist.check_same_everywhere(1, env, "x", "y")
