"""transformers.js (in Node) and Optimum load a litebert bundle and give litebert's labels and scores: the script
benchmarks/clients.py, run where node and npm are (it installs @huggingface/transformers from npm)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "clients.py"


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")), reason="transformers.js runs in node")
def test_transformers_js_gives_litebert_s_labels_and_scores():
    run = subprocess.run([sys.executable, str(SCRIPT), "--install"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "transformers.js (Node), fp32             labels equal" in run.stdout
