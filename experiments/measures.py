"""What a pretrained model is measured on before any fine-tuning: held-out MLM accuracy, the balanced NSP and SOP
probe sets (its own head, and a linear probe on its frozen pooled features), the per-layer smoothness, and its
parameter count.

Every model is measured on the same held-out text: the probe sets are made from the documents that no variant
trained on, whatever its objective (litebert.data.probe_documents), and MLM accuracy is read on the eval split of
the SOP data (every model's own eval split is reported too: the no-pair model's differs in layout, one packed
segment instead of a pair).
"""

from __future__ import annotations

import numpy as np
import torch
from runner import Runner, settings_key
from scales import VARIANTS

import litebert
from litebert.data import PretrainingBatches, probe_batches, probe_sets, read_manifest
from litebert.data.shards import ExampleBatch
from litebert.io import atomic_path
from litebert.model import count_parameters, layer_transitions
from litebert.train import dist, evaluate
from litebert.train.probe import score_pairs

FIELDS = ("input_ids", "offsets", "a_len", "label")


def probes(runner: Runner) -> dict[str, dict[str, ExampleBatch]]:
    """{"eval" | "train": {"sop" | "nsp": probe set}}: made once from the SOP data's documents, then read back."""
    data = runner.data("sop")
    s = runner.scale
    settings = {"data": data.name, "seed": 0, "pairs": [s.probe_pairs, s.probe_train_pairs]}
    path = runner.out / "probes" / f"{settings_key(settings)}.npz"
    runner.used.add(path.stem)
    if not path.is_file():
        with runner.timed("probes", path.stem):
            sets = {
                split: probe_sets(data, split, seed=0, max_pairs=cap)
                for split, cap in (("eval", s.probe_pairs), ("train", s.probe_train_pairs))
            }
            arrays = {
                f"{split}.{task}.{f}": getattr(ex, f)
                for split, tasks in sets.items()
                for task, ex in tasks.items()
                for f in FIELDS
            }
            path.parent.mkdir(exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                np.savez(f, **arrays)
    with np.load(path, allow_pickle=False) as stored:
        return {
            split: {task: ExampleBatch(**{f: stored[f"{split}.{task}.{f}"] for f in FIELDS}) for task in ("sop", "nsp")}
            for split in ("eval", "train")
        }


def _load(runner: Runner, name: str, share: float = 1.0) -> litebert.AlbertForPretraining:
    return litebert.load(runner.model_dir(name, share)).to(runner.device).eval()


def _mlm(runner: Runner, model: torch.nn.Module, data) -> dict:
    batches = PretrainingBatches(data, batch_size=runner.scale.eval_batch_size, split="eval", seed=0)
    vocab = read_manifest(data)["vocab_size"]
    result = evaluate(
        model, batches, dist.DistEnv(device=runner.device), vocab_size=vocab, max_batches=runner.scale.mlm_eval_batches
    )
    return {
        k: result[k]
        for k in ("eval_mlm_acc", "eval_mlm_loss", "eval_masked_tokens", "eval_unigram_acc", "eval_majority_acc")
        if k in result
    }


def intrinsic(runner: Runner, name: str, share: float = 1.0) -> dict:
    """Held-out MLM (on the SOP data's eval split, and on the model's own) and both pair tasks, head and probe."""
    run = runner.pretrain(name)
    settings = {
        "run": run.name,
        "share": share,
        "probes": [runner.scale.probe_pairs, runner.scale.probe_train_pairs],
        "mlm_batches": runner.scale.mlm_eval_batches,
    }

    def compute() -> dict:
        model = _load(runner, name, share)
        sets = probes(runner)
        pad = read_manifest(runner.data("sop"))["special_ids"]["pad"]
        out = {"mlm": _mlm(runner, model, runner.data("sop"))}
        if VARIANTS[name].objective != "sop":
            out["mlm_own_data"] = _mlm(runner, model, runner.data(VARIANTS[name].objective))
        for task in ("nsp", "sop"):
            out[task] = score_pairs(
                model, sets["train"][task], sets["eval"][task], pad_id=pad, batch_size=runner.scale.eval_batch_size
            )
        return out

    return runner.cached("intrinsic", settings, compute)


def _in_order(examples: ExampleBatch) -> ExampleBatch:
    """The label-0 examples of a SOP probe set: held-out text in its own order."""
    keep = np.flatnonzero(examples.label == 0)
    parts = [examples.slice(int(k), int(k) + 1) for k in keep]
    return ExampleBatch.concat(parts) if len(parts) > 1 else parts[0]


def smoothness(runner: Runner, name: str) -> dict:
    """Mean L2 distance and cosine similarity between each layer's input and output embeddings, over the tokens
    of the held-out in-order SOP probe pairs."""
    run = runner.pretrain(name)

    def compute() -> dict:
        model = _load(runner, name)
        examples = _in_order(probes(runner)["eval"]["sop"])
        pad = read_manifest(runner.data("sop"))["special_ids"]["pad"]
        total = None
        for batch in probe_batches(examples, runner.scale.eval_batch_size, pad):
            batch = {k: v.to(runner.device) for k, v in batch.items()}
            part = layer_transitions(model, batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
            total = part if total is None else total + part
        return {**total.means(), "tokens": total.tokens, "sequences": len(examples)}

    return runner.cached("smoothness", {"run": run.name, "probes": runner.scale.probe_pairs}, compute)


def parameters(runner: Runner, name: str) -> dict:
    """Parameter counts of a variant (backbone: embeddings, projection, encoder, pooler; and with the heads)."""
    count = count_parameters(runner.model_config(name))
    return {"backbone": count.backbone, "total": count.total, "embeddings": count.embeddings, "encoder": count.encoder}
