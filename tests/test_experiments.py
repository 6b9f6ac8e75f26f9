"""The experiment scripts (experiments/) end to end at the smoke scale, on the vendored fixtures only: each writes
its JSON, markdown and figure, with the numbers in range, and a second run reuses the first one's units."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # sources and licences: fixtures/README.md


@pytest.fixture
def scripts(monkeypatch):
    """Import experiments/NAME.py as a module; torch's thread count put back afterwards."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    threads = torch.get_num_threads()
    yield lambda name: importlib.import_module(name)
    torch.set_num_threads(threads)


def _run(scripts, name: str, out: Path) -> dict:
    return _run_with(scripts, name, out, [])


def _run_with(scripts, name: str, out: Path, extra: list[str]) -> dict:
    scripts(name).main(["--scale", "smoke", "--out", str(out), "--data-root", str(FIXTURES), "--threads", "1", *extra])
    for ext in ("json", "md", "png"):
        assert (out / f"{name}.{ext}").stat().st_size > 0
    return json.loads((out / f"{name}.json").read_text())


def _units(out: Path) -> list[str]:
    return [json.loads(line)["key"] for line in (out / "timings.jsonl").read_text().splitlines()]


def _fraction(x: float) -> bool:
    return 0.0 <= x <= 1.0


def _check_rt(result: dict, seeds: int) -> None:
    assert len(result["runs"]) == seeds
    assert all(_fraction(r["test_accuracy"]) and _fraction(r["dev_accuracy"]) for r in result["runs"])
    low, high = result["test_range"]
    assert low <= result["test_median"] <= high


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_smoothness_script_measures_every_layer_and_reuses_its_runs(scripts, tmp_path):
    record = _run(scripts, "smoothness", tmp_path)
    models = record["results"]["models"]
    assert set(models) == {"albert", "not-shared", "all-shared-e-h", "bert"}
    layers = record["recipe"]["scale"]["model"]["num_layers"]
    for m in models.values():
        assert len(m["l2"]) == len(m["cosine"]) == layers
        assert all(d >= 0 for d in m["l2"]) and all(-1 <= c <= 1 for c in m["cosine"])
        assert m["tokens"] > 0
    assert record["recipe"]["scale"]["name"] == "smoke" and record["wall_seconds_of_the_units_used"] > 0
    units = _units(tmp_path)
    assert sum(u.startswith("not-shared-") for u in units) == 1  # one pretraining per variant
    again = _run(scripts, "smoothness", tmp_path)
    assert _units(tmp_path) == units  # nothing done again
    assert again["results"] == record["results"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_script_at_the_smoke_scale(scripts, tmp_path):
    objectives = _run(scripts, "objectives", tmp_path)["results"]
    seeds = 2  # the smoke scale's
    assert set(objectives["models"]) == {"no-pair", "nsp", "albert"}
    for m in objectives["models"].values():
        i = m["intrinsic"]
        assert _fraction(i["mlm"]["eval_mlm_acc"])
        for task in ("nsp", "sop"):
            assert _fraction(i[task]["head_accuracy"]) and _fraction(i[task]["probe_accuracy"])
            assert i[task]["majority_accuracy"] == 0.5  # balanced probe sets
        _check_rt(m["rt"], seeds)
        assert -1 <= m["lee"]["spearman"] <= 1
    assert "mlm_own_data" in objectives["models"]["no-pair"]["intrinsic"]
    _check_rt(objectives["random_init"]["rt"], seeds)
    units = _units(tmp_path)

    sharing = _run(scripts, "sharing", tmp_path)["results"]["models"]
    assert not set(units) & set(_units(tmp_path)[len(units) :])  # ALBERT's runs reused, not redone
    params = {name: m["parameters"]["backbone"] for name, m in sharing.items()}
    assert params["albert"] < params["shared-ffn"] < params["not-shared"]
    assert params["albert"] < params["shared-attention"] < params["not-shared"]
    assert params["albert"] < params["all-shared-e-h"] and params["not-shared"] < params["bert"]
    assert all(_fraction(m["intrinsic"]["mlm"]["eval_mlm_acc"]) for m in sharing.values())

    smoothness = _run(scripts, "smoothness", tmp_path)["results"]["models"]
    assert all(len(m["l2"]) == 3 for m in smoothness.values())

    before = _units(tmp_path)
    transfer = _run(scripts, "transfer", tmp_path)["results"]
    done_now = _units(tmp_path)[len(before) :]
    assert not any(u.startswith("albert-") for u in done_now)  # pretrained models reused
    for m in transfer["models"].values():
        _check_rt(m["rt"], seeds)
        _check_rt(m["rt_random_init"], seeds)
        v = m["verdict"]
        assert v["transfers"] == (v["margin"] > v["seed_spread"])
    points = transfer["curve"]["points"]
    assert [p["step"] for p in points] == [2, 4, 6, 8]  # 1/4, 1/2, 3/4 and all of the 8 pretraining steps
    assert all(_fraction(p["mlm_acc"]) and p["rt"]["lr"] == transfer["curve"]["lr"] for p in points)
    assert _fraction(transfer["baselines"]["rt_bag_of_words"]["test_accuracy"])

    budget = _run_with(scripts, "finetune_budget", tmp_path, ["--steps", "4", "--lr", "1e-3", "--seeds", "0"])
    assert budget["results"]["steps"] == 4 and len(budget["results"]["random_init"]["runs"]) == 1
    assert _fraction(budget["results"]["pretrained"]["test_median"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_an_interrupted_finetuning_unit_continues_from_its_checkpoint(scripts, tmp_path, monkeypatch):
    import litebert.finetune.run

    runner_module, downstream = scripts("runner"), scripts("downstream")
    scale = runner_module.SCALES["smoke"]
    runner = runner_module.Runner(scale, tmp_path, FIXTURES, log=lambda *a: None)
    init = runner.model_dir("albert")
    write_results = litebert.finetune.run.write_results

    def killed(*args, **kwargs):  # killed after its checkpoints were saved, before its results
        raise KeyboardInterrupt

    monkeypatch.setattr(litebert.finetune.run, "write_results", killed)
    with pytest.raises(KeyboardInterrupt):
        downstream.finetune_run(runner, init, "albert", False, scale.lrs[0], 0)
    run_dir = next((tmp_path / "finetune" / "albert").iterdir())
    assert (run_dir / "checkpoints").is_dir() and not (run_dir / "results.json").exists()
    monkeypatch.setattr(litebert.finetune.run, "write_results", write_results)
    run = downstream.finetune_run(runner, init, "albert", False, scale.lrs[0], 0)  # was: refused as interrupted
    assert Path(run["dir"]) == run_dir and (run_dir / "results.json").is_file()
    assert _fraction(run["dev_accuracy"]) and 0 < run["best_step"] <= scale.finetune["max_steps"]


def test_a_pretraining_keeps_every_checkpoint_under_the_recipe_s_key(scripts, tmp_path, monkeypatch):
    # An interruption writes a checkpoint of its own; with keep_last = CHECKPOINTS it would push out the first
    # curve checkpoint. The job keeps them all, while the run's name (its key) stays that of the recipe.
    runner_module = scripts("runner")
    runner = runner_module.Runner(runner_module.SCALES["smoke"], tmp_path, FIXTURES, log=lambda *a: None)
    jobs = []
    monkeypatch.setattr(runner_module, "run_job", lambda job, run, resume: jobs.append((job, run, resume)))
    run = runner.pretrain("albert")
    (job, where, resume), train = jobs[0], runner.train_config()
    assert where == run and resume == "auto" and train.keep_last == runner_module.CHECKPOINTS
    assert job.train.keep_last >= train.max_steps and job.train.max_steps == train.max_steps
    recipe = {**train.to_dict(), "tensorboard": False}  # the key of runs made before --report-to
    del recipe["report_to"]
    key = runner_module.settings_key({"data": runner.data("sop").name, "model": job.model, "train": recipe})
    assert run.name == f"albert-{key}"
    # where records go is no part of the recipe: the same run, reporting to the trackers asked for
    tracked = runner_module.Runner(
        runner_module.SCALES["smoke"], tmp_path, FIXTURES, log=lambda *a: None, report_to=("mlflow",)
    )
    assert tracked.pretrain("albert") == run and jobs[1][0].train.report_to == ("mlflow",)


def test_suite_optimizers_script_runs_both_optimizers_on_the_same_units(scripts, tmp_path):
    argv = ["--out", str(tmp_path), "--tasks", "SST-2,STS-B", "--seeds", "2", "--max-steps", "4", "--eval-every", "2"]
    rows = scripts("suite_optimizers").main([*argv, "--threads", "1"])
    assert [r["run"] for r in rows] == ["adamw_official", "adamw"]
    for row in rows:
        assert row["units"] == 4 and row["failed"] == 0 and 0 <= row["degenerate"] <= 4
        assert row["degenerate"] == sum(t["degenerate"] for t in row["tasks"].values())
        assert row["tasks"]["SST-2"]["min"] <= row["tasks"]["SST-2"]["median"] <= row["tasks"]["SST-2"]["max"]
    config = json.loads(next((tmp_path / "adamw").glob("units/SST-2/seed0-*/unit.json")).read_text())["config"]
    assert config["optimizer"] == "adamw" and config["max_steps"] == 4
