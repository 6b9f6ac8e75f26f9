"""Fine-tuning refuses what would train a NaN model or fail later without a word: targets that do not fit float32,
a loss that goes non-finite (stopped, no best/ of NaN weights), an edited finetune.json, RACE questions of an odd
number of options (the odd one named)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.finetune import finetune
from litebert.finetune.saved import load_finetuned
from litebert.finetune.tasks.race import read_race
from litebert.train import NonFiniteLossError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def _scores(path: Path, values: list[str], header: str = "sentence1\tsentence2\tscore") -> str:
    rows = [f"A man plays a flute {i}.\tA woman sings {i}.\t{v}" for i, v in enumerate(values)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


@pytest.mark.parametrize("task", ["regression", "similarity"])
def test_a_target_that_does_not_fit_float32_is_refused_with_file_and_line(ft_cfg, tmp_path, task):
    # 1e308 passed the finite check, became inf in float32 and trained a NaN model with exit 0
    data = _scores(tmp_path / "sts.tsv", ["1.0", "2.5", "1e308", "0.5"])
    cfg = ft_cfg(tmp_path / "out", task=task, train=data, dev=data, max_steps=1)
    with pytest.raises(
        ValueError,
        match=rf"{data}: line 4: (label|score) '1e308' does not fit float32 \(at most "
        r"3\.403e\+38 in magnitude\)",
    ):
        finetune(cfg)
    assert not (tmp_path / "out").exists()


def test_a_loss_that_goes_non_finite_stops_the_run_before_best_holds_nan_weights(ft_cfg, tmp_path, capsys):
    # Targets within float32 whose squared error is not: the loss is inf at the first step. The run used to go on,
    # save best/ with NaN weights and exit 0.
    data = _scores(tmp_path / "big.tsv", ["3e38", "-3e38", "2e38", "1e38"])
    cfg = ft_cfg(tmp_path / "out", task="regression", train=data, dev=data, max_steps=3, eval_every=1)
    with pytest.raises(
        NonFiniteLossError, match=r"fine-tuning loss inf at step 1: stopped before updating the weights"
    ):
        finetune(cfg)
    assert not (tmp_path / "out" / "best").exists() and not (tmp_path / "out" / "results.json").exists()
    argv = [
        "finetune",
        "--task",
        "regression",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        cfg.init,
        "--out",
        str(tmp_path / "cli"),
        "--max-steps",
        "3",
        "--eval-every",
        "1",
        "--max-seq-length",
        "32",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: fine-tuning loss inf at step 1" in err and "Traceback" not in err
    assert not (tmp_path / "cli" / "best").exists()


@pytest.fixture(scope="module")
def finetuned(model_dir, tmp_path_factory) -> Path:
    from litebert.finetune import FinetuneConfig

    out = tmp_path_factory.mktemp("ft")
    data = str(FIXTURES / "sst2.tsv")
    finetune(
        FinetuneConfig(
            task="classification",
            train=data,
            dev=data,
            init=str(model_dir),
            out=str(out),
            max_steps=1,
            batch_size=4,
            max_seq_length=32,
        )
    )
    return out / "best"


EDITS = [
    ({"labels": 5}, r"field 'state.labels' must be a non-empty list of label names, got 5"),
    ({"labels": ["0", "1", "2"]}, r"field 'num_outputs' is 2, but 'state' gives task 'classification' 3 outputs"),
    ({}, r"field 'state' lacks what task 'classification' needs"),
]


@pytest.mark.parametrize(("state", "why"), EDITS, ids=["labels-5", "three-labels", "no-labels"])
def test_an_edited_finetune_json_is_named(finetuned, tmp_path, capsys, state, why):
    import shutil

    model = tmp_path / "best"
    shutil.copytree(finetuned, model)
    meta = json.loads((model / "finetune.json").read_text())
    (model / "finetune.json").write_text(json.dumps({**meta, "state": state}))
    with pytest.raises(ValueError, match=f"{model / 'finetune.json'}: {why}"):
        load_finetuned(model)
    assert (
        main(["predict", "--init", str(model), "--data", str(FIXTURES / "sst2.tsv"), "--out", str(tmp_path / "p.json")])
        == 2
    )
    err = capsys.readouterr().err
    assert "finetune.json: field" in err and "Traceback" not in err


def test_the_race_question_with_an_odd_number_of_options_is_the_one_named(tmp_path):
    # The check compared every question with the first: when the first was the odd one, it named the second.
    articles = [
        {
            "id": "high1.txt",
            "article": "A text.",
            "questions": ["Why?", "Who?"],
            "answers": ["A", "B"],
            "options": [["a", "b", "c"], ["a", "b", "c", "d"]],
        },
        {
            "id": "high2.txt",
            "article": "More text.",
            "questions": ["What?"],
            "answers": ["C"],
            "options": [["a", "b", "c", "d"]],
        },
    ]
    path = tmp_path / "race.json"
    path.write_text(json.dumps(articles))
    with pytest.raises(
        ValueError,
        match=rf"{path} \(article 0\): question 0 \(id 'high1.txt-0'\) has 3 options, but "
        "2 of the 3 questions have 4; every question needs the same number",
    ):
        read_race(path)
