"""The evaluation suites: a pretrained model fine-tuned on every task of GLUE, the paper's five tasks or a suite
file of one's own, several seeds each, scored by each task's official metric and summarised as the paper does.

spec.py      suite files (TOML): tasks, their layouts on disk, columns, metrics, recipes; files/ holds the shipped
layouts.py   the user's files (GLUE TSVs, the Hub's parquet, SQuAD/RACE JSON) -> the TSVs fine-tuning reads
units.py     one (task, seed): `finetune`, then the best model scored, checked for collapse, run on test
schedule.py  units side by side: CPU processes or one per GPU; progress; failures kept apart
scores.py    per-seed metrics, medians and min-max, the GLUE score / five-task average
report.py    results.md, seeds.png, the leaderboard files
run.py       SuiteConfig and `run_suite`, the entry point
"""

from litebert.finetune.suite.run import SuiteConfig, SuiteResult, run_suite
from litebert.finetune.suite.spec import Suite, TaskSpec, load_suite, shipped_suites

__all__ = ["Suite", "SuiteConfig", "SuiteResult", "TaskSpec", "load_suite", "run_suite", "shipped_suites"]
