"""Suite files: the TOML that says what a suite is (its tasks, where their files lie in each layout, their
columns, metrics and recipes), read and checked into `Suite` and `TaskSpec`, with errors naming the file and field.

The shipped suites (`glue`, `paper`, `korean`) are files in this package's files/ folder; a user's own suite is a
file of the same form, passed by path. docs/suite.md describes every field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHIPPED = Path(__file__).resolve().parent / "files"
# GLUE's download script's tables (quotes taken literally), CSV (standard quoting), the Hub's parquet, SQuAD/RACE as is
FORMATS = ("tsv", "csv", "parquet", "json")
TABLE_KINDS = ("classification", "regression")  # kinds whose files the suite reads and writes out as TSV
KINDS = (*TABLE_KINDS, "squad", "multiple-choice")
PERCENT_KINDS = ("classification", "regression", "multiple-choice")  # metrics in [0, 1], shown x100 as the paper
# The settings a recipe may give: FinetuneConfig's optimisation and length fields, and epochs (SQuAD's recipe).
RECIPE_FIELDS = (
    "lr",
    "max_steps",
    "epochs",
    "batch_size",
    "warmup",
    "eval_every",
    "max_seq_length",
    "weight_decay",
    "doc_stride",
    "max_query_length",
    "max_qa_length",
    "eval_batch_size",
    "grad_accum",
    "pooling",
    "precision",
)


@dataclass(kw_only=True)
class Layout:
    """Where one task's files lie in one layout of the data, and which columns hold what."""

    format: str
    dir: str
    files: dict[str, str | list[str]]  # split -> file (tsv, json), split name (parquet: SPLIT-*.parquet), or a list
    text: list[str] = field(default_factory=list)
    label: str | None = None
    test_text: list[str] | None = None  # a test file's text columns, when they differ (CoLA's have a header)
    index: str | None = None  # a test file's index column (the leaderboard's first column)
    skip_malformed: bool = False  # lines lacking a field are skipped and counted (QQP), not an error


@dataclass(kw_only=True)
class TaskSpec:
    name: str
    kind: str
    metrics: list[str]  # the task's official metrics; "split/metric" is scored on another labelled split
    select: str  # what the best checkpoint maximises on dev (metric names joined by "+": their mean)
    layouts: list[Layout]
    labels: list[str] | None = None
    evals: list[str] = field(default_factory=list)  # labelled splits scored with the best dev model
    submissions: dict[str, str] = field(default_factory=dict)  # leaderboard file -> test split
    score_range: list[float] | None = None  # regression predictions for the leaderboard are clipped to it
    warm_start: str | None = None  # the suite task whose fine-tuned model this one may start from
    recipes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def percent(self) -> bool:
        return self.kind in PERCENT_KINDS


@dataclass(kw_only=True)
class Suite:
    name: str
    path: Path
    title: str
    score: str  # the headline's name: the mean of the task scores (GLUE score, five-task average)
    tasks: dict[str, TaskSpec]
    table: list[str]  # the column order of results.md
    recipes: dict[str, dict[str, Any]] = field(default_factory=dict)  # every task's defaults, per recipe name
    reference: dict[str, Any] | None = None  # a published row to show beside ours: {name, values, score}
    note: str = ""

    def recipe(self, task: str, name: str) -> dict[str, Any]:
        """The settings of recipe `name` for `task`: the suite's defaults with the task's own over them."""
        spec = self.tasks[task]
        if name not in self.recipes and name not in spec.recipes:
            known = sorted(set(self.recipes) | set(spec.recipes))
            raise ValueError(f"{self.path}: no recipe {name!r} for task {task} (recipes: {known})")
        return {**self.recipes.get(name, {}), **spec.recipes.get(name, {})}


def shipped_suites() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.toml"))


def load_suite(name_or_path: str | Path) -> Suite:
    """A shipped suite by name (`glue`, `paper`, `korean`) or a suite file by path."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        shipped = SHIPPED / f"{name_or_path}.toml"
        if not shipped.is_file():
            raise ValueError(f"suite {name_or_path!r}: not a shipped suite ({', '.join(shipped_suites())}) nor a file")
        path = shipped
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such suite file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not a valid TOML suite file: {exc}") from None
    return parse_suite(data, path)


def parse_suite(data: dict[str, Any], path: Path) -> Suite:
    where = _Where(path)
    where.keys(data, "", {"name", "title", "score", "table", "tasks", "recipes", "reference", "note"})
    tasks_data = where.get(data, "tasks", dict)
    if not tasks_data:
        raise ValueError(f"{path}: field 'tasks' is empty; a suite needs at least one task")
    tasks = {name: _task(where, name, spec) for name, spec in tasks_data.items()}
    for spec in tasks.values():
        if spec.warm_start is not None and spec.warm_start not in tasks:
            raise ValueError(f"{path}: field 'tasks.{spec.name}.warm_start': no task {spec.warm_start!r} in the suite")
    table = where.get(data, "table", list, default=list(tasks))
    unknown = [t for t in table if t not in tasks]
    if unknown:
        raise ValueError(f"{path}: field 'table' names {unknown}, which are not tasks of the suite ({list(tasks)})")
    recipes = where.get(data, "recipes", dict, default={})
    for name, recipe in recipes.items():
        _recipe(where, f"recipes.{name}", recipe)
    return Suite(
        name=where.get(data, "name", str, default=path.stem),
        path=path,
        title=where.get(data, "title", str, default=path.stem),
        score=where.get(data, "score", str, default="average"),
        tasks=tasks,
        table=table + [t for t in tasks if t not in table],
        recipes=recipes,
        reference=where.get(data, "reference", dict, default=None),
        note=where.get(data, "note", str, default=""),
    )


_TASK_KEYS = {
    "kind",
    "metrics",
    "select",
    "layouts",
    "labels",
    "evals",
    "submissions",
    "score_range",
    "warm_start",
    "recipes",
}
_LAYOUT_KEYS = {"format", "dir", "files", "text", "label", "test_text", "index", "skip_malformed"}


def _task(where: _Where, name: str, data: Any) -> TaskSpec:
    at = f"tasks.{name}"
    if not isinstance(data, dict):
        raise ValueError(f"{where.path}: field {at!r} must be a table")
    where.keys(data, at, _TASK_KEYS)
    kind = where.get(data, "kind", str, at=at)
    if kind not in KINDS:
        raise ValueError(f"{where.path}: field '{at}.kind' must be one of {KINDS}, got {kind!r}")
    metrics = where.get(data, "metrics", list, at=at)
    if not metrics or not all(isinstance(m, str) and m for m in metrics):
        raise ValueError(f"{where.path}: field '{at}.metrics' must be a non-empty list of metric names")
    evals = where.get(data, "evals", list, at=at, default=[])
    for m in metrics:
        split = m.split("/")[0] if "/" in m else None
        if split is not None and split not in evals:
            raise ValueError(
                f"{where.path}: field '{at}.metrics': {m!r} is scored on split {split!r}, which is not "
                f"in '{at}.evals' ({evals})"
            )
    own = [m for m in metrics if "/" not in m] or sorted({m.split("/")[-1] for m in metrics})
    layouts = [
        _layout(where, f"{at}.layouts[{i}]", lay, kind) for i, lay in enumerate(where.get(data, "layouts", list, at=at))
    ]
    if not layouts:
        raise ValueError(f"{where.path}: field '{at}.layouts' is empty; say where the task's files lie")
    submissions = where.get(data, "submissions", dict, at=at, default={})
    for lay_i, lay in enumerate(layouts):
        for split in ("train", "dev", *evals, *submissions.values()):
            if split not in lay.files:
                raise ValueError(f"{where.path}: field '{at}.layouts[{lay_i}].files' has no split {split!r}")
    labels = where.get(data, "labels", list, at=at, default=None)
    recipes = where.get(data, "recipes", dict, at=at, default={})
    for rname, recipe in recipes.items():
        _recipe(where, f"{at}.recipes.{rname}", recipe)
    return TaskSpec(
        name=name,
        kind=kind,
        metrics=metrics,
        select=where.get(data, "select", str, at=at, default="+".join(own)),
        layouts=layouts,
        labels=[str(x) for x in labels] if labels is not None else None,
        evals=evals,
        submissions=submissions,
        score_range=where.get(data, "score_range", list, at=at, default=None),
        warm_start=where.get(data, "warm_start", str, at=at, default=None),
        recipes=recipes,
    )


def _layout(where: _Where, at: str, data: Any, kind: str) -> Layout:
    if not isinstance(data, dict):
        raise ValueError(f"{where.path}: field {at!r} must be a table")
    where.keys(data, at, _LAYOUT_KEYS)
    fmt = where.get(data, "format", str, at=at)
    if fmt not in FORMATS:
        raise ValueError(f"{where.path}: field '{at}.format' must be one of {FORMATS}, got {fmt!r}")
    if (fmt == "json") == (kind in TABLE_KINDS):
        expected = "tsv, csv or parquet" if kind in TABLE_KINDS else "json"
        raise ValueError(f"{where.path}: field '{at}.format': a {kind} task is read from {expected} files")
    lay = Layout(
        format=fmt,
        dir=where.get(data, "dir", str, at=at),
        files=where.get(data, "files", dict, at=at),
        text=where.get(data, "text", list, at=at, default=[]),
        label=where.get(data, "label", str, at=at, default=None),
        test_text=where.get(data, "test_text", list, at=at, default=None),
        index=where.get(data, "index", str, at=at, default=None),
        skip_malformed=where.get(data, "skip_malformed", bool, at=at, default=False),
    )
    if fmt != "json" and not (1 <= len(lay.text) <= 2 and lay.label):
        raise ValueError(f"{where.path}: field '{at}': a table layout names one or two 'text' columns and a 'label'")
    return lay


def _recipe(where: _Where, at: str, data: Any) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where.path}: field {at!r} must be a table of settings")
    unknown = sorted(set(data) - set(RECIPE_FIELDS))
    if unknown:
        raise ValueError(f"{where.path}: field '{at}': unknown setting(s) {unknown}; a recipe sets {RECIPE_FIELDS}")


@dataclass
class _Where:
    """Reads fields of a suite file, naming the file and the field in every error."""

    path: Path

    def keys(self, data: dict[str, Any], at: str, known: set[str]) -> None:
        unknown = sorted(set(data) - known)
        if unknown:
            prefix = f"{at}." if at else ""
            raise ValueError(f"{self.path}: unknown field(s) {[prefix + k for k in unknown]}; known: {sorted(known)}")

    def get(self, data: dict[str, Any], key: str, kind: type, *, at: str = "", default: Any = ...) -> Any:
        name = f"{at}.{key}" if at else key
        if key not in data:
            if default is ...:
                raise ValueError(f"{self.path}: missing field {name!r}")
            return default
        value = data[key]
        if not isinstance(value, kind):
            raise ValueError(f"{self.path}: field {name!r} must be a {kind.__name__}, got {value!r}")
        return value
