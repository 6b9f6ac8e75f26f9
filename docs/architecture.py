"""Draw litebert's import graph from the code: docs/architecture.svg and .png (packages in their layers) and
docs/architecture-modules.svg (every module, inside its package).

    python docs/architecture.py            # needs grimp (installed with import-linter: pip install -e '.[test]')
                                           # and Graphviz's `dot` (apt-get install graphviz, brew install graphviz)

The layers are read from the "layers" contract of pyproject.toml, the contract `lint-imports` checks. Before
drawing, the script checks what the picture must show: no module imports itself round a cycle, and no arrow
points up a layer or across to a sibling. It exits with an error naming the offending imports otherwise.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
API, MAIN = "litebert", "litebert.__main__"  # the public API (__init__.py) and `python -m litebert`, on top
COLOURS = ["#f4f4f4", "#fff1c1", "#e2f0cb", "#d7ecf7", "#e8e0f5", "#fbe3d0", "#e0f2ef", "#eeeeee", "#fde2e4"]


def read_layers() -> list[list[str]]:
    """The layers contract of pyproject.toml, top first, each layer a list of sibling packages."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return [[name.strip() for name in layer.split("|")] for layer in layers]


def package_of(module: str) -> str:
    """litebert.train.loop -> litebert.train; the root package and __main__ stand for themselves."""
    return module if module in (API, MAIN) else ".".join(module.split(".")[:2])


def module_edges(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    """(importer, imported) for every direct import between litebert's modules."""
    modules = set(graph.modules)
    return {(a, b) for a in modules for b in graph.find_modules_directly_imported_by(a) if b in modules}


def find_cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    succ: dict[str, list[str]] = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    nodes = sorted({n for e in edges for n in e})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def check(edges: set[tuple[str, str]], rank: dict[str, int]) -> list[str]:
    """What would make the picture wrong: cycles, and imports that go up a layer or across to a sibling."""
    problems = [f"cycle: {' -> '.join(c)}" for c in find_cycles(edges)]
    for a, b in sorted(edges):
        pa, pb = package_of(a), package_of(b)
        if pa != pb and rank[pa] >= rank[pb]:
            problems.append(f"{a} imports {b}: {pb} is not in a layer below {pa}")
    return problems


def package_dot(edges: set[tuple[str, str]], layers: list[list[str]], sizes: Counter) -> str:
    lines = [
        "digraph litebert {",
        '  graph [rankdir=TB, ranksep=0.55, nodesep=0.35, fontname="Helvetica", fontsize=11, '
        'label="litebert: packages in their layers (arrows: imports, labelled with how many module-to-module '
        'imports each stands for)", labelloc=b];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=12, margin="0.18,0.06"];',
        '  edge [color="#555555", arrowsize=0.7, fontname="Helvetica", fontsize=9, fontcolor="#777777"];',
    ]
    for i, layer in enumerate(layers):
        colour = COLOURS[i % len(COLOURS)]
        lines.append("  { rank=same;")
        for pkg in layer:
            if pkg == API:
                label = "litebert\\n(__init__: the public API)"
            elif pkg == MAIN:
                label = "__main__\\n(python -m litebert)"
            elif sizes[pkg] == 1:  # a module, not a package
                label = f"{pkg.split('.', 1)[1]}.py"
            else:
                label = f"{pkg.split('.', 1)[1]}/\\n({sizes[pkg]} modules)"
            lines.append(f'    "{pkg}" [label="{label}", fillcolor="{colour}"];')
        lines.append("  }")
    for i in range(len(layers) - 1):  # invisible edges keep the layers in order even where no import joins them
        lines.append(f'  "{layers[i][0]}" -> "{layers[i + 1][0]}" [style=invis, weight=10];')
    counts = Counter((package_of(a), package_of(b)) for a, b in edges if package_of(a) != package_of(b))
    for (pa, pb), n in sorted(counts.items()):
        lines.append(f'  "{pa}" -> "{pb}" [label="{n}", penwidth={1 + min(n, 20) / 8:.2f}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def module_dot(edges: set[tuple[str, str]], layers: list[list[str]], modules: list[str]) -> str:
    lines = [
        "digraph litebert_modules {",
        '  graph [rankdir=TB, newrank=true, compound=true, ranksep=0.45, nodesep=0.12, fontname="Helvetica", '
        'fontsize=11, label="litebert: every module inside its package (arrows: direct imports)", labelloc=b];',
        '  node [shape=box, style="filled", fontname="Helvetica", fontsize=10, height=0.25, margin="0.06,0.03"];',
        '  edge [color="#00000055", arrowsize=0.5];',
    ]
    by_package: dict[str, list[str]] = defaultdict(list)
    for m in modules:
        by_package[package_of(m)].append(m)
    for i, layer in enumerate(layers):
        colour = COLOURS[i % len(COLOURS)]
        for pkg in layer:
            if pkg in (API, MAIN):
                label = {API: "litebert/__init__.py", MAIN: "__main__.py"}[pkg]
                lines.append(f'  "{pkg}" [label="{label}", fillcolor="{colour}", style="filled,bold"];')
                continue
            name = pkg.split(".", 1)[1]
            lines.append(f'  subgraph "cluster_{name}" {{ label="{name}/"; style="rounded,filled"; '
                         f'fillcolor="{colour}"; color="#999999";')  # fmt: skip
            for m in sorted(by_package[pkg]):
                short = "__init__" if m == pkg else m[len(pkg) + 1 :]
                lines.append(f'    "{m}" [label="{short}", fillcolor="white"];')
            lines.append("  }")
    # An invisible anchor between each two layers, below every module of the one and above every module of the
    # next, stacks the layers top to bottom; the imports then all point down the page.
    for i in range(len(layers) - 1):
        lines.append(f'  "layer{i}" [shape=point, style=invis, width=0, height=0, label=""];')
        for m in (m for pkg in layers[i] for m in by_package[pkg]):
            lines.append(f'  "{m}" -> "layer{i}" [style=invis];')
        for m in (m for pkg in layers[i + 1] for m in by_package[pkg]):
            lines.append(f'  "layer{i}" -> "{m}" [style=invis];')
    for a, b in sorted(edges):
        inside = package_of(a) == package_of(b)
        lines.append(f'  "{a}" -> "{b}"' + (' [color="#000000aa"];' if inside else ";"))
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_source: str, out: Path, formats: list[str]) -> None:
    for fmt in formats:
        target = out.with_suffix(f".{fmt}")
        extra = ["-Gdpi=80"] if fmt == "png" else []
        subprocess.run(["dot", f"-T{fmt}", *extra, "-o", str(target)], input=dot_source, text=True, check=True)
        print(f"wrote {target.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="check the graph only, draw nothing")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    graph = grimp.build_graph("litebert")
    edges = module_edges(graph)
    layers = [[API, MAIN], *read_layers()]
    rank = {pkg: i for i, layer in enumerate(layers) for pkg in layer}
    modules = sorted(graph.modules)
    missing = sorted({package_of(m) for m in modules} - set(rank))
    if missing:
        print(f"packages in no layer of pyproject.toml's contract: {', '.join(missing)}", file=sys.stderr)
        return 1
    problems = check(edges, rank)
    if problems:
        print("the import graph is not layered:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"{len(modules)} modules, {len(edges)} imports: no cycle, every arrow points down a layer")
    if not args.check:
        sizes = Counter(package_of(m) for m in modules)
        render(package_dot(edges, layers, sizes), DOCS / "architecture", ["svg", "png"])
        render(module_dot(edges, layers, modules), DOCS / "architecture-modules", ["svg"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
