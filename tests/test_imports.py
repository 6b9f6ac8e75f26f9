"""The package's import graph: no cycles, no litebert import hidden in a function body (the CLI's lazy imports
aside), and import-linter's contracts (pyproject.toml) hold and would catch a forbidden import."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "litebert"


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_round_a_cycle():
    graph = grimp.build_graph("litebert")
    modules = {m for m in graph.modules if m.startswith("litebert")}
    edges = {m: {x for x in graph.find_modules_directly_imported_by(m) if x in modules} for m in modules}
    assert _cycles(edges) == []
    # the test sees cycles: a -> b -> a is one
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_library_modules_import_litebert_at_the_top_only():
    """Imports inside functions hide an import graph's real shape; the CLI alone defers them (for a fast --help)."""
    hidden = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "cli" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if any(n == "litebert" or n.startswith("litebert.") for n in names):
                    hidden.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert hidden == []


def _lint_imports(src: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is a test dependency (pip install -e '.[test]')"
    env = {"PYTHONPATH": str(src), "PATH": str(Path(sys.executable).parent)}
    return subprocess.run(
        [exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "src"
    shutil.copytree(PACKAGE, copy / "litebert", ignore=shutil.ignore_patterns("__pycache__", "corpus"))
    return copy


def test_import_contracts_hold(tmp_path):
    kept = _lint_imports(_copy(tmp_path))
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "broken" not in kept.stdout.lower().replace("0 broken", "")


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("model/albert.py", "import litebert.hf.directory", "Stages import one way"),  # the model above hf
        ("text/read.py", "import litebert.tokenizer.tokenizer", "Stages import one way"),  # a stage reaching up
        ("model/heads.py", "import litebert.text.normalize", "The model knows nothing of text"),
        ("data/build.py", "import tokenizers", "transformers' formats live in litebert.hf alone"),
    ],
)
def test_import_contracts_catch_a_forbidden_import(tmp_path, module, line, broken):
    copy = _copy(tmp_path)
    target = copy / "litebert" / module
    target.write_text(f"{line}  # noqa\n" + target.read_text(encoding="utf-8"), encoding="utf-8")
    result = _lint_imports(copy)
    assert result.returncode != 0
    assert broken in " ".join(result.stdout.split()) and "BROKEN" in result.stdout
