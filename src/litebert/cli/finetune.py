"""CLI subcommands of the fine-tuning step: finetune, evaluate, embed (predict is in predict.py)."""

from __future__ import annotations

import argparse
import json

from litebert.cli.flags import Flag, add_config_flags, config_flags, given
from litebert.finetune import FinetuneConfig, check_pooling
from litebert.finetune.tasks import TASKS
from litebert.finetune.tasks.squad_eval import METRICS


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
    e.add_argument("--task", choices=sorted(TASKS), help="with --predictions: only squad")
    e.add_argument("--data", required=True, help="gold file (SQuAD JSON, or a labelled file of the model's task)")
    e.add_argument("--predictions", help="predictions JSON (question id -> answer text, '' for no answer)")
    e.add_argument("--version", choices=("1.1", "2.0"), help="SQuAD version (default: from the gold file)")
    e.add_argument(
        "--metric",
        choices=METRICS,
        help="with --predictions: SQuAD's word F1 or KorQuAD 1.0's character F1 (default: korquad "
        "when the gold file's version names KorQuAD, else squad)",
    )
    e.add_argument("--init", help="fine-tuned model dir (OUT/best) to evaluate on --data")
    e.add_argument("--text-columns", help="with --init: this file's text columns, when not the training file's")
    e.add_argument("--label-column", help="with --init: this file's label column, when not the training file's")
    e.set_defaults(func=_evaluate)

    m = sub.add_parser("embed", help="mean-pooled embeddings of each line of a text file, saved as .npy")
    m.add_argument("file", help="text file, one text per line")
    m.add_argument("--init", required=True, help="model dir (litebert, transformers ALBERT or fine-tuned)")
    m.add_argument("--out", required=True, help="output .npy, shape (lines, hidden_size)")
    m.add_argument("--batch-size", type=int, default=32)
    m.add_argument("--max-seq-length", type=int, help="window length (default: the model's maximum)")
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
    if args.predictions:
        if args.task not in (None, "squad"):
            raise ValueError("--predictions scoring is for --task squad; use --init to evaluate a model")
        model_flags = [
            f
            for f, v in (
                ("--init", args.init),
                ("--text-columns", args.text_columns),
                ("--label-column", args.label_column),
            )
            if v
        ]
        if model_flags:
            raise ValueError(f"{', '.join(model_flags)}: for evaluating a model (--init), not with --predictions")
        from litebert.finetune.tasks.squad_eval import evaluate_files

        print(json.dumps(evaluate_files(args.data, args.predictions, version=args.version, metric=args.metric)))
        return 0
    if not args.init:
        raise ValueError("evaluate needs --predictions (SQuAD scoring) or --init (a fine-tuned model)")
    if args.metric:  # a model's SQuAD score follows its data file, as in fine-tuning
        raise ValueError(
            "--metric is for --predictions; with --init a file whose version names KorQuAD is scored "
            "with KorQuAD's metric, any other with SQuAD's"
        )
    if args.version:  # as the metric: the file's own version, whatever the flag said (it was dropped silently)
        raise ValueError(
            "--version is for --predictions; with --init a SQuAD file is scored by its own version's "
            'rules (its "version" field, else 2.0 when a question has no answers)'
        )
    from litebert.finetune import evaluate

    columns = {"text_columns": _columns(args.text_columns), "label_column": args.label_column}
    print(json.dumps(evaluate(args.init, args.data, task=args.task, **columns)))
    return 0


def _columns(flag: str | None) -> tuple[str, ...] | None:
    return tuple(c.strip() for c in flag.split(",")) if flag else None


def _embed(args: argparse.Namespace) -> int:
    from litebert.finetune.embed import embed_file

    result = embed_file(args.file, args.init, args.out, batch_size=args.batch_size, max_seq_length=args.max_seq_length)
    print(json.dumps({"shape": list(result.vectors.shape), "windowed": result.windowed, "out": args.out}))
    return 0
