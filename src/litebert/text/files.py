"""Which files a corpus is: paths given alone or several, directories expanded (recursively, sorted, hidden entries
left out), symbolic links that lead out of a directory skipped, a command's own output left out, files named twice
read once."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from litebert.io import check_input_file

Paths = str | os.PathLike | Sequence[str | os.PathLike]  # one path, or several


def path_list(paths: Paths) -> list[Path]:
    """One path given alone (a str is a path here, not a sequence of one-letter paths), or several."""
    return [Path(paths)] if isinstance(paths, str | os.PathLike) else [Path(p) for p in paths]


def iter_files(paths: Paths, *, exclude: Sequence[str | Path] = (), follow_links: bool = False) -> list[Path]:
    """Expand files and directories (recursively, sorted, hidden entries left out); missing paths raise.
    Files at or under an `exclude` path (a command's own output, when written inside its input) are left out.
    Inside a directory, a symbolic link that leads out of it is skipped with a warning naming it (a link to
    /etc/shadow put its lines into a vocabulary), unless `follow_links`; a path given explicitly is read as given."""
    files: list[Path] = []
    skip = [Path(p).resolve() for p in exclude]
    outside: list[tuple[Path, Path]] = []  # (link, where it leads), skipped
    for raw in path_list(paths):
        path = Path(raw)
        if path.is_dir():
            files.extend(_walk(path, None if follow_links else outside))
        elif path.exists():
            files.append(check_input_file(path))
        else:
            raise FileNotFoundError(f"no such file or directory: {path}")
    if outside:
        link, target = outside[0]
        warnings.warn(
            f"skipped {len(outside)} symbolic link(s) that lead out of their input directory (first: "
            f"{link} -> {target}); pass --follow-links (ReadConfig.follow_links) to read them",
            stacklevel=2,
        )
    if skip:
        files = [f for f in files if not any(r == x or x in r.parents for r in [f.resolve()] for x in skip)]
    if not files:
        named = ", ".join(str(p) for p in path_list(paths))
        raise ValueError(f"empty corpus: no files to read in {named} (names that begin with '.' are left out)")
    unique: dict[Path, Path] = {}  # resolved path -> the first mention of the file
    again = [f for f in files if unique.setdefault(f.resolve(), f) is not f]
    if again:  # a file read twice would put its text on both sides of the held-out split
        warnings.warn(f"{len(again)} file(s) given more than once are read once (first: {again[0]})", stacklevel=2)
    return list(unique.values())


def _walk(top: Path, outside: list[tuple[Path, Path]] | None) -> list[Path]:
    """The files under directory `top`, sorted, hidden ones left out; links that lead out of `top` are appended to
    `outside` and skipped (followed when `outside` is None)."""
    files: list[Path] = []
    real_top = top.resolve()
    seen: set[Path] = set()  # a linked directory is read (it was skipped without a word), each once

    def inside(entry: Path) -> bool:
        if outside is None or not entry.is_symlink():
            return True
        target = entry.resolve()
        if target == real_top or real_top in target.parents:
            return True
        outside.append((entry, target))
        return False

    for root, dirs, names in os.walk(top, followlinks=True):
        real = Path(root).resolve()
        if real in seen:  # a link back to a directory read already (a cycle)
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in sorted(dirs) if not d.startswith(".") and inside(Path(root) / d)]
        files.extend(Path(root) / n for n in sorted(names) if not n.startswith(".") and inside(Path(root) / n))
    return files
