"""Shared pytest fixtures: the test corpora (vendored under tests/fixtures, Moby-Dick from the package), a small
tokenizer and a tiny model saved with it."""

from __future__ import annotations

from pathlib import Path

import pytest

import litebert

FIXTURES = Path(__file__).resolve().parent / "fixtures"  # sources and licences: fixtures/README.md

# Fixtures of scope "package" are made once for every test under tests/ (its conftest.py is this file).


@pytest.fixture(scope="package")
def moby_dick() -> Path:
    """The 135 Moby-Dick chapters packaged with litebert (chapter_N.txt), which the default run trains on."""
    path = Path(litebert.__file__).resolve().parent / "corpus" / "moby-dick"
    assert len(list(path.glob("chapter_*.txt"))) == 135, f"expected the packaged Moby-Dick chapters in {path}"
    return path


@pytest.fixture(scope="package")
def corpora() -> Path:
    """tests/fixtures/corpora: sotu/ (13 State of the Union addresses) and ko/ (the Korean constitution, kobill/)."""
    return FIXTURES / "corpora"


@pytest.fixture(scope="package")
def labeled() -> Path:
    """tests/fixtures/labeled: a 440-row Rotten Tomatoes excerpt and the Lee document-similarity files."""
    return FIXTURES / "labeled"


@pytest.fixture(scope="package")
def tokenizer_dir(moby_dick, corpora, tmp_path_factory) -> Path:
    """A small litebert tokenizer (3,000 pieces) trained in-process on 40 Moby-Dick chapters, one State of the
    Union address and the Korean texts (about 2 s); other tests reuse it read-only."""
    from litebert.hf import write_hf_tokenizer_files
    from litebert.tokenizer.train import train_tokenizer

    inputs = sorted(moby_dick.glob("chapter_*.txt"))[:40]
    inputs += [corpora / "sotu" / "1790_george_washington_n.txt", corpora / "ko"]
    out = tmp_path_factory.mktemp("tokenizer")
    write_hf_tokenizer_files(train_tokenizer(inputs, out, vocab_size=3000))  # as `litebert tokenizer train` does
    return out


@pytest.fixture(scope="package")
def model_dir(tokenizer_dir, tmp_path_factory) -> Path:
    """A tiny randomly initialised model saved with the tokenizer (stands in for a pretrained one)."""
    import torch

    from litebert.tokenizer import Tokenizer

    torch.manual_seed(0)
    vocab = Tokenizer.load(tokenizer_dir).vocab_size
    cfg = litebert.preset(
        "tiny",
        vocab_size=vocab,
        embedding_size=32,
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position=128,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        classifier_dropout=0.0,
    )
    out = tmp_path_factory.mktemp("model")
    litebert.save(litebert.AlbertForPretraining(cfg), out, tokenizer_dir=tokenizer_dir)
    return out


@pytest.fixture
def ft_cfg(model_dir):
    """FinetuneConfig(out, **settings) for fine-tuning `model_dir` with small test settings."""
    from litebert.finetune import FinetuneConfig

    def make(out: Path, **kw) -> FinetuneConfig:
        base = dict(init=str(model_dir), out=str(out), lr=1e-3, batch_size=16, max_seq_length=64, seed=0)
        return FinetuneConfig(**{**base, **kw})

    return make
