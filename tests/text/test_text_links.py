"""Symbolic links in a corpus directory: one that leads out of the directory is skipped with a warning naming it
(a link to /etc/shadow put its lines into a vocabulary), unless --follow-links; a path given explicitly is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from litebert.cli import main
from litebert.text import ReadConfig, iter_files, read_documents


@pytest.fixture
def corpus(tmp_path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "shadow").write_text("root secretpasswordhash\n")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "more.txt").write_text("Another private line.\n")
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("Call me Ishmael.\n")
    (root / "sub" / "b.txt").write_text("Some years ago.\n")
    (root / "shadow.txt").symlink_to(tmp_path / "etc" / "shadow")  # out of the corpus
    (root / "private").symlink_to(tmp_path / "secret", target_is_directory=True)  # out of the corpus
    (root / "same").symlink_to(root / "sub", target_is_directory=True)  # inside: followed (its files read once)
    return root


def test_a_link_out_of_the_directory_is_skipped_with_a_warning(corpus):
    with pytest.warns(
        UserWarning,
        match=rf"skipped 2 symbolic link\(s\) that lead out of their input directory "
        rf"\(first: {corpus}/private -> {corpus.parent}/secret\); pass --follow-links",
    ):
        files = iter_files(corpus)
    assert files == [corpus / "a.txt", corpus / "same" / "b.txt"]  # sub/ is same/, read once
    with pytest.warns(UserWarning, match="skipped 2 symbolic link"):
        docs = list(read_documents(corpus))
    assert "secretpasswordhash" not in str(docs)


def test_follow_links_reads_them_and_an_explicit_path_is_read_as_given(corpus):
    files = iter_files(corpus, follow_links=True)
    assert corpus / "shadow.txt" in files and corpus / "private" / "more.txt" in files
    assert "secretpasswordhash" in str(list(read_documents(corpus, config=ReadConfig(follow_links=True))))
    assert iter_files([corpus / "shadow.txt"]) == [corpus / "shadow.txt"]  # named by the user: read


def test_the_cli_flag(corpus, tmp_path):
    with pytest.warns(UserWarning, match=r"skipped 2 symbolic link\(s\) that lead out of their input directory"):
        assert main(["text", "prepare", str(corpus), "--out", str(tmp_path / "out.txt")]) == 0
    assert "secretpasswordhash" not in (tmp_path / "out.txt").read_text()
    assert main(["text", "prepare", str(corpus), "--out", str(tmp_path / "out.txt"), "--follow-links"]) == 0
    assert "secretpasswordhash" in (tmp_path / "out.txt").read_text()
