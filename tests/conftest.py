"""Shared pytest fixtures: paths to the shared real data."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert SHARED_DATA.is_dir(), f"expected the shared data at {SHARED_DATA}"
    return SHARED_DATA


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A small litebert tokenizer (3,000 pieces) trained in-process on 40 Moby-Dick chapters, one State of the
    Union address and the Korean texts (about 2 s); other tests reuse it read-only."""
    from litebert.tokenizer import train_tokenizer

    corpora = SHARED_DATA / "corpora"
    inputs = sorted((corpora / "moby-dick").glob("chapter_*.txt"))[:40]
    inputs += [corpora / "sotu" / "1790_george_washington_n.txt", corpora / "ko"]
    out = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(inputs, out, vocab_size=3000)
    return out
