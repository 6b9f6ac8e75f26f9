"""`litebert suite`: GLUE read in both of its layouts (the download script's TSVs with their quirks, the Hub's
parquet), every file the suite writes, medians and the GLUE score recomputed from results.json, the leaderboard
files in the test files' order, a second run training nothing, and a run killed mid-way finishing as it would
have. A tiny model and a handful of steps: the figures are not meant to be good, only right."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import statistics
import string
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import scipy.stats
from glue_parquet import GLUE, write_hub_glue

from litebert.cli import main
from litebert.finetune.run import run_model
from litebert.finetune.saved import load_finetuned
from litebert.finetune.suite import SuiteConfig, load_suite, run_suite
from litebert.finetune.suite.layouts import prepare_task
from litebert.finetune.suite.report import fmt
from litebert.train.checkpoint import latest_checkpoint

TINY = dict(recipe="quick", seeds=2, max_steps=4, eval_every=2, batch_size=4, max_seq_length=32, lr=1e-3, threads=1)
SUBMISSIONS = [
    "AX.tsv",
    "CoLA.tsv",
    "MNLI-m.tsv",
    "MNLI-mm.tsv",
    "MRPC.tsv",
    "QNLI.tsv",
    "QQP.tsv",
    "RTE.tsv",
    "SST-2.tsv",
    "STS-B.tsv",
    "WNLI.tsv",
]


@pytest.fixture(scope="module")
def hub_glue(tmp_path_factory) -> Path:
    return write_hub_glue(tmp_path_factory.mktemp("hub-glue"))


def test_both_layouts_give_the_same_files_with_the_download_scripts_quirks(hub_glue, tmp_path):
    suite = load_suite("glue")
    for name, spec in suite.tasks.items():
        tsv = prepare_task(spec, GLUE, tmp_path / "tsv" / name)
        hub = prepare_task(spec, hub_glue, tmp_path / "hub" / name)
        assert (tsv.layout, hub.layout) == ("tsv", "parquet")
        assert {s: p.read_bytes() for s, p in tsv.files.items()} == {s: p.read_bytes() for s, p in hub.files.items()}
        assert tsv.digest == hub.digest
    # CoLA has no header row: its first line is an example; quotes are text, as the official processors read them
    cola = (tmp_path / "tsv" / "CoLA" / "train.tsv").read_text().splitlines()
    first = (GLUE / "CoLA" / "train.tsv").read_text().splitlines()[0].split("\t")
    assert cola[0] == "sentence\tlabel" and cola[1] == f"{first[3]}\t{first[1]}" and len(cola) == 25
    assert 'She has "read" the letter .\t1' in cola
    # QQP: lines lacking a field are skipped and counted; MNLI's test splits and AX keep their index column
    qqp = prepare_task(suite.tasks["QQP"], GLUE, tmp_path / "tsv" / "QQP")
    assert qqp.counts["train"] == {"rows": 24, "malformed lines skipped (a field missing)": 2}
    ax = (tmp_path / "tsv" / "MNLI" / "diagnostic.tsv").read_text().splitlines()
    assert ax[0] == "index\tsentence1\tsentence2" and [r.split("\t")[0] for r in ax[1:]] == [str(i) for i in range(6)]


def test_missing_task_split_column_and_label_are_named(tmp_path):
    suite = load_suite("glue")
    with pytest.raises(FileNotFoundError, match=r"task CoLA: none of its directories exists: .*CoLA .*cola"):
        prepare_task(suite.tasks["CoLA"], tmp_path, tmp_path / "out")
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "train.tsv").write_text("sentence\tlabel\ngood\t1\n")
    with pytest.raises(FileNotFoundError, match=r"split 'dev'.*SST-2/dev.tsv does not exist"):
        prepare_task(suite.tasks["SST-2"], tmp_path, tmp_path / "out")
    (tmp_path / "SST-2" / "dev.tsv").write_text("text\tlabel\ngood\t1\n")
    (tmp_path / "SST-2" / "test.tsv").write_text("index\tsentence\n0\tgood\n")
    with pytest.raises(ValueError, match=r"dev.tsv: missing column\(s\) \['sentence'\]"):
        prepare_task(suite.tasks["SST-2"], tmp_path, tmp_path / "out")
    (tmp_path / "SST-2" / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\tnegative\n")
    with pytest.raises(ValueError, match=r"dev.tsv: line 3: label 'negative' is not one of the task's labels"):
        prepare_task(suite.tasks["SST-2"], tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match=r"--tasks SST2: not in suite glue"):
        run_suite(
            SuiteConfig(suite="glue", data=str(tmp_path), init=str(tmp_path), out=str(tmp_path / "o"), tasks=("SST2",))
        )


def _md_rows(md: str) -> dict[tuple[str, str], list[str]]:
    seeds = md.split("## Seeds")[1].split("\n## ")[0]
    rows = [r.strip("|").split("|") for r in seeds.splitlines() if r.startswith("| ") and "---" not in r]
    return {(r[0].strip(), r[1].strip()): [c.strip() for c in r[2:]] for r in rows[1:]}


def check_results_against_json(out: Path) -> dict:
    """Every median, min and max of results.md, and the GLUE score, recomputed from results.json's seeds."""
    results = json.loads((out / "results.json").read_text())
    md = (out / "results.md").read_text()
    rows = _md_rows(md)
    task_scores = []
    for task, summary in results["tasks"].items():
        seeds = summary["seeds"]
        assert len(seeds) == len(results["seeds"])
        for metric in [*summary["metrics"], "score"]:
            values = [s["score"] if metric == "score" else s["metrics"][metric] for s in seeds.values()]
            if metric == "score":  # a task of two metrics scores their mean, per seed
                assert values == pytest.approx([statistics.fmean(s["metrics"].values()) for s in seeds.values()])
            expected = [fmt(statistics.median(values)), fmt(min(values)), fmt(max(values))]
            assert rows[(task, metric)][:3] == expected, (task, metric)
            assert rows[(task, metric)][4] == str(sum(s["degenerate"] is not None for s in seeds.values()))
        task_scores.append(statistics.median(s["score"] for s in seeds.values()))
    assert results["score"]["value"] == pytest.approx(statistics.fmean(task_scores))
    headline = next(line for line in md.splitlines() if line.startswith(f"| {results['label']} |"))
    assert headline.rstrip(" |").endswith(fmt(statistics.fmean(task_scores)))
    return results


def check_submission(out: Path, results: dict) -> None:
    """One file per leaderboard task, `index<TAB>prediction` in the test file's order, the leaderboard's labels,
    STS-B within [0, 5], all of them in submission.zip; from the median seed's unit."""
    assert sorted(p.name for p in (out / "submission").iterdir()) == SUBMISSIONS
    with zipfile.ZipFile(out / "submission.zip") as z:
        assert sorted(z.namelist()) == SUBMISSIONS
        assert z.read("CoLA.tsv") == (out / "submission" / "CoLA.tsv").read_bytes()
    tests = {
        "AX.tsv": "diagnostic/diagnostic.tsv",
        "MNLI-m.tsv": "MNLI/test_matched.tsv",
        "MNLI-mm.tsv": "MNLI/test_mismatched.tsv",
    }
    labels = {
        "MNLI": {"entailment", "neutral", "contradiction"},
        "QNLI": {"entailment", "not_entailment"},
        "RTE": {"entailment", "not_entailment"},
    }
    for name in SUBMISSIONS:
        lines = (out / "submission" / name).read_text().splitlines()
        assert lines[0] == "index\tprediction"
        test = (GLUE / tests.get(name, f"{name[:-4]}/test.tsv")).read_text().splitlines()
        index = 0 if not name.startswith("QQP") else test[0].split("\t").index("id")
        assert [line.split("\t")[0] for line in lines[1:]] == [r.split("\t")[index] for r in test[1:]]
        preds = [line.split("\t")[1] for line in lines[1:]]
        task = name[:-4].split("-m")[0] if name != "AX.tsv" else "MNLI"
        if task == "STS-B":
            assert all(0.0 <= float(p) <= 5.0 for p in preds)
        else:
            assert set(preds) <= labels.get(task, {"0", "1"}), name
    mnli = results["tasks"]["MNLI"]
    unit = Path(mnli["seeds"][str(mnli["median_seed"])]["unit"])
    rows = json.loads((unit / "predictions" / "test_matched.json").read_text())
    assert [f"{r['index']}\t{r['prediction']}" for r in rows] == (
        out / "submission" / "MNLI-m.tsv"
    ).read_text().splitlines()[1:]


def test_glue_from_the_hubs_parquet_writes_every_file_and_a_second_run_trains_nothing(model_dir, hub_glue, tmp_path):
    out = tmp_path / "suite"
    lines: list[str] = []
    result = run_suite(
        SuiteConfig(suite="glue", data=str(hub_glue), init=str(model_dir), out=str(out), **TINY), write=lines.append
    )
    assert not result.failed and result.results["units"] == {"total": 18, "reused": 0, "trained": 18}
    assert lines[-1].split("] ")[1].startswith("18/18 done") and any("running: CoLA seed 0" in x for x in lines)
    for name in ("results.json", "results.md", "seeds.png", "submission.zip"):
        assert (out / name).is_file(), name
    assert (out / "seeds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = check_results_against_json(out)
    assert set(results["tasks"]) == set(load_suite("glue").tasks)
    assert set(results["tasks"]["MNLI"]["metrics"]) == {"accuracy", "mismatched/accuracy"}
    assert results["tasks"]["QQP"]["input"]["layout"] == "parquet"
    for key in ("recipe", "model", "commit", "date", "wall_seconds"):
        assert key in results
    check_submission(out, results)
    # CoLA's best checkpoint is chosen by MCC, MRPC's by the mean of F1 and accuracy
    unit = Path(results["tasks"]["MRPC"]["seeds"]["0"]["unit"])
    best = json.loads((unit / "results.json").read_text())["best"]
    at = next(h for h in json.loads((unit / "results.json").read_text())["history"] if h["step"] == best["step"])
    assert best["metric"] == "f1+accuracy"
    assert best["value"] == pytest.approx((at["dev"]["f1"] + at["dev"]["accuracy"]) / 2)
    cola = json.loads((Path(results["tasks"]["CoLA"]["seeds"]["0"]["unit"]) / "results.json").read_text())
    assert cola["best"]["metric"] == "mcc"

    before = (out / "results.json").read_text()
    again = run_suite(
        SuiteConfig(suite="glue", data=str(hub_glue), init=str(model_dir), out=str(out), **TINY),
        write=lambda line: None,
    )
    assert again.results["units"] == {"total": 18, "reused": 18, "trained": 0}
    assert again.results["tasks"] == json.loads(before)["tasks"]


def _cli(model_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "suite",
        "glue",
        "--data",
        str(GLUE),
        "--init",
        str(model_dir),
        "--out",
        str(out),
        "--recipe",
        "quick",
        "--batch-size",
        "4",
        "--max-seq-length",
        "32",
        "--lr",
        "1e-3",
        *extra,
    ]


@pytest.mark.slow  # two runs of 100 steps, one in a child process (about 20 s)
def test_a_run_killed_mid_way_and_run_again_finishes_with_the_same_results(model_dir, tmp_path):
    """SIGKILL while the download-script layout's units train (a checkpoint on disk), then the same command."""
    flags = ["--tasks", "STS-B", "--seeds", "1", "--max-steps", "100", "--eval-every", "5", "--threads", "1"]
    killed = tmp_path / "killed"
    code = "import sys; from litebert.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *_cli(model_dir, killed, *flags)],
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 120
    while not any(latest_checkpoint(u) for u in killed.glob("units/*/*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "results.json").exists()
    assert main(_cli(model_dir, killed, *flags)) == 0
    whole = tmp_path / "whole"
    assert main(_cli(model_dir, whole, *flags)) == 0
    a, b = (json.loads((d / "results.json").read_text()) for d in (killed, whole))
    strip = lambda tasks: {t: {k: v for k, v in s.items() if k != "seeds"} for t, s in tasks.items()}
    assert strip(a["tasks"]) == strip(b["tasks"])
    assert any(json.loads(p.read_text())["resumed"] for p in killed.glob("units/*/*/unit.json"))
    assert re.search(r"\| STS-B \| pearson \|", (killed / "results.md").read_text())


def test_the_papers_five_tasks_average_squad_f1_and_em_first_with_the_papers_row_beside(model_dir, tmp_path):
    tasks = GLUE.parents[0] / "tasks"
    data = tmp_path / "data"
    (data / "SQuAD").mkdir(parents=True)
    for version, fixture in (("v1.1", "squad_v1.json"), ("v2.0", "squad_v2.json")):
        for split in ("train", "dev"):
            shutil.copy(tasks / fixture, data / "SQuAD" / f"{split}-{version}.json")
    for split in ("train", "dev"):
        (data / "RACE" / split).mkdir(parents=True)
        shutil.copy(tasks / "race.json", data / "RACE" / split / "race.json")
    for name in ("MNLI", "SST-2"):
        shutil.copytree(GLUE / name, data / name)
    out = tmp_path / "paper"
    settings = {**TINY, "seeds": 1, "max_seq_length": 64}
    result = run_suite(
        SuiteConfig(suite="paper", data=str(data), init=str(model_dir), out=str(out), **settings),
        write=lambda line: None,
    )
    assert not result.failed
    results = check_results_against_json(out)
    squad = results["tasks"]["SQuAD2.0"]
    seed = squad["seeds"]["0"]
    assert seed["score"] == pytest.approx((seed["metrics"]["f1"] + seed["metrics"]["exact_match"]) / 2)
    assert results["score"]["name"] == "Avg" and set(results["tasks"]) == {
        "SQuAD1.1",
        "SQuAD2.0",
        "MNLI",
        "SST-2",
        "RACE",
    }
    md = (out / "results.md").read_text()
    assert "| Model | SQuAD1.1 | SQuAD2.0 | MNLI | SST-2 | RACE | Avg |" in md
    assert "| ALBERT-base (paper, Table 3) | 89.3/82.3 | 80.0/77.1 | 81.6 | 90.3 | 64.0 | 80.1 |" in md
    assert not (out / "submission").exists() and results["submission"] == []


@pytest.mark.slow  # two spawned processes import torch: 10-80 s on a loaded 2-core machine
def test_units_in_two_processes_give_what_one_process_gives(model_dir, tmp_path):
    settings = {**TINY, "tasks": ("SST-2",)}
    one = run_suite(
        SuiteConfig(suite="glue", data=str(GLUE), init=str(model_dir), out=str(tmp_path / "one"), **settings),
        write=lambda line: None,
    )
    lines: list[str] = []
    two = run_suite(
        SuiteConfig(suite="glue", data=str(GLUE), init=str(model_dir), out=str(tmp_path / "two"), jobs=2, **settings),
        write=lines.append,
    )
    assert two.results["units"]["trained"] == 2 and not two.failed
    assert any("running: SST-2 seed 0, SST-2 seed 1" in x or "running: SST-2 seed 1, SST-2 seed 0" in x for x in lines)
    strip = lambda r: {k: v for k, v in r["tasks"]["SST-2"].items() if k not in ("seeds", "input")}
    assert strip(one.results) == strip(two.results)


def test_a_failed_unit_is_reported_and_the_others_finish(model_dir, tmp_path, capsys):
    task = """
[tasks.{0}]
kind = "classification"
metrics = ["accuracy"]
{1}
[[tasks.{0}.layouts]]
format = "tsv"
dir = "SST-2"
files = {{ train = "train.tsv", dev = "dev.tsv" }}
text = ["sentence"]
label = "label"
"""
    suite = tmp_path / "mine.toml"
    suite.write_text(
        'name = "mine"\n[recipes.quick]\nlr = 1e-3\n' + task.format("good", "") + task.format("bad", 'select = "auc"')
    )
    out = tmp_path / "out"
    argv = [
        "suite",
        str(suite),
        "--data",
        str(GLUE),
        "--init",
        str(model_dir),
        "--out",
        str(out),
        "--recipe",
        "quick",
        "--seeds",
        "2",
        "--max-steps",
        "4",
        "--eval-every",
        "2",
        "--batch-size",
        "4",
        "--max-seq-length",
        "32",
    ]
    assert main(argv) == 1
    results = json.loads((out / "results.json").read_text())
    assert [f["unit"] for f in results["failed"]] == ["bad seed 0", "bad seed 1"]
    assert "FinetuneConfig.metric 'auc'" in results["failed"][0]["error"]
    assert set(results["tasks"]) == {"good"} and results["failed_tasks"] == ["bad"]
    assert "## Failed units" in (out / "results.md").read_text()
    assert "FAILED bad seed 0" in capsys.readouterr().err


def test_warm_start_runs_rte_from_this_runs_mnli_model_of_its_seed(model_dir, tmp_path):
    out = tmp_path / "out"
    cfg = SuiteConfig(
        suite="glue",
        data=str(GLUE),
        init=str(model_dir),
        out=str(out),
        warm_start=True,
        **{**TINY, "seeds": 1, "tasks": ("RTE", "MNLI")},
    )
    result = run_suite(cfg, write=lambda line: None)
    assert not result.failed
    rte = json.loads((Path(result.results["tasks"]["RTE"]["seeds"]["0"]["unit"]) / "unit.json").read_text())
    mnli = Path(result.results["tasks"]["MNLI"]["seeds"]["0"]["unit"])
    assert rte["config"]["init"] == str(mnli / "best") and not rte["config"]["random_init"]
    with pytest.raises(ValueError, match=r"--warm-start: task RTE starts from MNLI's model; run MNLI too"):
        run_suite(
            SuiteConfig(
                suite="glue",
                data=str(GLUE),
                init=str(model_dir),
                out=str(tmp_path / "o2"),
                warm_start=True,
                tasks=("RTE",),
            )
        )


KOREAN = GLUE.parents[0] / "korean"


def _korquad_scores(predictions: dict[str, str], gold_file: Path) -> dict[str, float]:
    """KorQuAD 1.0's evaluate-v1.0.py: SQuAD v1.1's normalisation with quotes and brackets spaced out first, F1
    over the characters of the normalised answer's words; x100."""

    def normalize(s: str) -> str:
        s = re.sub("['\"《》<>〈〉()‘’]", " ", s).lower()
        return " ".join("".join(ch for ch in s if ch not in set(string.punctuation)).split())

    def f1(pred: str, gold: str) -> float:
        p, g = list("".join(normalize(pred).split())), list("".join(normalize(gold).split()))
        same = sum((Counter(p) & Counter(g)).values())
        return 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))

    qas = [q for a in json.loads(gold_file.read_text())["data"] for p in a["paragraphs"] for q in p["qas"]]
    em = [max(normalize(predictions[q["id"]]) == normalize(a["text"]) for a in q["answers"]) for q in qas]
    f1s = [max(f1(predictions[q["id"]], a["text"]) for a in q["answers"]) for q in qas]
    return {"exact_match": 100 * statistics.fmean(em), "f1": 100 * statistics.fmean(f1s)}


def _best_model_predictions(unit: Path, prepared: Path) -> Any:
    """The unit's best dev model run on a file the suite prepared, predicted afresh."""
    ft = load_finetuned(unit / "best")
    data = ft.task.load(str(prepared), ft.tokenizer, ft.config, dict(ft.state), mode="eval")
    outputs = run_model(ft.model, data, ft.task.pad_values(ft.tokenizer), ft.config.eval_batch_size)
    return ft.task.predict(data, outputs, ft.config, ft.state)


def _gold(path: Path, column: str) -> list[str]:
    with open(path, encoding="utf-8", newline="") as f:
        return [row[column] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def test_the_korean_suite_scores_each_task_as_its_papers_do(model_dir, tmp_path):
    """NSMC accuracy on ratings_test.txt, KorNLI accuracy and KorSTS Spearman on their test files with the best
    checkpoint chosen on dev, KorQuAD 1.0 EM and character-level F1: each recomputed here from the best model."""
    out = tmp_path / "ko"
    settings = {**TINY, "seeds": 1, "max_seq_length": 64}
    result = run_suite(
        SuiteConfig(suite="korean", data=str(KOREAN), init=str(model_dir), out=str(out), **settings),
        write=lambda line: None,
    )
    assert not result.failed
    results = check_results_against_json(out)
    assert results["score"]["name"] == "average" and results["score"]["tasks"] == list(load_suite("korean").table)
    seed = {task: summary["seeds"]["0"] for task, summary in results["tasks"].items()}
    assert {t: sorted(s["metrics"]) for t, s in seed.items()} == {
        "NSMC": ["accuracy"],
        "KorNLI": ["test/accuracy"],
        "KorSTS": ["test/spearman"],
        "KorQuAD1.0": ["exact_match", "f1"],
    }
    unit = {task: Path(s["unit"]) for task, s in seed.items()}
    data = out / "data"
    dev = {task: Path(json.loads((u / "unit.json").read_text())["config"]["dev"]) for task, u in unit.items()}

    preds = _best_model_predictions(
        unit["NSMC"], Path(json.loads((unit["NSMC"] / "unit.json").read_text())["config"]["dev"])
    )
    gold = _gold(KOREAN / "nsmc" / "ratings_test.txt", "label")
    assert seed["NSMC"]["metrics"]["accuracy"] == pytest.approx(
        100 * statistics.fmean(p["label"] == g for p, g in zip(preds, gold, strict=True))
    )
    preds = _best_model_predictions(unit["KorNLI"], data / "KorNLI" / "test.tsv")
    gold = _gold(KOREAN / "KorNLI" / "xnli.test.ko.tsv", "gold_label")
    assert seed["KorNLI"]["metrics"]["test/accuracy"] == pytest.approx(
        100 * statistics.fmean(p["label"] == g for p, g in zip(preds, gold, strict=True))
    )
    preds = _best_model_predictions(unit["KorSTS"], data / "KorSTS" / "test.tsv")
    gold = [float(g) for g in _gold(KOREAN / "KorSTS" / "sts-test.tsv", "score")]
    spearman = scipy.stats.spearmanr([p["score"] for p in preds], gold).statistic
    assert seed["KorSTS"]["metrics"]["test/spearman"] == pytest.approx(100 * spearman)
    for task in ("KorNLI", "KorSTS"):  # the best checkpoint was chosen on dev
        assert json.loads((unit[task] / "results.json").read_text())["best"]["metric"] in ("accuracy", "spearman")
    gold_file = KOREAN / "KorQuAD" / "KorQuAD_v1.0_dev.json"
    preds = _best_model_predictions(unit["KorQuAD1.0"], dev["KorQuAD1.0"])
    assert seed["KorQuAD1.0"]["metrics"] == pytest.approx(_korquad_scores(preds, gold_file))
