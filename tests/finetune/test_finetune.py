"""End to end fine-tuning on the official-format fixtures with a tiny model and the in-process tokenizer:
span QA and multiple choice learn their files, the protocol's outputs (results.json, best/) are usable,
and bad input fails with a message that names the problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import litebert
from litebert.cli import main
from litebert.finetune import finetune
from litebert.finetune.run import load_pretrained
from litebert.finetune.saved import evaluate, load_finetuned, predict
from litebert.finetune.tasks.squad_eval import evaluate_files

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_squad_v2_learns_its_file_and_outputs_agree_with_the_official_metric(ft_cfg, tmp_path):
    torch.set_num_threads(1)
    data = str(FIXTURES / "squad_v2.json")
    # 64-token windows with stride 32: every context is split, so windows and max-context decoding are used.
    cfg = ft_cfg(
        tmp_path, task="squad", train=data, dev=data, max_steps=500, eval_every=125, doc_stride=32, max_query_length=24
    )
    result = finetune(cfg)
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["best"] == {"metric": "f1", "value": result.best_value, "step": result.best_step}
    assert results["input_report"]["train"]["context split into several doc_stride windows"] == 48
    # 12 of 48 questions are unanswerable: answering "" everywhere scores 25; a trained model does far better
    dev = results["dev_at_best"]
    assert dev["exact_match"] > 75 and dev["HasAns_f1"] > 75 and dev["NoAns_exact"] > 50
    # best/ is loadable by litebert.load and as a fine-tuned model; its predictions score as results.json says
    assert isinstance(litebert.load(tmp_path / "best"), litebert.AlbertForPretraining)
    preds = predict(tmp_path / "best", data, tmp_path / "pred.json")
    gold = json.loads(Path(data).read_text())["data"]
    assert set(preds) == {q["id"] for a in gold for p in a["paragraphs"] for q in p["qas"]}
    scored = evaluate_files(data, tmp_path / "pred.json")
    assert scored["exact_match"] == pytest.approx(dev["exact_match"]) and scored["f1"] == pytest.approx(dev["f1"])


def test_race_multiple_choice_learns_its_file(ft_cfg, tmp_path):
    torch.set_num_threads(1)
    data = str(FIXTURES / "race.json")
    cfg = ft_cfg(
        tmp_path,
        task="multiple-choice",
        train=data,
        dev=data,
        max_steps=60,
        eval_every=30,
        max_seq_length=96,
        max_qa_length=32,
    )
    result = finetune(cfg)
    assert result.best_value >= 0.75  # chance is 0.25 (four options, answers spread over A-D)
    preds = predict(tmp_path / "best", data)
    assert len(preds) == 24 and {p["answer"] for p in preds} <= set("ABCD")
    assert evaluate(tmp_path / "best", data)["accuracy"] == pytest.approx(result.best_value)


def test_cli_classification_finetune_evaluate_predict(model_dir, tmp_path, capsys):
    data = str(FIXTURES / "sst2.tsv")
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "run"),
        "--max-steps",
        "6",
        "--eval-every",
        "3",
        "--seed",
        "1",
        "--lr",
        "1e-3",
        "--batch-size",
        "4",
        "--warmup",
        "2",
    ]
    assert main(argv) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [h["step"] for h in results["history"]] == [3, 6]
    assert results["config"]["seed"] == 1 and results["state"]["labels"] == ["0", "1"]
    assert results["config"]["max_seq_length"] == 128  # unset: the model's max_position
    capsys.readouterr()
    assert main(["evaluate", "--init", str(tmp_path / "run" / "best"), "--data", data]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(results["dev_at_best"]["accuracy"])
    new = tmp_path / "new.tsv"
    new.write_text("sentence\nwhat a film\nawful\n")
    assert (
        main(
            ["predict", "--init", str(tmp_path / "run" / "best"), "--data", str(new), "--out", str(tmp_path / "p.json")]
        )
        == 0
    )
    preds = json.loads((tmp_path / "p.json").read_text())
    assert [p["line"] for p in preds] == [2, 3] and {p["label"] for p in preds} <= {"0", "1"}


def test_cli_squad_evaluate_prints_official_scores(capsys, tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"v1q1": "the Denver Broncos", "v1q2": "24", "v1q3": ""}))
    assert (
        main(
            [
                "evaluate",
                "--task",
                "squad",
                "--data",
                str(FIXTURES / "squad_v1.json"),
                "--predictions",
                str(tmp_path / "p.json"),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    # q1 exact after normalisation; q2 "24" vs "24–10" (the en dash is not ASCII punctuation): 0; q3 empty: 0
    assert out["exact_match"] == pytest.approx(100 / 3) and out["f1"] == pytest.approx(100 / 3)


@pytest.mark.parametrize(
    ("task", "train", "metric", "extra"),
    [
        ("token-classification", "conll2003.txt", "f1", {}),
        ("regression", "sts.tsv", "corr", {}),
        ("similarity", "sts.tsv", "spearman", {}),
        ("classification", "pairs.csv", "accuracy", {"text_columns": ("premise", "hypothesis")}),
        ("similarity", "pairs.csv", "accuracy", {"text_columns": ("premise", "hypothesis"), "label_column": "label"}),
    ],
)
def test_other_tasks_run(ft_cfg, tmp_path, task, train, metric, extra):
    path = str(FIXTURES / train)
    result = finetune(ft_cfg(tmp_path, task=task, train=path, dev=path, max_steps=4, eval_every=2, **extra))
    assert result.best_metric == metric and (tmp_path / "best" / "head.safetensors").is_file()
    ft = load_finetuned(tmp_path / "best")
    assert ft.task.name == task and ft.config.max_steps == 4
    assert len(predict(tmp_path / "best", path)) == len(
        ft.task.load(path, ft.tokenizer, ft.config, ft.state, mode="predict").examples
    )


def test_bad_input_messages(ft_cfg, model_dir, tmp_path, capsys):
    data = str(FIXTURES / "sst2.tsv")
    with pytest.raises(ValueError, match=r"max_seq_length \(512\) exceeds the model's maximum \(max_position = 128"):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_seq_length=512))
    with pytest.raises(ValueError, match=r"sst2.tsv: missing column\(s\) \['review'\]"):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, text_columns=("review",)))
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\nfine\t1\nso so\tneutral\n")
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        str(dev),
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "o"),
        "--max-seq-length",
        "32",
    ]
    assert main(argv) == 2
    assert "dev.tsv: line 3: label 'neutral' never seen in training" in capsys.readouterr().err
    with pytest.raises(ValueError, match="FinetuneConfig.task must be one of"):
        ft_cfg(tmp_path, task="ner", train=data, dev=data)
    with pytest.raises(ValueError, match=r"FinetuneConfig.warmup \(50 steps\) exceeds max_steps \(10\)"):
        ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=10, warmup=50)
    with pytest.raises(ValueError, match="max_seq_length=2 leaves no room for the text"):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_seq_length=2))
    one_class = tmp_path / "one.tsv"
    one_class.write_text("sentence\tlabel\ngood\t1\nfine\t1\n")
    with pytest.raises(ValueError, match="one.tsv: every training example has the label '1'; .* at least two"):
        finetune(ft_cfg(tmp_path, task="classification", train=str(one_class), dev=data))
    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("sentence1\tsentence2\tscore\na\tb\t0.5\nc\td\tnan\n")
    with pytest.raises(ValueError, match="mixed.tsv: line 3: 'nan' is not a finite number, but other rows"):
        finetune(ft_cfg(tmp_path, task="similarity", train=str(mixed), dev=str(mixed)))
    with pytest.raises(FileNotFoundError, match="sst2.tsv: is a file, not a model directory"):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, init=data))


def test_answer_not_in_context_is_counted_and_long_text_truncation_reported(ft_cfg, tmp_path):
    squad = json.loads((FIXTURES / "squad_v2.json").read_text())
    squad["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 3  # now points elsewhere
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(squad))
    long = tmp_path / "long.tsv"
    long.write_text("sentence\tlabel\n" + " ".join(["word"] * 200) + "\t1\nshort\t0\n")
    with pytest.warns(UserWarning, match="1 x answer span not in its context"):
        finetune(ft_cfg(tmp_path / "a", task="squad", train=str(bad), dev=str(bad), max_steps=1, max_query_length=24))
    report = json.loads((tmp_path / "a" / "results.json").read_text())["input_report"]["train"]
    assert report["answer span not in its context (example not used for training)"] == 1
    with pytest.warns(UserWarning, match="1 x truncated to max_seq_length=64"):
        finetune(ft_cfg(tmp_path / "b", task="classification", train=str(long), dev=str(long), max_steps=1))


def test_transformers_albert_dir_as_init(ft_cfg, tokenizer_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import transformers

    from litebert.tokenizer import Tokenizer

    vocab = Tokenizer.load(tokenizer_dir).vocab_size
    hf_cfg = transformers.AlbertConfig(
        vocab_size=vocab,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    transformers.AlbertForPreTraining(hf_cfg).save_pretrained(tmp_path / "hf")
    data = str(FIXTURES / "sst2.tsv")
    with pytest.raises(FileNotFoundError, match=r"holds no tokenizer \(no spiece.model\); pass --tokenizer DIR"):
        finetune(ft_cfg(tmp_path / "none", init=str(tmp_path / "hf"), task="classification", train=data, dev=data))
    shutil.copy(Path(tokenizer_dir) / "spiece.model", tmp_path / "hf" / "spiece.model")
    result = finetune(
        ft_cfg(
            tmp_path / "run",
            init=str(tmp_path / "hf"),
            task="classification",
            train=data,
            dev=data,
            max_steps=2,
            eval_every=1,
            max_seq_length=32,
        )
    )
    assert result.best_step in (1, 2) and litebert.load(tmp_path / "run" / "best").config.hidden_size == 32


def test_similarity_bi_encoder_learns_scored_pairs(ft_cfg, tmp_path):
    data = str(FIXTURES / "sts.tsv")
    result = finetune(
        ft_cfg(
            tmp_path,
            task="similarity",
            train=data,
            dev=data,
            max_steps=40,
            eval_every=20,
            batch_size=6,
            max_seq_length=32,
        )
    )
    assert result.best_value >= 0.9  # Spearman of cos(u, v) with the six gold scores after fitting them


def test_embed_cli_rows_follow_lines_and_long_texts_use_windows(model_dir, tmp_path, capsys):
    from litebert.finetune.embed import embed_texts, load_encoder

    long = " ".join(["whale ship sea captain"] * 60)  # far more pieces than max_position = 128
    (tmp_path / "in.txt").write_text(f"Call me Ishmael.\n\n{long}\n")
    assert main(["embed", str(tmp_path / "in.txt"), "--init", str(model_dir), "--out", str(tmp_path / "x.npy")]) == 0
    assert json.loads(capsys.readouterr().out) == {"shape": [3, 64], "windowed": 1, "out": str(tmp_path / "x.npy")}
    x = np.load(tmp_path / "x.npy")
    backbone, tok = load_encoder(model_dir)
    alone = embed_texts(backbone, tok, ["Call me Ishmael."]).vectors[0]
    np.testing.assert_allclose(x[0], alone, atol=1e-5)  # batching and padding do not change a row
    # the long text is the token-weighted mean of its windows, each [CLS] <= 126 pieces [SEP]
    ids = tok.encode(long)
    vecs, weights = [], []
    with torch.no_grad():
        for k in range(0, len(ids), 126):
            seq = torch.tensor([[tok.cls_id, *ids[k : k + 126], tok.sep_id]])
            vecs.append(backbone(seq)[0][0].mean(0).numpy())
            weights.append(seq.shape[1])
    np.testing.assert_allclose(x[2], np.average(vecs, axis=0, weights=weights), atol=1e-5)
    # rows follow "\n"-terminated lines (CRLF too); a lone "\r" inside a line is text, as wc -l counts
    (tmp_path / "cr.txt").write_bytes(b"one\r\ntwo\rstill two\nthree")
    assert main(["embed", str(tmp_path / "cr.txt"), "--init", str(model_dir), "--out", str(tmp_path / "y.npy")]) == 0
    assert np.load(tmp_path / "y.npy").shape == (3, 64)


def test_length_grouped_batches_cover_every_feature_once_per_epoch_and_pad_little():
    import numpy as np

    from litebert.finetune.batches import LENGTH_GROUP, train_batches
    from litebert.finetune.tasks.base import TaskData
    from litebert.finetune.tasks.common import Report

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 60, size=8 * LENGTH_GROUP * 2 + 5)
    features = [{"input_ids": np.full(n, i % 50 + 5), "labels": np.int64(i)} for i, n in enumerate(lengths)]
    data = TaskData(features=features, examples=[], report=Report(source="synthetic"))
    pad = {"input_ids": 0}
    padded = {}
    for grouped in (False, True):
        batches = train_batches(data, 8, pad, np.random.default_rng(1), group_by_length=grouped)
        epoch = [next(batches) for _ in range(-(-len(features) // 8))]
        seen = sorted(int(i) for b in epoch for i in b["labels"])
        assert seen == list(range(len(features)))  # one epoch = every feature exactly once
        padded[grouped] = sum(b["input_ids"].numel() for b in epoch)
    assert padded[True] < 1.1 * lengths.sum() < 0.8 * padded[False]


def test_mean_pooling_head_averages_real_tokens_and_is_kept_by_the_saved_model(ft_cfg, model_dir, tmp_path, capsys):
    from litebert.finetune.heads import build_head, mean_pool

    base = litebert.load(model_dir)
    head = build_head("sequence", base.config, 2, pooling="mean").eval()
    ids = torch.tensor([[2, 10, 11, 3, 0, 0], [2, 12, 13, 14, 15, 3]])
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)}
    hidden, pooled_cls = base.albert(ids, batch["attention_mask"], batch["token_type_ids"])
    by_hand = torch.stack([hidden[0, :4].mean(0), hidden[1].mean(0)])  # padding left out of the average
    assert torch.allclose(mean_pool(hidden, batch["attention_mask"]), by_hand, atol=1e-6)
    with torch.no_grad():
        assert torch.allclose(head(base.albert, batch)["logits"], head.out(by_hand), atol=1e-5)
        assert not torch.allclose(head.out(pooled_cls), head.out(by_hand), atol=1e-3)
    with pytest.raises(ValueError, match="pooling"):
        ft_cfg(tmp_path, task="classification", train="x", dev="x", pooling="max")

    data = str(FIXTURES / "sst2.tsv")
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "run"),
        "--max-steps",
        "4",
        "--eval-every",
        "2",
        "--pooling",
        "mean",
    ]
    assert main(argv) == 0
    ft = load_finetuned(tmp_path / "run" / "best")
    assert ft.config.pooling == "mean" and ft.model.head.pooling == "mean"
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--init", str(tmp_path / "run" / "best"), "--data", data]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(results["dev_at_best"]["accuracy"])


def test_mean_pooling_choice_head_scores_each_option_by_its_token_average(ft_cfg, model_dir, tmp_path, capsys):
    from litebert.finetune.heads import build_head, mean_pool

    base = litebert.load(model_dir)
    head = build_head("choice", base.config, 1, pooling="mean").eval()
    ids = torch.tensor([[[2, 10, 3, 11, 3, 0], [2, 10, 3, 12, 13, 3]]])  # (B=1, C=2 options, T=6)
    batch = {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)}
    flat = {k: v.reshape(2, 6) for k, v in batch.items()}
    with torch.no_grad():
        hidden, pooled_cls = base.albert(flat["input_ids"], flat["attention_mask"], flat["token_type_ids"])
        by_hand = head.out(mean_pool(hidden, flat["attention_mask"])).view(1, 2)
        assert torch.allclose(head(base.albert, batch)["logits"], by_hand, atol=1e-5)
        assert not torch.allclose(head.out(pooled_cls).view(1, 2), by_hand, atol=1e-4)
    # Heads that read every token (span, token tags) or always mean-pool (similarity) refuse the option.
    for task in ("squad", "token-classification", "similarity"):
        with pytest.raises(ValueError, match=rf"pooling 'mean' \(--pooling\) applies to .*not to task '{task}'"):
            ft_cfg(tmp_path, task=task, train="x", dev="x", pooling="mean")
    with pytest.raises(ValueError, match="not to 'span'"):
        build_head("span", base.config, 2, pooling="mean")
    # on the command line even "--pooling cls" is refused there: similarity would silently mean-pool anyway
    data = str(FIXTURES / "sts.tsv")
    argv = [
        "finetune",
        "--task",
        "similarity",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "sim"),
        "--pooling",
        "cls",
    ]
    assert main(argv) == 2 and not (tmp_path / "sim").exists()
    assert "pooling 'cls' (--pooling) applies to classification" in capsys.readouterr().err


def test_library_use_paths_and_caller_state(ft_cfg, model_dir, tmp_path):
    from litebert.finetune.embed import embed_texts, load_encoder

    data = FIXTURES / "sst2.tsv"  # a Path, as library users pass them
    cfg = ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=1, max_seq_length=None)
    torch.manual_seed(5)
    result = finetune(cfg)
    after = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(3))  # the caller's random stream goes on as if nothing ran
    assert cfg.max_seq_length is None  # the caller's config is not changed
    ft = load_finetuned(result.best_dir)
    assert not any(m.training for m in ft.model.modules())  # ready for inference: no dropout in the head
    with pytest.warns(UserWarning, match="replacing the results and best checkpoint of an earlier run"):
        finetune(cfg)
    assert json.loads(result.results_path.read_text())["config"]["train"] == str(data)
    backbone, tok = load_encoder(model_dir)
    backbone.train()
    full = litebert.load(model_dir)
    vecs = embed_texts(full, tok, ["Call me Ishmael."]).vectors  # the model holding the backbone works too
    assert vecs.shape == (1, 64) and full.training is False
    embed_texts(backbone, tok, ["Call me Ishmael."])
    assert backbone.training  # the caller's mode is left as it was
    with pytest.raises(TypeError, match="a list of strings"):
        embed_texts(backbone, tok, "Call me Ishmael.")


def test_bad_settings_are_refused_with_their_flag(ft_cfg, model_dir, tmp_path, capsys):
    data = str(FIXTURES / "sst2.tsv")
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto.FromString((model_dir / "spiece.model").read_bytes())
    proto.pieces[10].piece, proto.pieces[11].piece = proto.pieces[11].piece, proto.pieces[10].piece
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "spiece.model").write_bytes(proto.SerializeToString())  # same size, other pieces
    with pytest.raises(ValueError, match=r"other: its pieces differ from those of .*spiece.model, the model's own"):
        load_pretrained(
            ft_cfg(tmp_path, task="classification", train=data, dev=data, tokenizer=str(tmp_path / "other"))
        )
    load_pretrained(ft_cfg(tmp_path, task="classification", train=data, dev=data, tokenizer=str(model_dir)))
    with pytest.raises(ValueError, match=r"FinetuneConfig.lr must be a finite number, got inf"):
        ft_cfg(tmp_path, task="classification", train=data, dev=data, lr=float("inf"))
    with pytest.raises(ValueError, match=r"FinetuneConfig.null_score_diff_threshold must be a finite number, got nan"):
        ft_cfg(tmp_path, task="squad", train=data, dev=data, null_score_diff_threshold=float("nan"))
    with pytest.raises(ValueError, match=r"FinetuneConfig.weight_decay must be >= 0, got -3"):
        ft_cfg(tmp_path, task="classification", train=data, dev=data, weight_decay=-3.0)
    for bad, message in (
        (dict(lr="1e-4"), "lr must be float, got '1e-4'"),
        (dict(seed="0"), "seed must be int"),
        (dict(seed=-1), r"seed must be an integer in \[0, 2\*\*63\), got -1"),
        (dict(optimizer="sgd"), r"optimizer must be one of \('lamb', 'adamw', .*got 'sgd'"),
        (dict(text_columns=[1]), r"text_columns must be column names, got \(1,\)"),
    ):
        with pytest.raises(ValueError, match="FinetuneConfig." + message):
            ft_cfg(tmp_path, task="classification", train=data, dev=data, **bad)
    for columns in ("sentence1, sentence2", ["sentence1", "sentence2"]):  # as the CLI and finetune.json give them
        assert ft_cfg(tmp_path, task="regression", train=data, dev=data, text_columns=columns).text_columns == (
            "sentence1",
            "sentence2",
        )
    same = [("classification", {"label_column": "sentence"}), ("classification", {"text_columns": ("label",)})]
    for task, kw in [*same, ("similarity", {"label_column": "sentence2"})]:
        with pytest.raises(ValueError, match=r"label_column '\w+' \(--label-column\) is also one of the text columns"):
            ft_cfg(tmp_path, task=task, train=data, dev=data, **kw)
    for task, kw in [
        ("squad", {"text_columns": "question", "max_query_length": 16}),
        ("token-classification", {"label_column": "tag"}),
    ]:
        with pytest.raises(ValueError, match=rf"are for table files .*; task '{task}' reads its own format"):
            ft_cfg(tmp_path, task=task, train=data, dev=data, **kw)
    argv = [
        "finetune",
        "--task",
        "classification",
        "--train",
        data,
        "--dev",
        data,
        "--init",
        str(model_dir),
        "--out",
        str(tmp_path / "o"),
    ]
    for device, reason in (("tpu", "Expected one of cpu, cuda"), (f"cuda:{torch.cuda.device_count()}", "")):
        assert main([*argv, "--device", device]) == 2  # cuda:N past the last GPU, or any cuda without one
        assert f"FinetuneConfig.device '{device}' (--device) cannot be used here: {reason}" in capsys.readouterr().err
    (tmp_path / "in.txt").write_text("Call me Ishmael.\n")
    assert (
        main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                "--init",
                str(model_dir),
                "--out",
                str(tmp_path / "x.npy"),
                "--batch-size",
                "0",
            ]
        )
        == 2
    )
    assert "batch_size (--batch-size) must be a positive integer, got 0" in capsys.readouterr().err
    assert (
        main(
            [
                "embed",
                str(tmp_path / "in.txt"),
                "--init",
                str(model_dir),
                "--out",
                str(tmp_path / "x.npy"),
                "--max-seq-length",
                "600",
            ]
        )
        == 2
    )
    assert "max_seq_length 600 (--max-seq-length) exceeds the model's 128 positions" in capsys.readouterr().err


def test_labels_naming_the_same_number_two_ways_are_pointed_out(tmp_path):
    from litebert.finetune.tasks.classification import ClassificationTask, read_labeled_table

    path = tmp_path / "t.csv"
    path.write_text("sentence,label\ngood,1\nbad,2\nfine,1.0\n")
    examples = read_labeled_table(path, ("sentence",), "label")
    state: dict = {}
    with pytest.warns(UserWarning, match=r"t.csv: labels \['1', '1.0'\] are the same number but different classes"):
        targets = ClassificationTask()._targets(path, examples, state, True)
    assert state["labels"] == ["1", "1.0", "2"] and [int(t) for t in targets] == [0, 2, 1]  # read as written


def test_an_interrupted_rerun_leaves_no_results_of_another_run(ft_cfg, tmp_path, monkeypatch):
    import litebert.finetune

    data = str(FIXTURES / "sst2.tsv")
    finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=1, lr=2e-5))
    assert (tmp_path / "results.json").is_file()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(litebert.finetune.run, "write_results", interrupted)  # killed after the new run's saves
    with pytest.warns(UserWarning, match="replacing the results"), pytest.raises(KeyboardInterrupt):
        finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=2, eval_every=1, lr=1e-3))
    assert not (tmp_path / "results.json").exists()  # the old run's would describe the new run's best/
    assert json.loads((tmp_path / "best" / "finetune.json").read_text())["config"]["lr"] == 1e-3
    # best/ saved whole, swapped in: no .best.tmp left; the step-1 checkpoint stays for --resume
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best", "checkpoints", "metrics.jsonl"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="file: --out is a file; it names the directory"):
        finetune(ft_cfg(tmp_path / "file", task="classification", train=data, dev=data, max_steps=1))


def test_a_nan_first_dev_score_is_replaced_by_the_first_number(ft_cfg, tmp_path, monkeypatch):
    # The first evaluation always saves best/; when its score is NaN (a regression model whose outputs are NaN
    # gives a NaN correlation) a later real score must still become the best (nothing compares > NaN).
    import litebert.finetune.run as finetune_module

    scores = iter([float("nan"), 0.5, 0.25])
    monkeypatch.setattr(finetune_module, "evaluate_data", lambda *a, **k: {"accuracy": next(scores)})
    data = str(FIXTURES / "sst2.tsv")
    result = finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=3, eval_every=1))
    assert (result.best_step, result.best_value) == (2, 0.5)
    assert json.loads((tmp_path / "results.json").read_text())["best"]["step"] == 2


def test_token_head_loss_is_the_tagged_mean_and_zero_for_a_batch_without_tags():
    """A batch whose words were all cut by truncation has no tagged token: its loss is 0, not NaN (which made
    results.json's train_loss NaN); otherwise the loss is the mean over tagged tokens."""
    from litebert.finetune.heads import IGNORE, TokenHead

    config = litebert.preset("tiny", vocab_size=50, max_position=16)
    torch.manual_seed(0)
    backbone, head = litebert.Albert(config), TokenHead(config, 3).eval()
    ids = torch.randint(5, 50, (2, 6))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    none = head(backbone, batch | {"labels": torch.full_like(ids, IGNORE)})["loss"]
    none.backward()
    assert none.item() == 0.0 and all(torch.isfinite(p.grad).all() for p in head.parameters())
    labels = torch.full_like(ids, IGNORE)
    labels[0, 1], labels[1, 3] = 2, 0
    out = head(backbone, batch | {"labels": labels})
    expected = torch.nn.functional.cross_entropy(out["logits"][labels != IGNORE].float(), labels[labels != IGNORE])
    torch.testing.assert_close(out["loss"], expected)


def test_finetune_refuses_flags_of_another_task(tmp_path, capsys):
    base = ["finetune", "--train", "t", "--dev", "d", "--init", "m", "--out", str(tmp_path / "o")]
    assert main([*base, "--task", "classification", "--doc-stride", "5"]) == 2
    assert "--doc-stride: for --task squad only; --task classification would ignore it" in capsys.readouterr().err
    assert main([*base, "--task", "squad", "--max-qa-length", "5"]) == 2
    assert "--max-qa-length: for --task multiple-choice only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
