"""Checkpoint files (atomic, verified, pruned), metrics JSONL and `litebert plot`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from litebert.cli import main
from litebert.train.checkpoint import (
    best_checkpoint,
    latest_checkpoint,
    list_checkpoints,
    load_trainer_state,
    save_checkpoint,
    verify_checkpoint,
)
from litebert.train.metrics import MetricsLogger, plot_run, read_metrics


def _save(run: Path, step: int, metric: float | None = None, keep_last: int = 2) -> Path:
    def write_model(d: Path) -> None:
        (d / "model.safetensors").write_bytes(bytes([step % 256]) * 64)

    state = {"step": step, "rng": torch.get_rng_state(), "data": {"batch": step}}
    return save_checkpoint(run, step, write_model=write_model, trainer_state=state, metric=metric, keep_last=keep_last)


def test_checkpoints_keep_last_k_and_best(tmp_path: Path) -> None:
    for step, metric in ((1, 5.0), (2, 1.0), (3, 4.0), (4, 3.0), (5, None)):
        _save(tmp_path, step, metric)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000002", "step_00000004", "step_00000005"]
    assert best_checkpoint(tmp_path).name == "step_00000002"
    assert latest_checkpoint(tmp_path).name == "step_00000005"
    state = load_trainer_state(latest_checkpoint(tmp_path))
    assert state["step"] == 5 and state["data"] == {"batch": 5} and torch.equal(state["rng"], torch.get_rng_state())


def test_corrupt_or_incomplete_checkpoints_are_skipped(tmp_path: Path) -> None:
    good = _save(tmp_path, 1, keep_last=5)
    bad = _save(tmp_path, 2, keep_last=5)
    (bad / "model.safetensors").write_bytes(b"\0" * 64)  # bit rot / a torn copy
    with pytest.raises(ValueError, match="checksum mismatch"):
        verify_checkpoint(bad)
    with pytest.warns(UserWarning, match="checksum mismatch"):
        assert latest_checkpoint(tmp_path) == good
    # A directory left by a kill during the rename window has no marker: never used, removed on next save.
    partial = tmp_path / "checkpoints" / "step_00000003"
    partial.mkdir()
    (tmp_path / "checkpoints" / ".tmp-step_00000004-999").mkdir()
    with pytest.raises(ValueError, match="incomplete checkpoint"):
        verify_checkpoint(partial)
    with pytest.warns(UserWarning):
        assert latest_checkpoint(tmp_path) == good
    _save(tmp_path, 5, keep_last=5)
    assert not (tmp_path / "checkpoints" / ".tmp-step_00000004-999").exists()
    assert not partial.exists()  # incomplete and older than the newest complete one: removed too
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000001", "step_00000002", "step_00000005"]


def test_metrics_jsonl_resume_truncation_and_plot(tmp_path: Path) -> None:
    log = MetricsLogger(tmp_path)
    for step in range(1, 6):
        log.log({"step": step, "split": "train", "loss": 5.0 / step, "lr": 1e-3, "mlm_acc": 0.1 * step})
    log.log({"step": 5, "split": "eval", "eval_loss": 2.0, "eval_mlm_acc": 0.3})
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "lo\n')  # cut by a kill, then resumed: truncation drops it
    log.truncate_after(3)  # resumed from step 3: steps 4-5 will be logged again
    log.log({"step": 4, "split": "train", "loss": float("nan"), "lr": 1e-3})
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 5, "lo')  # a line cut by SIGKILL
    assert all(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()[:-1])
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4] and records[-1]["loss"] is None
    paths = plot_run(tmp_path)
    assert {p.name for p in paths} >= {"loss.png", "lr.png", "mlm_acc.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "png")]) == 0
    assert (tmp_path / "png" / "loss.png").is_file()
    assert main(["plot", str(tmp_path / "nowhere")]) == 2


def test_malformed_metrics_lines_and_values_are_skipped_with_one_warning(tmp_path: Path) -> None:
    lines = [
        json.dumps({"step": 1, "split": "train", "loss": 4.0, "lr": 1e-3}),
        "[1, 2]",  # JSON, but no record
        "not json at all",
        json.dumps({"step": 2, "split": "train", "loss": "abc", "lr": 1e-3}),  # a hand edit
        json.dumps({"step": "three", "loss": 3.0}),
        "",
        json.dumps({"step": 3, "split": "train", "loss": 2.0, "lr": None}),  # null: a non-finite value, no warning
        json.dumps({"step": 3, "split": "eval", "eval_loss": 2.5, "eval_mlm_acc": [0.5]}),
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 4, "lo')  # and a cut last line
    message = (
        r"metrics.jsonl: 3 line\(s\) skipped that are not a JSON object with a numeric 'step' \(first: line 2\); "
        r"2 non-numeric value\(s\) ignored \(first: line 4, 'loss': \"abc\"\)$"
    )
    with pytest.warns(UserWarning, match=message) as caught:
        records = read_metrics(tmp_path)
    assert len(caught) == 1
    assert records == [
        {"step": 1, "split": "train", "loss": 4.0, "lr": 1e-3},
        {"step": 2, "split": "train", "lr": 1e-3},
        {"step": 3, "split": "train", "loss": 2.0, "lr": None},
        {"step": 3, "split": "eval", "eval_loss": 2.5},
    ]
    with pytest.warns(UserWarning, match="metrics.jsonl: 3 line"):
        paths = plot_run(tmp_path)  # numbers only: no category axis, no crash
    assert {p.name for p in paths} == {"loss.png", "lr.png"}


def test_plot_without_matplotlib_says_how_to_install(tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args, **kw):  # noqa: ANN002, ANN003, ANN202
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kw)

    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, "loss": 1.0}) + "\n")
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["plot", str(tmp_path)]) == 2
    assert "pip install matplotlib" in capsys.readouterr().err


def test_a_damaged_checkpoint_is_warned_of_once_per_process(tmp_path: Path) -> None:
    # a resume finds the latest checkpoint, then prunes at its next save: the CLI printed the same warning each time
    old = _save(tmp_path, 1, metric=1.0, keep_last=5)
    (_save(tmp_path, 2, metric=2.0, keep_last=5) / "complete.json").write_text("{bad")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert latest_checkpoint(tmp_path) == old
        _save(tmp_path, 3, metric=3.0, keep_last=5)
    assert [str(w.message).count("step_00000002/complete.json") for w in caught] == [1]


@pytest.mark.parametrize(
    "marker",
    [
        "{bad",
        "[]",
        '{"step": 1, "files": []}',
        '{"files": {}, "metric": "low"}',
        '{"step": 2, "metric": 2.0, "files": {}}',
    ],
)
def test_a_damaged_marker_skips_its_checkpoint_with_a_warning_naming_it(tmp_path: Path, marker: str) -> None:
    old = _save(tmp_path, 1, metric=1.0, keep_last=5)
    newest = _save(tmp_path, 2, metric=2.0, keep_last=5)
    good = (newest / "complete.json").read_text()
    (newest / "complete.json").write_text(marker)  # the newest: a resume takes the one before
    with pytest.raises(ValueError, match=r"step_00000002/complete.json: corrupt completion marker"):
        verify_checkpoint(newest)
    with pytest.warns(UserWarning, match=r"step_00000002/complete.json: corrupt completion marker"):
        assert latest_checkpoint(tmp_path) == old
    (newest / "complete.json").write_text(good)
    (old / "complete.json").write_text(marker)  # an older one: the next save must not crash on it
    with pytest.warns(UserWarning, match=r"step_00000001/complete.json: corrupt completion marker"):
        saved = _save(tmp_path, 3, metric=3.0, keep_last=5)
    assert verify_checkpoint(saved)["step"] == 3
    assert not old.exists()  # incomplete and older than the newest complete one: removed like the others
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000002", "step_00000003"]
