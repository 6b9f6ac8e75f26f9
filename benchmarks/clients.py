"""Real ONNX clients load a litebert bundle and agree with litebert: transformers.js in Node
(`pipeline("text-classification", bundle)`, local files only) and Optimum's ORTModelForSequenceClassification, each
against litebert's own fine-tuned model and litebert's ONNX predictor, on the same sentences.

    python benchmarks/clients.py                          # a classifier fine-tuned here on the test fixtures
    python benchmarks/clients.py --bundle B --model M     # a bundle B exported from the fine-tuned model M
    python benchmarks/clients.py --install                # npm install --ignore-scripts @huggingface/transformers
                                                          # into a temporary directory first
    python benchmarks/clients.py --node-modules DIR --optimum-path DIR
    python benchmarks/clients.py --install --optimum --require   # .ci/run, after `pip install optimum-onnx`

transformers.js needs node and @huggingface/transformers (installed with --ignore-scripts: onnxruntime-node's install
script fetches GPU binaries from outside the registry; the CPU ones ship inside the package). Optimum needs
optimum-onnx, whose transformers pin (< 4.58) differs from litebert's test environment: either installed into this
environment (--optimum; `pip install optimum-onnx` moves transformers back to 4.57, so CI does it after its tests),
or given as a directory (`pip install --target DIR --no-deps optimum-onnx optimum transformers==4.57.* ...`); it
runs in a subprocess either way. A client that is not there is reported as such (an error with --require); the
script fails (exit 1) when a client that ran gives another label or a score more than 1e-4 away.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

JS = """
import { pipeline, env } from "@huggingface/transformers";
const [bundle, texts, dtype] = [process.argv[2], JSON.parse(process.argv[3]), process.argv[4]];
env.allowRemoteModels = false;
env.localModelPath = "";
const classify = await pipeline("text-classification", bundle, { local_files_only: true, dtype });
const out = [];
for (const t of texts) out.push((await classify(t))[0]);
console.log(JSON.stringify(out));
"""

OPTIMUM = """
import json, sys
import numpy as np
from optimum.onnxruntime import ORTModelForSequenceClassification
from transformers import AutoTokenizer
bundle, texts, name = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
load = ORTModelForSequenceClassification.from_pretrained
model = load(bundle, subfolder="onnx", file_name=name, local_files_only=True)
tok = AutoTokenizer.from_pretrained(bundle, local_files_only=True)
out = []
for text in texts:  # one at a time, as the pipelines run
    logits = np.asarray(model(**tok([text], return_tensors="np")).logits)[0]
    p = np.exp(logits - logits.max()); p /= p.sum()
    out.append({"label": model.config.id2label[int(p.argmax())], "score": float(p.max())})
print(json.dumps(out))
"""


def texts() -> list[str]:
    lines = (FIXTURES / "tasks" / "sst2.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0].strip() for line in lines] + ["Call me Ishmael.", "헌법 재판소"]


def build(work: Path) -> tuple[Path, Path]:
    """A tiny model fine-tuned for a few steps on the fixtures' SST-2 rows, and its bundle (fp32 and int8)."""
    import torch

    import litebert
    from litebert.export.bundle import export_onnx
    from litebert.finetune import FinetuneConfig, finetune
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.train import train_tokenizer

    chapters = sorted((Path(litebert.__file__).parent / "corpus" / "moby-dick").glob("chapter_*.txt"))[:20]
    tok = train_tokenizer(chapters, work / "tok", vocab_size=2000)
    write_hf_tokenizer_files(tok)
    torch.manual_seed(0)
    cfg = litebert.preset(
        "tiny",
        vocab_size=tok.vocab_size,
        embedding_size=32,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position=128,
    )
    litebert.save(litebert.AlbertForPretraining(cfg), work / "base", tokenizer_dir=work / "tok")
    data = str(FIXTURES / "tasks" / "sst2.tsv")
    finetune(
        FinetuneConfig(
            init=str(work / "base"),
            out=str(work / "ft"),
            task="classification",
            train=data,
            dev=data,
            max_steps=30,
            lr=1e-3,
            batch_size=4,
            max_seq_length=64,
            seed=0,
        )
    )
    return work / "ft" / "best", export_onnx(work / "ft" / "best", work / "bundle", int8=True)


def litebert_scores(model: Path, sentences: list[str]) -> list[dict]:
    import torch

    from litebert.finetune import load_finetuned

    ft = load_finetuned(model)
    labels, out = ft.state["labels"], []
    for text in sentences:
        with torch.no_grad():
            p = torch.softmax(ft.model(ft.tokenizer.batch([text], max_len=ft.config.max_seq_length))["logits"][0], -1)
        out.append({"label": labels[int(p.argmax())], "score": float(p.max())})
    return out


def predictor_scores(bundle: Path, sentences: list[str], quantized: bool) -> list[dict]:
    from litebert.export.predictor import OnnxPredictor

    predictor, out = OnnxPredictor(bundle, quantized=quantized), []
    labels = predictor.state["labels"]
    for text in sentences:
        ids = [predictor.tokenizer.cls_id, *predictor.tokenizer.encode(text), predictor.tokenizer.sep_id]
        feed = {
            "input_ids": np.asarray([ids]),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
        }
        logits = predictor.session.run(None, feed)[0][0]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        out.append({"label": labels[int(p.argmax())], "score": float(p.max())})
    return out


def node_modules(args: argparse.Namespace, work: Path) -> Path | None:
    if args.node_modules:
        return Path(args.node_modules)
    if args.install and shutil.which("npm"):
        cmd = ["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "@huggingface/transformers"]
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        return work / "node_modules"
    return None


def transformers_js(bundle: Path, sentences: list[str], modules: Path, quantized: bool) -> list[dict]:
    script = modules.parent / "litebert_client.mjs"  # beside node_modules, where node resolves the package
    script.write_text(JS)
    cmd = ["node", str(script), str(bundle.resolve()), json.dumps(sentences), "q8" if quantized else "fp32"]
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def optimum(bundle: Path, sentences: list[str], path: str | None, quantized: bool) -> list[dict]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"} | ({"PYTHONPATH": path} if path else {})
    name = "model_quantized.onnx" if quantized else "model.onnx"
    run = subprocess.run(
        [sys.executable, "-c", OPTIMUM, str(bundle), json.dumps(sentences), name],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def compare(name: str, got: list[dict], want: list[dict]) -> bool:
    labels = all(g["label"] == w["label"] for g, w in zip(got, want, strict=True))
    diff = max(abs(g["score"] - w["score"]) for g, w in zip(got, want, strict=True))
    print(f"{name:<40} labels {'equal' if labels else 'DIFFER'}   largest score difference {diff:.2e}")
    return labels and diff <= 1e-4


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bundle", type=Path, help="a bundle exported with --int8 (default: one built here)")
    p.add_argument("--model", type=Path, help="the fine-tuned model the bundle was exported from")
    p.add_argument("--node-modules", help="a node_modules directory holding @huggingface/transformers")
    p.add_argument("--install", action="store_true", help="npm install @huggingface/transformers into a temporary dir")
    p.add_argument("--optimum-path", help="a directory of optimum-onnx and its transformers (PYTHONPATH)")
    p.add_argument("--optimum", action="store_true", help="Optimum from this environment (pip install optimum-onnx)")
    p.add_argument("--require", action="store_true", help="exit 1 when transformers.js or Optimum cannot run")
    args = p.parse_args()
    # the bundle, the model and (with --install) ~0.5 GB of node_modules: all removed at the end
    with tempfile.TemporaryDirectory(prefix="litebert-clients-") as tmp:
        return _check(args, Path(tmp))


def _check(args: argparse.Namespace, work: Path) -> int:
    model, bundle = (args.model, args.bundle) if args.bundle else build(work)
    sentences = texts()
    reference = litebert_scores(model, sentences)
    ok = compare("litebert ONNX predictor, fp32", predictor_scores(bundle, sentences, False), reference)
    int8 = predictor_scores(bundle, sentences, True)
    agree = np.mean([g["label"] == w["label"] for g, w in zip(int8, reference, strict=True)])
    print(f"{'litebert ONNX predictor, int8':<40} labels agree {agree:.0%} (int8: not held to 1e-4)")
    modules = node_modules(args, work)
    if shutil.which("node") and modules and (modules / "@huggingface" / "transformers").is_dir():
        ok &= compare("transformers.js (Node), fp32", transformers_js(bundle, sentences, modules, False), reference)
        q8 = transformers_js(bundle, sentences, modules, True)
        ok &= compare("transformers.js (Node), q8 vs litebert int8", q8, int8)
    else:
        print("transformers.js: not run (needs node and --node-modules or --install)")
        ok &= not args.require
    if args.optimum_path or args.optimum:
        ok &= compare(
            "Optimum ORTModelForSequenceClassification", optimum(bundle, sentences, args.optimum_path, False), reference
        )
    else:
        print("Optimum: not run (needs --optimum or --optimum-path)")
        ok &= not args.require
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
