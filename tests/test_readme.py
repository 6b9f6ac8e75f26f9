"""The README's Python snippets run as written (in a scratch directory holding the files they name)."""

from __future__ import annotations

import bz2
import csv
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_the_model_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(_snippets()[0], "README.md (model)", "exec"), scope)  # noqa: S102 - our own README
    assert scope["out"].loss.item() > 0 and not scope["model"].training
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()


@pytest.mark.slow
def test_the_pipeline_snippet_runs(tmp_path, monkeypatch, moby_dick, labeled):
    chapters = sorted(moby_dick.glob("chapter_*.txt"))[:9]
    (tmp_path / "corpus.txt").write_text("\n".join(p.read_text() for p in chapters))
    with bz2.open(labeled / "rotten_tomatoes.csv.bz2", "rt", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] in ("fresh", "rotten")][:260]
    for name, part in (("train.tsv", rows[:200]), ("dev.tsv", rows[200:])):
        lines = [" ".join(r["text"].split())[:300] + "\t" + r["category"] for r in part]
        (tmp_path / name).write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(_snippets()[1], "README.md (pipeline)", "exec"), scope)  # noqa: S102 - our own README
    assert len(scope["preds"]) == 60 and scope["probs"].shape == (2, 2)
    assert 0 <= scope["result"].best_value <= 1
