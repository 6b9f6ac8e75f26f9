"""Start-up: the commands that need no model import no torch, and none imports torch._dynamo (which the
variable-length attention kernel pulls in) or the optional heavy libraries before it uses them. Each case runs in
a fresh interpreter and reads its sys.modules; the times are benchmarks/startup.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "torch._dynamo", "matplotlib", "pyarrow", "transformers", "tokenizers")


def _loaded(code: str) -> set[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def _command(*argv: str) -> str:
    return f"from litebert.cli import main\ntry:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass"


@pytest.mark.parametrize(
    "code",
    [
        "import litebert.data",
        "import litebert.text",
        "import litebert.tokenizer",
        "import litebert.model.config",
        _command("--help"),
        _command("data", "build", "--help"),
        _command("data", "stats", "--help"),
        _command("text", "prepare", "--help"),
        _command("tokenizer", "--help"),
        _command("tokenizer", "train", "--help"),
        _command("params", "--paper"),
        _command("params", "--help"),
        _command("predict", "--help"),  # PredictConfig's module imports no torch: predict --onnx runs without it
    ],
    ids=lambda code: code.splitlines()[-3 if "main(" in code else 0].strip(),
)
def test_commands_without_a_model_import_no_torch(code):
    assert _loaded(code) == set()


def test_model_commands_import_torch_without_dynamo_or_optional_libraries():
    # one interpreter for all of them (torch's import is the slow part): none of them imports these
    loaded = _loaded(
        "import litebert.model.heads, litebert.cli.pretrain, litebert.finetune\n" + _command("pretrain", "--help")
    )
    assert "torch" in loaded
    assert loaded & {"torch._dynamo", "matplotlib", "pyarrow", "transformers"} == set()


def test_the_probe_sees_an_import():
    # the probe can fail: importing what it looks for is seen
    assert _loaded("import torch._dynamo") >= {"torch", "torch._dynamo"}
