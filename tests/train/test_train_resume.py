"""`litebert pretrain --resume` and `--init-from` on real data: what a resume may change, which data it reads,
how a run killed while writing its final model is completed, and flags that would be ignored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file

from litebert.cli import main
from litebert.data import DataConfig, build

FAST = ["--max-steps", "3", "--batch-size", "4", "--save-every", "2", "--eval-every", "3", "--no-progress"]
TINY = {"num_layers": 2, "hidden_size": 32, "embedding_size": 16, "intermediate_size": 64, "num_heads": 2}
SETTINGS = DataConfig(max_seq_length=64, max_predictions_per_seq=10, masking="dynamic", eval_fraction=0.25)
pytestmark = pytest.mark.filterwarnings("ignore:resuming .* with changed settings")


@pytest.fixture(scope="module")
def chapters(moby_dick: Path) -> list[Path]:
    return sorted(moby_dick.glob("chapter_*.txt"))[:6]


@pytest.fixture(scope="module")
def data_dir(tokenizer_dir: Path, chapters: list[Path], tmp_path_factory) -> Path:  # noqa: ANN001
    out = tmp_path_factory.mktemp("data") / "data"
    build(chapters[:4], tokenizer_dir, out, SETTINGS, progress=False)
    return out


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> Path:  # noqa: ANN001
    path = tmp_path_factory.mktemp("config") / "job.json"
    path.write_text(json.dumps({"model": TINY, "train": {"eval_batches": 2}}))
    return path


@pytest.fixture(scope="module")
def finished_run(data_dir: Path, config_file: Path, tmp_path_factory) -> Path:  # noqa: ANN001
    """A run finished at step 3 (checkpoints 2 and 3); tests resume copies of it."""
    run = tmp_path_factory.mktemp("runs") / "run"
    assert main(["pretrain", "--config", str(config_file), "--data", str(data_dir), "--out", str(run), *FAST]) == 0
    return run


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def _step(run: Path) -> int:
    return json.loads((run / "eval.json").read_text())["step"]


def _same(a: Path, b: Path) -> bool:
    x, y = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return x.keys() == y.keys() and all((x[k] == y[k]).all() for k in x)


def test_an_extended_run_killed_while_writing_its_model_resumes_to_write_it(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from litebert.train import rundir as run_module

    run = _copy(finished_run, tmp_path / "run")
    real = run_module._write_model

    def killed_in_final_model(directory: Path, *args: object) -> None:
        if directory.name == "model.partial":  # checkpoints are written, the final model is not
            raise KeyboardInterrupt
        real(directory, *args)

    monkeypatch.setattr(run_module, "_write_model", killed_in_final_model)
    assert main(["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--no-progress"]) == 130
    monkeypatch.undo()
    step5 = run / "checkpoints" / "step_00000005"
    assert step5.is_dir() and _step(run) == 3  # the model first, then eval.json: the step-3 pair is left
    assert main(["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--no-progress"]) == 0
    assert _step(run) == 5 and _same(run / "model", step5)  # written alone, from the newest checkpoint
    capsys.readouterr()
    # a run of older litebert (eval.json written before the model) killed in between: the model is stale
    shutil.rmtree(run / "model")
    shutil.copytree(finished_run / "model", run / "model")
    assert main(["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--no-progress"]) == 0
    assert _same(run / "model", step5)
    assert main(["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--no-progress"]) == 2
    assert "already at step 5 of max_steps 5" in capsys.readouterr().err  # now it is finished


def test_resume_refuses_another_optimizer(finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = _copy(finished_run, tmp_path / "run")
    args = ["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--optimizer", "adamw", "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--resume needs the run's own optimizer (lamb), got adamw" in err and "--init RUN_DIR/model" in err
    assert not (run / "checkpoints" / "step_00000004").exists()


def test_resume_reads_the_run_s_own_data_from_any_directory(
    tmp_path: Path,
    data_dir: Path,
    tokenizer_dir: Path,
    chapters: list[Path],
    config_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    monkeypatch.chdir(data_dir.parent)
    run = tmp_path / "run"
    assert main(["pretrain", "--config", str(config_file), "--data", "data", "--out", str(run), *FAST]) == 0
    recorded = json.loads((run / "run_config.json").read_text())
    assert recorded["data_dir"] == str(data_dir.resolve())  # as typed ("data") it would mean another dir elsewhere
    # elsewhere, a "data" of other text: --resume still reads the run's own
    elsewhere = tmp_path / "elsewhere"
    build(chapters[4:], tokenizer_dir, elsewhere / "data", SETTINGS, progress=False)
    monkeypatch.chdir(elsewhere)
    assert main(["pretrain", "--out", str(run), "--resume", "--max-steps", "4", "--no-progress"]) == 0
    # other data given explicitly is refused: the resumed data position would point into it
    args = ["pretrain", "--out", str(run), "--resume", "--max-steps", "5", "--data", "data", "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "manifest.json: not the data this run started with" in err and "run_config.json" in err
    assert not (run / "checkpoints" / "step_00000005").exists()
    # the same data moved elsewhere is the same data, and so is data rebuilt from copies of the same text
    shutil.copytree(data_dir, tmp_path / "moved")
    args[-2] = str(tmp_path / "moved")
    assert main(args) == 0
    (tmp_path / "copies").mkdir()
    build(
        [shutil.copy(c, tmp_path / "copies") for c in chapters[:4]],
        tokenizer_dir,
        tmp_path / "rebuilt",
        SETTINGS,
        progress=False,
    )
    assert (
        main(
            [
                "pretrain",
                "--out",
                str(run),
                "--resume",
                "--max-steps",
                "6",
                "--data",
                str(tmp_path / "rebuilt"),
                "--no-progress",
            ]
        )
        == 0
    )


def test_init_from_refuses_a_tokenizer_that_does_not_extend_its_own(
    tmp_path: Path, model_dir: Path, chapters: list[Path], capsys: pytest.CaptureFixture
) -> None:
    from litebert.tokenizer.train import train_tokenizer

    other = tmp_path / "other_tokenizer"
    train_tokenizer(chapters[:2], other, vocab_size=400)  # fewer pieces than the model's: the vocabulary does not grow
    build(chapters[:2], other, tmp_path / "other_data", SETTINGS, progress=False)
    for inputs in (["--data", str(tmp_path / "other_data")], ["--corpus", str(chapters[0])]):
        out = tmp_path / "cont"
        args = ["pretrain", "--init-from", str(model_dir), "--tokenizer", str(other), *inputs, "--out", str(out), *FAST]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"--tokenizer {other}: its pieces do not extend those of {model_dir / 'spiece.model'}" in err
        assert not out.exists()  # refused before the corpus's data is built


def test_flags_that_would_be_ignored_are_refused(
    tmp_path: Path, data_dir: Path, model_dir: Path, chapters: list[Path], capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run"
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"data_dir": str(data_dir)}))
    cases = [
        (["--data", str(data_dir), "--corpus", str(chapters[0])], "'corpus' (--corpus) and 'data_dir' (--data)"),
        (["--config", str(config), "--corpus", str(chapters[0])], "'corpus' (--corpus) and 'data_dir' (--data)"),
        (["--init-from", str(model_dir), "--data", str(data_dir), "--preset", "albert-base"], "--preset) cannot"),
        (["--init-from", str(model_dir), "--data", str(data_dir), "--preset", "tiny"], "('tiny', --preset) cannot"),
    ]
    for flags, message in cases:
        assert main(["pretrain", *flags, "--out", str(out), *FAST]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()
    config.write_text(json.dumps({"init_from": str(model_dir), "preset": "albert-base"}))
    assert main(["pretrain", "--config", str(config), "--data", str(data_dir), "--out", str(out), *FAST]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and "'preset' ('albert-base', --preset) cannot be combined with 'init_from'" in err


def test_settings_a_resume_changed_are_kept_for_the_next_resume(
    finished_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = _copy(finished_run, tmp_path / "run")
    resume = ["pretrain", "--out", str(run), "--resume", "--no-progress"]
    assert main([*resume, "--max-steps", "4", "--lr", "0.001", "--save-every", "1"]) == 0
    recorded = json.loads((run / "run_config.json").read_text())["train"]
    assert (recorded["max_steps"], recorded["lr"]) == (4, 0.001) and _step(run) == 4
    assert main(resume) == 2  # a plain resume continues the run as it now is: finished at step 4 of 4
    assert "already at step 4 of max_steps 4" in capsys.readouterr().err


def test_a_refused_resume_leaves_run_config_as_it_was(
    finished_run: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = _copy(finished_run, tmp_path / "run")
    broken = shutil.copytree(data_dir, tmp_path / "data")
    (broken / "train" / "shard_00000" / "label.npy").unlink()  # refused when the batches are read, past _fill_run
    before = (run / "run_config.json").read_bytes()
    args = ["pretrain", "--out", str(run), "--resume", "--data", str(broken), "--max-steps", "6", "--lr", "0.5"]
    assert main([*args, "--no-progress"]) == 2
    assert "label.npy: missing" in capsys.readouterr().err
    assert (run / "run_config.json").read_bytes() == before
