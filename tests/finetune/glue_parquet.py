"""The Hub's parquet export of GLUE (nyu-mll/glue: cola/train-00000-of-00001.parquet, mnli/validation_matched-...,
ax/test-...), written from the download-script fixture in tests/fixtures/glue with pyarrow, as the Hub lays it
out: its column names, integer labels (the ClassLabel order) and -1 for the unlabelled test rows."""

from __future__ import annotations

from pathlib import Path

GLUE = Path(__file__).resolve().parents[1] / "fixtures" / "glue"

# task dir -> (hub dir, {hub column: fixture column or position}, hub label names in ClassLabel order or None)
HUB = {
    "CoLA": ("cola", {"sentence": "3"}, {"0": 0, "1": 1}),
    "SST-2": ("sst2", {"sentence": "sentence"}, {"0": 0, "1": 1}),
    "MRPC": ("mrpc", {"sentence1": "#1 String", "sentence2": "#2 String"}, {"0": 0, "1": 1}),
    "STS-B": ("stsb", {"sentence1": "sentence1", "sentence2": "sentence2"}, None),
    "QQP": ("qqp", {"question1": "question1", "question2": "question2"}, {"0": 0, "1": 1}),
    "MNLI": (
        "mnli",
        {"premise": "sentence1", "hypothesis": "sentence2"},
        {"entailment": 0, "neutral": 1, "contradiction": 2},
    ),
    "QNLI": ("qnli", {"question": "question", "sentence": "sentence"}, {"entailment": 0, "not_entailment": 1}),
    "RTE": ("rte", {"sentence1": "sentence1", "sentence2": "sentence2"}, {"entailment": 0, "not_entailment": 1}),
    "WNLI": ("wnli", {"sentence1": "sentence1", "sentence2": "sentence2"}, {"0": 0, "1": 1}),
}
LABEL = {"CoLA": "1", "MRPC": "Quality", "STS-B": "score", "QQP": "is_duplicate", "MNLI": "gold_label"}
SPLITS = {
    "train.tsv": "train",
    "dev.tsv": "validation",
    "test.tsv": "test",
    "dev_matched.tsv": "validation_matched",
    "dev_mismatched.tsv": "validation_mismatched",
    "test_matched.tsv": "test_matched",
    "test_mismatched.tsv": "test_mismatched",
}


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines[0].startswith("gj04"):  # CoLA's train and dev: no header row
        return [str(i) for i in range(4)], [line.split("\t") for line in lines]
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def write_hub_glue(out: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for task, (hub, columns, labels) in HUB.items():
        for path in sorted((GLUE / task).glob("*.tsv")):
            header, rows = _rows(path)
            test = path.name.startswith("test")
            want = dict(columns)
            if test and task == "CoLA":
                want = {"sentence": "sentence"}
            index = "id" if task == "QQP" else "index"
            rows = [r for r in rows if len(r) == len(header)]  # the Hub's export has no malformed QQP lines
            table: dict[str, list] = {k: [r[header.index(v)] for r in rows] for k, v in want.items()}
            label = LABEL.get(task, "label")
            if test:
                table["label"] = [-1] * len(rows)
            elif labels is None:
                table["label"] = [float(r[header.index(label)]) for r in rows]
            else:
                table["label"] = [labels[r[header.index(label)]] for r in rows]
            table["idx"] = [int(r[header.index(index)]) for r in rows] if test else list(range(len(rows)))
            target = out / hub / f"{SPLITS[path.name]}-00000-of-00001.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table(table), target)
    header, rows = _rows(GLUE / "diagnostic" / "diagnostic.tsv")
    ax = {
        "premise": [r[1] for r in rows],
        "hypothesis": [r[2] for r in rows],
        "label": [-1] * len(rows),
        "idx": [int(r[0]) for r in rows],
    }
    (out / "ax").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(ax), out / "ax" / "test-00000-of-00001.parquet")
    return out
