"""The ONNX predictor: for every task, `litebert predict --onnx BUNDLE` gives what `litebert predict` gives, in a
process where torch, transformers, sentencepiece, tqdm, protobuf and litebert's other training-side dependencies
cannot be imported; a bundle whose files disagree is named."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from litebert.export.bundle import export_onnx
from litebert.finetune import finetune, load_finetuned, predict
from litebert.finetune.run import run_model

TASKS = Path(__file__).parents[1] / "fixtures" / "tasks"
# task -> its training (and prediction) file and settings; one step each: a fresh head's outputs are compared
RUNS = {
    "classification": ("sst2.tsv", {}),
    "regression": ("sts.tsv", {}),
    "token-classification": ("conll2003.txt", {}),
    "squad": ("squad_v2.json", {"max_seq_length": 64, "doc_stride": 32, "max_query_length": 16}),
    "multiple-choice": ("race.json", {"max_seq_length": 64, "max_qa_length": 32, "batch_size": 4}),
    "similarity": ("pairs.csv", {"text_columns": ("premise", "hypothesis"), "label_column": "label"}),
}

# litebert's dependencies a deployment that only predicts does without (docs/deploy.md installs numpy, onnxruntime
# and tokenizers alone), and transformers: none may be imported on the predictor's path.
BLOCKED = (
    "torch",
    "transformers",
    "sentencepiece",
    "tqdm",
    "google.protobuf",
    "sentencex",
    "safetensors",
    "matplotlib",
    "pyarrow",
    "onnx",
)
# Runs the command line once per (bundle, data, out) triple given as JSON, with BLOCKED unimportable: a finder ahead
# of every other refuses them.
NO_TORCH = """
import json, sys
blocked = tuple(json.loads(sys.argv[2]))
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in blocked):
            raise ImportError(f"{name} is blocked in this process")
sys.meta_path.insert(0, Blocked())
from litebert.cli import main
for bundle, data, out in json.loads(sys.argv[1]):
    assert main(["predict", "--onnx", bundle, "--data", data, "--out", out]) == 0
loaded = [m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in blocked)]
assert not loaded, loaded
"""


@pytest.fixture(scope="module")
def bundles(model_dir, tmp_path_factory) -> dict[str, tuple[Path, Path, Path]]:
    """task -> (fine-tuned model, its bundle, the data file), each fine-tuned for one step."""
    from litebert.finetune import FinetuneConfig

    root, made = tmp_path_factory.mktemp("bundles"), {}
    for task, (name, extra) in RUNS.items():
        data = str(TASKS / name)
        settings = {"max_seq_length": 64, "batch_size": 8, "seed": 0, **extra}
        cfg = FinetuneConfig(
            init=str(model_dir),
            out=str(root / task),
            task=task,
            train=data,
            dev=data,
            max_steps=1,
            eval_every=1,
            **settings,
        )
        finetune(cfg)
        made[task] = root / task / "best", export_onnx(root / task / "best", root / f"{task}-bundle"), Path(data)
    return made


def test_every_task_predicts_through_onnx_as_litebert_does_without_torch_or_the_other_training_libraries(
    bundles, tmp_path
):
    runs = [(str(bundle), str(data), str(tmp_path / f"{task}.json")) for task, (_, bundle, data) in bundles.items()]
    argv = [sys.executable, "-c", NO_TORCH, json.dumps(runs), json.dumps(BLOCKED)]
    child = subprocess.run(argv, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr[-3000:]
    for task, (model, _, data) in bundles.items():
        got, expected = json.loads((tmp_path / f"{task}.json").read_text()), predict(model, data)
        assert _close(got, expected), (task, got, expected)


def _close(a, b) -> bool:
    """Equal predictions: the same labels, tags and answers, and scores within 1e-4."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-4
    return a == b


@pytest.mark.parametrize("task", list(RUNS))
def test_each_task_graphs_outputs_equal_litebert_within_1e4(bundles, task):
    from litebert.export.predictor import OnnxPredictor

    model, bundle, data = bundles[task]
    ft, onnx = load_finetuned(model), OnnxPredictor(bundle)
    features = ft.task.load(data, ft.tokenizer, ft.config, ft.state, mode="predict")
    # the graph's batches of several sizes and lengths (sorted by length, 3 at a time) against litebert's
    onnx.cfg.eval_batch_size = 3
    ours, theirs = onnx.run(features), run_model(ft.model, features, ft.task.pad_values(ft.tokenizer), 3)
    for key in theirs:
        for x, y in zip(ours[key], theirs[key], strict=True):
            assert x.shape == y.shape and np.abs(x - y).max() <= 1e-4, key


def test_a_bundle_whose_files_disagree_is_named(bundles, tmp_path):
    from litebert.export.predictor import OnnxPredictor

    _, bundle, _ = bundles["classification"]
    broken = shutil.copytree(bundle, tmp_path / "broken")
    meta = json.loads((broken / "finetune.json").read_text())
    meta["state"]["labels"] = ["a", "b", "c"]
    (broken / "finetune.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="names 3 labels but the graph's head has 2 outputs"):
        OnnxPredictor(broken)
    shutil.copy(bundles["squad"][1] / "finetune.json", broken / "finetune.json")
    with pytest.raises(ValueError, match="are not those of a squad model"):
        OnnxPredictor(broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "vocab_size": 30000}))
    with pytest.raises(
        ValueError, match="tokenizer.json has 3000 pieces but config.json gives the model vocab_size 30000"
    ):
        OnnxPredictor(broken)
    (broken / "finetune.json").unlink()  # a pretrained model's bundle: no task to predict
    with pytest.raises(FileNotFoundError, match="finetune.json for a fine-tuned model"):
        OnnxPredictor(broken)
