"""CLI subcommands of the fine-tuning step: finetune, evaluate, embed (predict is in predict.py)."""

from __future__ import annotations

import argparse
import json

from litebert.cli.flags import Flag, add_config_flags, config_flags, given
from litebert.finetune import FinetuneConfig, check_pooling
from litebert.finetune.inference import EmbedConfig, EvaluateConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("finetune", help="fine-tune a pretrained model on a task; best dev checkpoint in OUT/best")
    add_config_flags(p, FinetuneConfig, title="the run (FinetuneConfig)", note=_task_note)
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue OUT from its newest checkpoint, with the run's own settings (only --device may change)",
    )
    p.set_defaults(func=_finetune)

    e = sub.add_parser("evaluate", help="score SQuAD predictions (official metric) or a fine-tuned model")
    add_config_flags(e, EvaluateConfig)
    e.set_defaults(func=_evaluate)

    m = sub.add_parser("embed", help="mean-pooled embeddings of each line of a text file, saved as .npy")
    add_config_flags(m, EmbedConfig)
    m.set_defaults(func=_embed)


_FLAGS = config_flags(FinetuneConfig)


def _task_note(flag: Flag) -> str | None:
    """Fields only one task reads say so in --help; given to another task, their flags are refused."""
    task = flag.field.metadata.get("task")
    return f"--task {task} only" if task else None


def _finetune(args: argparse.Namespace) -> int:
    from litebert.finetune import finetune

    values = given(args, _FLAGS)
    other = [
        (f.option, task)
        for f in _FLAGS
        if f.path[0] in values and (task := f.field.metadata.get("task")) and task != values["task"]
    ]
    if other:
        raise ValueError(
            f"{', '.join(o for o, _ in other)}: for --task {other[0][1]} only; --task {values['task']} would ignore it"
        )
    if "pooling" in values:  # asked for, even as "cls": refused where the task has no pooled state
        check_pooling(values["task"], values["pooling"])
    result = finetune(FinetuneConfig(**values), resume=args.resume)
    print(
        json.dumps(
            {
                "best": {result.best_metric: result.best_value, "step": result.best_step},
                "results": str(result.results_path),
                "best_dir": str(result.best_dir),
            }
        )
    )
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    config = EvaluateConfig(**given(args, config_flags(EvaluateConfig)))
    if config.predictions is not None:
        from litebert.finetune.tasks.squad_eval import evaluate_files

        scores = evaluate_files(config.data, config.predictions, version=config.version, metric=config.metric)
    else:
        from litebert.finetune import evaluate

        columns = {"text_columns": config.text_columns, "label_column": config.label_column}
        scores = evaluate(config.init, config.data, task=config.task, **columns)
    print(json.dumps(scores))
    return 0


def _embed(args: argparse.Namespace) -> int:
    from litebert.finetune.embed import embed_file

    config = EmbedConfig(**given(args, config_flags(EmbedConfig)))
    sizes = {"batch_size": config.batch_size, "max_seq_length": config.max_seq_length}
    result = embed_file(config.file, config.init, config.out, **sizes)
    print(json.dumps({"shape": list(result.vectors.shape), "windowed": result.windowed, "out": config.out}))
    return 0
