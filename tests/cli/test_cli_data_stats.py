"""`litebert data build` / `litebert data stats` through the CLI, and the numbers data_stats reports."""

from __future__ import annotations

import numpy as np

from litebert.cli import main
from litebert.data import data_stats, read_examples, read_manifest


def test_cli_build_and_stats(moby_dick, tokenizer_dir, tmp_path, capsys):
    files = sorted(moby_dick.glob("chapter_*.txt"))[:20]
    out = tmp_path / "data"
    argv = [
        "data",
        "build",
        *map(str, files),
        "--tokenizer",
        str(tokenizer_dir),
        "--out",
        str(out),
        "--max-seq-length",
        "128",
        "--dupe-factor",
        "3",
        "--seed",
        "11",
        "--workers",
        "1",
        "--doc-per-file",
        "--no-progress",
        "--examples-per-shard",
        "500",
    ]
    assert main(argv) == 0
    assert "train" in capsys.readouterr().out
    manifest = read_manifest(out)
    assert manifest["settings"]["seed"] == 11 and manifest["settings"]["dupe_factor"] == 3
    assert main(["data", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    for needle in ("length histogram", "full length", "label 1", "masked:", "n-gram spans", "replacement"):
        assert needle in text
    stats = data_stats(out)
    examples = list(read_examples(out))
    assert stats.examples == len(examples) == stats.sampled
    labels = np.array([x["sentence_order_label"] for x in examples])
    assert stats.share_label_1 == labels.mean()
    assert abs(stats.replacement["mask"] - 0.8) < 0.02 and abs(stats.replacement["keep"] - 0.1) < 0.02
    assert abs(sum(stats.ngram_shares) - 1) < 1e-9 and stats.ngram_shares[0] > stats.ngram_shares[1]
    # Spans the budget did not shape follow p(n) ∝ 1/n (a small sample here: a loose tolerance).
    assert np.allclose(stats.ngram_shares_free, [6 / 11, 3 / 11, 2 / 11], atol=0.03)
    assert "lengths drawn where the budget did not bind" in text
    assert 0.12 < stats.masked_fraction < 0.17  # round(15%) of 128 is 19 < 20, so the budget is ~15%
    assert sum(c for _, _, c in stats.length_histogram) == stats.sampled
    # Dynamic data: statistics come from sampled masks.
    dyn = tmp_path / "dyn"
    assert main([*argv[: argv.index("--out") + 1], str(dyn), "--masking", "dynamic", "--no-progress"]) == 0
    dstats = data_stats(dyn)
    assert abs(dstats.replacement["mask"] - 0.8) < 0.03 and dstats.predictions_per_example > 10
    # A user error is a message, not a traceback.
    assert main(["data", "stats", str(tmp_path / "missing")]) == 2
    assert "no manifest" in capsys.readouterr().err
    short = [*argv[: argv.index("--out") + 1], str(tmp_path / "short"), "--max-seq-length", "16", "--no-progress"]
    assert main(short) == 0  # --max-predictions defaults to the length when 20 does not fit
    assert read_manifest(tmp_path / "short")["settings"]["max_predictions_per_seq"] == 16
    assert main(["data", "stats", str(dyn), "--max-examples", "0"]) == 2
    assert "max_examples (--max-examples) must be a positive integer" in capsys.readouterr().err


def test_ctrl_c_is_a_message_not_a_traceback(monkeypatch, capsys):
    import litebert.data

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(litebert.data, "data_stats", interrupted)
    assert main(["data", "stats", "anywhere"]) == 130
    assert capsys.readouterr().err == "litebert data: interrupted\n"


def test_masked_fraction_leaves_out_every_special_token(tokenizer_dir, tmp_path):
    # Objective "none" packs documents with a [SEP] between them: the fraction counted those separators as
    # maskable tokens, so it came out below the truth.
    from litebert.data import DataConfig, build

    (tmp_path / "c.txt").write_text("".join(f"The whale number {i} swam away.\n\n" for i in range(300)))
    config = DataConfig(max_seq_length=64, objective="none", dupe_factor=2, eval_fraction=0.0)
    build(tmp_path / "c.txt", tokenizer_dir, tmp_path / "data", config, progress=False)
    examples = list(read_examples(tmp_path / "data"))
    masked = sum(len(x["masked_positions"]) for x in examples)
    special_ids = read_manifest(tmp_path / "data")["special_ids"]
    specials = 0
    for x in examples:
        ids = x["input_ids"].copy()
        ids[x["masked_positions"]] = x["masked_labels"]
        specials += int(np.isin(ids, [special_ids["cls"], special_ids["sep"]]).sum())
    assert specials > 5 * len(examples)  # several documents per example
    expected = masked / (sum(len(x["input_ids"]) for x in examples) - specials)
    assert abs(data_stats(tmp_path / "data").masked_fraction - expected) < 1e-12
