"""Downstream tasks: Rotten Tomatoes fine-tuning (pretrained or from random initialisation), the Lee document
similarity Spearman, and the bag-of-words baselines beside them.

Rotten Tomatoes (labeled/rotten_tomatoes.csv.bz2): the `plot` rows (synopses) dropped, the fresh/rotten reviews
split 80/10/10 by a seeded permutation. Protocol, the same for every model: every learning rate of the scale's grid
is fine-tuned with the first seed, the rate with the best dev accuracy (the best dev checkpoint, evaluated every
eval_every steps) is kept, the other seeds are fine-tuned at that rate, and the best dev checkpoint of each of the
seeds is scored once on test; the median is the headline (the paper reports medians of 5 runs). The random-init
model is the same architecture and tokenizer with fresh weights (FinetuneConfig.random_init), so the models that
share an architecture share its random-init runs.

Lee (labeled/lee_documents.cor, lee_similarities.txt): Spearman over the 1,225 document pairs between the human
scores and the cosine of mean-pooled embeddings (documents longer than the model's window are embedded as windows);
random initialisation: the median over the scale's seeds of the weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from runner import Runner, settings_key

import litebert
from litebert.finetune import FinetuneConfig, embed_texts, evaluate, finetune
from litebert.finetune.baselines import bow_cosines, bow_logistic_regression, majority_accuracy, split_labeled_table
from litebert.finetune.embed import cosine_matrix
from litebert.finetune.tasks.metrics import spearman
from litebert.finetune.tasks.similarity import read_lee
from litebert.hf import load_tokenizer
from litebert.io import read_json, write_json
from litebert.train.checkpoint import latest_checkpoint


def rt_split(runner: Runner) -> Path:
    """The train/dev/test CSVs of the reviews, written once (into a temporary directory, then renamed)."""
    path = runner.out / f"rt_split-seed{runner.scale.split_seed}"
    if not (path / "train.csv").is_file():
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        table = runner.data_root / "labeled" / "rotten_tomatoes.csv.bz2"
        split_labeled_table(
            table,
            tmp,
            text_column="text",
            label_column="category",
            labels=("fresh", "rotten"),
            seed=runner.scale.split_seed,
        )
        tmp.rename(path)
    return path


def _architecture(runner: Runner, init: Path) -> str:
    """The name random-init runs of a model's architecture and tokenizer go under."""
    config = read_json(init / "config.json")
    return "random-" + settings_key({"config": config, "tokenizer": load_tokenizer(init).checksum})


def finetune_run(runner: Runner, init: Path, model: str, random_init: bool, lr: float, seed: int) -> dict:
    """One fine-tuning run (reused when its results.json exists, continued from its newest checkpoint when it was
    interrupted): its best dev accuracy and checkpoint."""
    split = rt_split(runner)
    settings = {"model": model, "split": split.name, "lr": lr, "seed": seed, "finetune": runner.scale.finetune}
    run_dir = runner.out / "finetune" / model / f"lr{lr:g}-seed{seed}-{settings_key(settings)}"
    runner.used.add(run_dir.name)
    if not (run_dir / "results.json").is_file():
        cfg = FinetuneConfig(
            task="classification",
            train=str(split / "train.csv"),
            dev=str(split / "dev.csv"),
            init=str(init),
            out=str(run_dir),
            random_init=random_init,
            text_columns=("text",),
            label_column="label",
            lr=lr,
            seed=seed,
            report_to=runner.report_to,
            **runner.scale.finetune,
        )
        with runner.timed("finetune", run_dir.name):
            finetune(cfg, resume=latest_checkpoint(run_dir) is not None)  # an interrupted run continues
    best = read_json(run_dir / "results.json")["best"]
    return {"lr": lr, "seed": seed, "dev_accuracy": best["value"], "best_step": best["step"], "dir": str(run_dir)}


def test_accuracy(runner: Runner, run: dict) -> float:
    """The test accuracy of a run's best dev checkpoint, scored once and kept in its test.json."""
    path = Path(run["dir"]) / "test.json"
    if not path.is_file():
        with runner.timed("test", Path(run["dir"]).name):
            write_json(evaluate(Path(run["dir"]) / "best", rt_split(runner) / "test.csv"), path)
    return read_json(path)["accuracy"]


def finetuned(runner: Runner, name: str) -> bool:
    """Whether the scale fine-tunes variant `name` on Rotten Tomatoes (the cpu scales fine-tune only the models
    the tables compare downstream)."""
    return runner.scale.finetuned is None or name in runner.scale.finetuned


def rt(runner: Runner, name: str, *, random_init: bool = False, share: float = 1.0, lr: float | None = None) -> dict:
    """Rotten Tomatoes by the protocol of the module docstring, for variant `name` pretrained (after `share` of
    its steps) or its architecture from random initialisation; with `lr`, every seed at that rate (no grid)."""
    init = runner.model_dir(name, share)
    model = _architecture(runner, init) if random_init else f"{runner.pretrain(name).name}-{init.name}"
    seeds, lrs = runner.scale.seeds, (lr,) if lr is not None else runner.scale.lrs
    grid = {x: finetune_run(runner, init, model, random_init, x, seeds[0]) for x in lrs}
    lr = max(lrs, key=lambda x: grid[x]["dev_accuracy"])  # the first (smallest) rate on a tie
    runs = [grid[lr]] + [finetune_run(runner, init, model, random_init, lr, seed) for seed in seeds[1:]]
    for run in runs:
        run["test_accuracy"] = test_accuracy(runner, run)
    test = [r["test_accuracy"] for r in runs]
    return {
        "lr": lr,
        "dev_by_lr": {f"{x:g}": grid[x]["dev_accuracy"] for x in lrs},
        "runs": [{k: v for k, v in r.items() if k != "dir"} for r in runs],
        "test_median": float(np.median(test)),
        "test_mean": float(np.mean(test)),
        "test_range": [min(test), max(test)],
        "dev_median": float(np.median([r["dev_accuracy"] for r in runs])),
    }


def _lee_data(runner: Runner) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    root = runner.data_root / "labeled"
    docs, pairs = read_lee(root / "lee_documents.cor", root / "lee_similarities.txt")
    i, j = (np.array([p[k] for p in pairs]) for k in (0, 1))
    return docs, i, j, np.array([p[2] for p in pairs])


def lee(runner: Runner, name: str, *, random_init: bool = False) -> dict:
    """Lee Spearman of variant `name`'s mean-pooled embeddings (random init: median over the scale's seeds)."""
    init = runner.model_dir(name)
    settings = {
        "model": _architecture(runner, init) if random_init else runner.pretrain(name).name,
        "seeds": list(runner.scale.seeds) if random_init else None,
    }

    def compute() -> dict:
        docs, i, j, gold = _lee_data(runner)
        tok, pretrained = load_tokenizer(init), litebert.load(init)
        models = []
        for seed in runner.scale.seeds if random_init else [None]:
            if seed is not None:
                torch.manual_seed(seed)
            models.append(litebert.AlbertForPretraining(pretrained.config) if random_init else pretrained)
        scores = []
        for model in models:
            emb = embed_texts(model.albert.to(runner.device), tok, docs, max_seq_length=pretrained.config.max_position)
            scores.append(spearman(cosine_matrix(emb.vectors)[i, j], gold))
        return {"spearman": float(np.median(scores)), "by_seed": scores}

    return runner.cached("lee", settings, compute)


def baselines(runner: Runner) -> dict:
    """Rotten Tomatoes: majority class and bag-of-words logistic regression; Lee: bag-of-words cosine (counts and
    tf-idf)."""
    split = rt_split(runner)

    def compute() -> dict:
        docs, i, j, gold = _lee_data(runner)
        return {
            "rt_majority": majority_accuracy(split),
            "rt_bag_of_words": bow_logistic_regression(split, "fresh"),
            "lee_bow_counts": spearman(bow_cosines(docs, tfidf=False)[i, j], gold),
            "lee_bow_tfidf": spearman(bow_cosines(docs, tfidf=True)[i, j], gold),
        }

    return runner.cached("baselines", {"split": split.name}, compute)
