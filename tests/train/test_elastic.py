"""torchrun as a cluster runs it, on CPU with gloo: `litebert pretrain ... --resume auto` under --max-restarts after a
worker is SIGKILLed (DDP and FSDP), after the launcher is stopped with SIGTERM (a preemption) and started again, two
launches of --nnodes 2 on loopback against one node, a changed world size, and ranks that see different data.

Every launch is bounded: on timeout its whole process group is killed and the test fails, so a hang is a failure,
never a stuck suite. A worker is killed from inside (WORKER below) when it reads a given training batch on its first
start, so the kill falls between two checkpoints on any machine, however loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from litebert.data import DataConfig, build

pytestmark = pytest.mark.slow

TINY = {
    "num_layers": 2,
    "hidden_size": 32,
    "embedding_size": 16,
    "intermediate_size": 64,
    "num_heads": 2,
    "hidden_dropout": 0.0,
    "attention_dropout": 0.0,
    "classifier_dropout": 0.0,
}
SETTINGS = DataConfig(max_seq_length=64, max_predictions_per_seq=10, masking="dynamic", eval_fraction=0.25)
STEPS, SAVE_EVERY, KILL_AT = 12, 4, 7  # killed in step 7: after the step-4 checkpoint, before step 8
LIMIT_S = 600  # one launch, restarts included

# Runs `litebert pretrain`; on its first start (TORCHELASTIC_RESTART_COUNT 0) the rank named by LB_KILL_RANK kills
# itself with LB_SIGNAL, or sends it to its launcher (LB_KILL_PARENT), in step LB_KILL_AT (taking its batch). On a
# restart, the rank named by LB_ELSEWHERE_RANK works in the directory LB_ELSEWHERE, where relative paths name other
# files (a node whose shared filesystem is gone). Each start leaves a file start_<restart>_<rank> in LB_MARKS.
WORKER = """
import os, signal, sys, time
from pathlib import Path
from litebert.cli import main
from litebert.train.prefetch import Prefetcher

env, args = os.environ, sys.argv[1:]
rank, restart = env["RANK"], env.get("TORCHELASTIC_RESTART_COUNT", "0")
Path(env["LB_MARKS"], f"start_{restart}_{rank}").touch()
if env.get("LB_KILL_AT") and rank == env.get("LB_KILL_RANK", "1") and restart == "0":
    take, stop, taken = Prefetcher.__next__, int(env["LB_KILL_AT"]), [0]
    sig = getattr(signal, env.get("LB_SIGNAL", "SIGKILL"))
    def killing(self):
        item = take(self)
        taken[0] += 1
        if taken[0] == stop:  # the step that takes this batch runs (batches are built ahead on a thread)
            os.kill(os.getppid() if env.get("LB_KILL_PARENT") else os.getpid(), sig)
            time.sleep(30)  # in the step it was in when the signal came back from the launcher
        return item
    Prefetcher.__next__ = killing
if env.get("LB_ELSEWHERE") and rank == env.get("LB_ELSEWHERE_RANK") and restart != "0":
    os.chdir(env["LB_ELSEWHERE"])
sys.exit(main(args))
"""


@pytest.fixture(scope="module")
def data_dir(tokenizer_dir: Path, moby_dick: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:4]
    out = tmp_path_factory.mktemp("data") / "data"
    build(chapters, tokenizer_dir, out, SETTINGS, progress=False)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:  # noqa: ANN001
    """The worker script and the job's --config file."""
    root = tmp_path_factory.mktemp("elastic")
    (root / "worker.py").write_text(WORKER)
    (root / "job.json").write_text(json.dumps({"model": TINY, "train": {"eval_batches": 2, "log_every": 1}}))
    return root


def _pretrain_args(files: Path, data: Path, out: Path, parallel: str = "ddp") -> list[str]:
    return [
        str(files / "worker.py"),
        "pretrain",
        "--config",
        str(files / "job.json"),
        "--data",
        str(data),
        "--out",
        str(out),
        "--max-steps",
        str(STEPS),
        "--batch-size",
        "8",
        "--save-every",
        str(SAVE_EVERY),
        "--eval-every",
        "100",
        "--precision",
        "fp32",
        "--parallel",
        parallel,
        "--no-progress",
        "--resume",
        "auto",
    ]


def _env(marks: Path, **extra: str) -> dict[str, str]:
    marks.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LB_", "TORCHELASTIC_"))}
    return {**env, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "LB_MARKS": str(marks), **extra}


def _start(launcher: list[str], args: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", *launcher, *args]
    return subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _wait(proc: subprocess.Popen, limit_s: float = LIMIT_S) -> tuple[int, str, float]:
    """(return code, output, seconds); a launch still running at `limit_s` is killed with its workers: a failure."""
    t0 = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the launch hung for {limit_s} s and was killed:\n{out[-4000:]}")
    return proc.returncode, out, time.monotonic() - t0


def _torchrun(
    args: list[str], env: dict[str, str], nproc: int = 2, restarts: int = 1, cwd: Path | None = None
) -> tuple[int, str, float]:
    launcher = ["--standalone", "--nproc-per-node", str(nproc), "--max-restarts", str(restarts)]
    return _wait(_start(launcher, args, env, cwd))


def _losses(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if r.get("split") == "train"]


def _same_model(a: Path, b: Path) -> bool:
    x, y = load_file(a / "model" / "model.safetensors"), load_file(b / "model" / "model.safetensors")
    return x.keys() == y.keys() and all((x[k] == y[k]).all() for k in x)


@pytest.fixture(scope="module")
def uninterrupted(files: Path, data_dir: Path, tmp_path_factory) -> dict[str, Path]:  # noqa: ANN001
    """One run per strategy, two processes on one node, not interrupted: what every other run must reproduce."""
    runs = {}
    for parallel in ("ddp", "fsdp"):
        out = tmp_path_factory.mktemp("ref") / parallel
        rc, log, _ = _torchrun(_pretrain_args(files, data_dir, out, parallel), _env(out.parent / "marks"))
        assert rc == 0, log[-4000:]
        assert [s for s, _ in _losses(out)] == list(range(1, STEPS + 1))
        runs[parallel] = out
    return runs


@pytest.mark.parametrize(("parallel", "victim"), [("ddp", "1"), ("fsdp", "0")])
def test_a_worker_killed_mid_run_is_restarted_and_the_job_ends_as_if_uninterrupted(
    files: Path, data_dir: Path, uninterrupted: dict[str, Path], tmp_path: Path, parallel: str, victim: str
) -> None:
    out, marks = tmp_path / "run", tmp_path / "marks"
    env = _env(marks, LB_KILL_AT=str(KILL_AT), LB_KILL_RANK=victim)
    rc, log, _ = _torchrun(_pretrain_args(files, data_dir, out, parallel), env)
    assert rc == 0, log[-4000:]
    assert {p.name for p in marks.iterdir()} == {"start_0_0", "start_0_1", "start_1_0", "start_1_1"}  # restarted
    assert _losses(out) == _losses(uninterrupted[parallel])  # steps 5..8 trained twice, logged once
    assert _same_model(out, uninterrupted[parallel])
    # the same command once more: the job is finished, nothing is trained or written
    before = (out / "metrics.jsonl").read_text()
    rc, log, _ = _torchrun(_pretrain_args(files, data_dir, out, parallel), _env(marks))
    assert rc == 0 and "the job is finished (step 12" in log, log[-4000:]
    assert (out / "metrics.jsonl").read_text() == before


def test_a_launcher_stopped_by_sigterm_is_continued_by_the_same_command(
    files: Path, data_dir: Path, uninterrupted: dict[str, Path], tmp_path: Path
) -> None:
    """A preemption: the scheduler sends SIGTERM to torchrun, which passes it to its workers and exits; the job is
    started again (a requeue) with the very same command and continues from the newest checkpoint."""
    out, marks = tmp_path / "run", tmp_path / "marks"
    args = _pretrain_args(files, data_dir, out)
    env = _env(marks, LB_KILL_AT=str(KILL_AT), LB_KILL_RANK="0", LB_KILL_PARENT="1", LB_SIGNAL="SIGTERM")
    rc, log, _ = _torchrun(args, env, restarts=0)
    assert rc != 0, log[-4000:]
    steps = [int(p.name.split("_")[1]) for p in (out / "checkpoints").iterdir() if p.name.startswith("step_")]
    assert SAVE_EVERY in steps and max(steps) < STEPS  # stopped mid-run, after a checkpoint
    rc, log, _ = _torchrun(args, _env(marks), restarts=0)
    assert rc == 0, log[-4000:]
    assert _losses(out) == _losses(uninterrupted["ddp"])
    assert _same_model(out, uninterrupted["ddp"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_on_loopback_train_as_one_node(
    files: Path, data_dir: Path, uninterrupted: dict[str, Path], tmp_path: Path
) -> None:
    """Two launches of `torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d` (two machines, here one on
    loopback) sharing --out and --data: the same losses and weights as one node of two processes."""
    out, port = tmp_path / "run", _free_port()
    launcher = [
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "two-nodes",
        "--local-addr",
        "127.0.0.1",
    ]
    env = _env(tmp_path / "marks")
    nodes = [_start(launcher, _pretrain_args(files, data_dir, out), env) for _ in range(2)]
    results = [_wait(node) for node in nodes]
    for rc, log, _ in results:
        assert rc == 0, log[-4000:]
    assert _losses(out) == _losses(uninterrupted["ddp"])
    assert _same_model(out, uninterrupted["ddp"])


def test_a_changed_world_size_is_refused_on_every_rank(files: Path, data_dir: Path, tmp_path: Path) -> None:
    """Saved by 4 processes, started again with 2: refused by every rank at once, naming both counts."""
    out = tmp_path / "run"
    args = _pretrain_args(files, data_dir, out)
    env = _env(tmp_path / "marks", LB_KILL_AT="3", LB_KILL_RANK="3")  # killed after the step-2 checkpoint
    args[args.index("--save-every") + 1] = "2"
    rc, log, _ = _torchrun(args, env, nproc=4, restarts=0)
    assert rc != 0 and (out / "checkpoints" / "step_00000002").is_dir(), log[-4000:]
    rc, log, seconds = _torchrun(args, _env(tmp_path / "marks"), nproc=2, restarts=0)
    assert rc != 0
    refusal = "saved by 4 process(es), continued by 2; exact resume needs the same world size"
    assert refusal in log and "error (rank 1)" in log, log[-4000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_00000002"]  # nothing written
    assert seconds < LIMIT_S / 2


def test_a_restarted_worker_that_cannot_continue_fails_the_whole_job_fast(
    files: Path, data_dir: Path, tmp_path: Path
) -> None:
    """After the restart rank 1 sees other data than rank 0 at the same path (--data is relative, and rank 1 works
    in another directory: a node whose shared filesystem is gone). Every rank refuses at once, the job ends with
    an error naming what differs, and no rank waits in a collective."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    (here / "data").symlink_to(data_dir)
    shutil.copytree(data_dir, elsewhere / "data")
    manifest = json.loads((elsewhere / "data" / "manifest.json").read_text())
    manifest["settings"]["seed"] += 1  # another build: another identity
    (elsewhere / "data" / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "run"
    args = _pretrain_args(files, Path("data"), out)
    env = _env(
        tmp_path / "marks",
        LB_KILL_AT=str(KILL_AT),
        LB_KILL_RANK="1",
        LB_ELSEWHERE=str(elsewhere),
        LB_ELSEWHERE_RANK="1",
    )
    rc, log, seconds = _torchrun(args, env, restarts=1, cwd=here)
    assert rc != 0, log[-4000:]
    assert (tmp_path / "marks" / "start_1_0").exists()  # the refusal came after the restart
    said = "the ranks see different data manifests at data: rank(s) 0 "
    assert f"error: {said}" in log and f"error (rank 1): {said}" in log, log[-4000:]
    assert "must be on a filesystem every node shares" in log
    assert seconds < LIMIT_S / 2
