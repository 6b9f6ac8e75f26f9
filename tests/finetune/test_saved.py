"""A saved fine-tuned model directory: predictions on unlabelled files, evaluation, and damaged or mismatched
files (head, finetune.json) named in the error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from litebert.cli import main
from litebert.finetune import FinetuneConfig, finetune
from litebert.finetune.saved import evaluate, load_finetuned, predict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_predict_on_unlabelled_conll_and_race(ft_cfg, model_dir, tmp_path):
    conll = str(FIXTURES / "conll2003.txt")
    finetune(ft_cfg(tmp_path, task="token-classification", train=conll, dev=conll, max_steps=2, eval_every=2))
    words = tmp_path / "words.txt"
    words.write_text("Anna\nvisited\nLeeds\n\nHello\n")
    preds = predict(tmp_path / "best", words)
    assert [p["words"] for p in preds] == [["Anna", "visited", "Leeds"], ["Hello"]] and len(preds[0]["tags"]) == 3
    race = json.loads((FIXTURES / "race.json").read_text())[0]
    del race["answers"]
    (tmp_path / "q.json").write_text(json.dumps(race))
    data = str(FIXTURES / "race.json")
    # no lengths given: the model's 128 positions, and half of them (not the official 128) for question + option
    finetune(
        FinetuneConfig(
            init=str(model_dir),
            out=str(tmp_path / "mc"),
            task="multiple-choice",
            train=data,
            dev=data,
            max_steps=1,
            batch_size=4,
        )
    )
    saved = json.loads((tmp_path / "mc" / "best" / "finetune.json").read_text())["config"]
    assert (saved["max_seq_length"], saved["max_qa_length"]) == (128, 64)
    assert [p["id"] for p in predict(tmp_path / "mc" / "best", tmp_path / "q.json")] == [
        f"middle101.txt-{k}" for k in range(4)
    ]


def test_a_loaded_model_predicts_strings_in_memory_as_predict_does(ft_cfg, tmp_path):
    data = FIXTURES / "sts.tsv"  # pairs: sentence1, sentence2, score
    finetune(ft_cfg(tmp_path, task="regression", train=str(data), dev=str(data), max_steps=2))
    rows = [line.split("\t") for line in data.read_text().splitlines()[1:]]
    ft = load_finetuned(tmp_path / "best")
    batch = ft.tokenizer.batch([r[0] for r in rows], [r[1] for r in rows], max_len=ft.config.max_seq_length)
    assert batch["input_ids"].shape[0] == len(rows) and not batch["attention_mask"].all()  # padded on the right
    with torch.no_grad():
        scores = ft.model(batch)["logits"].reshape(-1)
    expected = [p["score"] for p in predict(tmp_path / "best", data)]
    assert torch.allclose(scores, torch.tensor(expected), atol=1e-5)
    with pytest.raises(TypeError, match="a list of strings as a, got one string"):
        ft.tokenizer.batch("one text")
    from litebert.hf.tokenizer import copy_tokenizer_with_hf_files as copy_tokenizer
    from litebert.tokenizer import add_words

    grown, _ = add_words(tmp_path / "best", ["harpooneerz"], tmp_path / "grown")  # one piece more than the model
    copy_tokenizer(grown.dir, tmp_path / "best")
    with pytest.raises(ValueError, match=r"best has 3001 pieces but the model's vocab_size is 3000; put back"):
        load_finetuned(tmp_path / "best")
    with pytest.raises(ValueError, match="2 first texts but 1 second texts"):
        ft.tokenizer.batch(["a", "b"], ["c"])


def test_predictions_are_utf8_whatever_the_locale(ft_cfg, tmp_path):
    import os
    import subprocess
    import sys

    conll = str(FIXTURES / "conll2003.txt")
    finetune(ft_cfg(tmp_path, task="token-classification", train=conll, dev=conll, max_steps=1))
    (tmp_path / "ko.txt").write_text("헌법 O\n재판소 O\n", encoding="utf-8")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    cli = "import sys; from litebert.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [
        "-c",
        cli,
        "predict",
        "--init",
        str(tmp_path / "best"),
        "--data",
        str(tmp_path / "ko.txt"),
        "--out",
        str(tmp_path / "p.json"),
    ]
    subprocess.run([sys.executable, "-X", "utf8=0", *argv], env=env, check=True, capture_output=True)
    assert json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))[0]["words"] == ["헌법", "재판소"]


def test_predict_refuses_to_write_over_its_data_or_model(ft_cfg, tmp_path, capsys):
    conll = tmp_path / "dev.txt"
    conll.write_text((FIXTURES / "conll2003.txt").read_text())
    finetune(ft_cfg(tmp_path, task="token-classification", train=str(conll), dev=str(conll), max_steps=1))
    for out in (conll, tmp_path / "best" / "finetune.json"):
        argv = ["predict", "--init", str(tmp_path / "best"), "--data", str(conll), "--out", str(out)]
        assert main(argv) == 2 and "the output would overwrite the input" in capsys.readouterr().err
    assert conll.read_text() == (FIXTURES / "conll2003.txt").read_text() and load_finetuned(tmp_path / "best")


def test_predict_ignores_labels_it_was_not_trained_on(ft_cfg, tmp_path):
    data = str(FIXTURES / "sst2.tsv")
    finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=1))
    with pytest.raises(ValueError, match="a model fine-tuned for 'classification', not 'regression'"):
        evaluate(tmp_path / "best", data, task="regression")
    new = tmp_path / "new.tsv"
    new.write_text("sentence\tlabel\nhello world\t2\nfine\t\n")  # an unseen class and an empty label
    assert [p["line"] for p in predict(tmp_path / "best", new)] == [2, 3]
    # a test file whose text column has another name (GLUE test files: index, sentence)
    test = tmp_path / "test.tsv"
    test.write_text("index\ttext\n0\thello world\n1\tfine\n")
    assert [p["line"] for p in predict(tmp_path / "best", test, text_columns=["text"])] == [2, 3]
    with pytest.raises(ValueError, match=r"trained on 1 text column\(s\) \['sentence'\]"):
        predict(tmp_path / "best", test, text_columns=["index", "text"])
    # a labelled file with other column names is scored by naming them (library and CLI)
    renamed = tmp_path / "renamed.tsv"
    renamed.write_text(Path(data).read_text().replace("sentence\tlabel", "review\tgold", 1))
    expected = evaluate(tmp_path / "best", data)["accuracy"]
    assert evaluate(tmp_path / "best", renamed, text_columns=["review"], label_column="gold")["accuracy"] == expected
    argv = [
        "evaluate",
        "--init",
        str(tmp_path / "best"),
        "--data",
        str(renamed),
        "--text-columns",
        "review",
        "--label-column",
        "gold",
    ]
    assert main(argv) == 0
    with pytest.raises(ValueError, match=r"label_column 'review' is also one of the text columns \['review'\]"):
        evaluate(tmp_path / "best", renamed, text_columns=["review"], label_column="review")
    conll = str(FIXTURES / "conll2003.txt")
    finetune(ft_cfg(tmp_path / "t", task="token-classification", train=conll, dev=conll, max_steps=1))
    tagged = tmp_path / "tagged.txt"
    tagged.write_text("Anna B-NEWTAG\nvisited O\n")
    assert len(predict(tmp_path / "t" / "best", tagged)[0]["tags"]) == 2
    with pytest.raises(ValueError, match="the token-classification task does not read table columns"):
        predict(tmp_path / "t" / "best", tagged, text_columns=["x"])
    untagged = tmp_path / "untagged.txt"
    untagged.write_text("Anna B-PER\nvisited O\n\nno\ntags\n")
    with pytest.raises(ValueError, match=r"untagged.txt: line 4: a sentence without tags"):
        evaluate(tmp_path / "t" / "best", untagged)


def test_corrupt_head_and_malformed_finetune_json_are_named(ft_cfg, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    data = str(FIXTURES / "sst2.tsv")
    finetune(ft_cfg(tmp_path, task="classification", train=data, dev=data, max_steps=1))
    best, head, meta = tmp_path / "best", tmp_path / "best" / "head.safetensors", tmp_path / "best" / "finetune.json"
    expected, raw = predict(best, data), head.read_bytes()
    head.write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # one bit of the last weight
    with pytest.raises(ValueError, match=r"head.safetensors: weights do not match their recorded checksum"):
        predict(best, data)
    head.write_bytes(raw[: len(raw) // 2])
    assert main(["predict", "--init", str(best), "--data", data, "--out", str(tmp_path / "p.json")]) == 2
    assert "head.safetensors: corrupt or unreadable safetensors file" in capsys.readouterr().err
    head.write_bytes(raw)
    save_file(load_file(head), head)  # a head saved before heads had a checksum still loads, as model files do
    assert predict(best, data) == expected
    trained_on = json.loads(meta.read_text())
    trained_on["config"]["device"] = f"cuda:{torch.cuda.device_count()}"  # a GPU this machine does not have
    meta.write_text(json.dumps(trained_on))
    assert predict(best, data) == expected  # a model runs on the machine that loads it, not where it trained
    bad_config = meta.read_text().replace('"weight_decay": 0.01', '"weight_decay": -1')
    outputs = json.loads(meta.read_text())["num_outputs"]
    more_labels = meta.read_text().replace(f'"num_outputs": {outputs}', f'"num_outputs": {outputs + 1}')
    for text, message in (
        (more_labels, rf"head.safetensors: weights do not match finetune.json: .*\({outputs}, 64\) vs config"),
        (more_labels.replace(f'"num_outputs": {outputs + 1}', '"num_outputs": 0'), r"num_outputs must be a pos"),
        ('{"task": "classification"\n', r"finetune.json: invalid JSON at line 2"),
        ('{"task": "classification"}', r"finetune.json: not a .* \(no num_outputs, state, config"),
        (bad_config, r"finetune.json: config: FinetuneConfig.weight_decay must be >= 0"),
    ):
        meta.write_text(text)
        with pytest.raises(ValueError, match=message):
            load_finetuned(best)


def test_each_package_exports_what_its_modules_define():
    import litebert.finetune
    import litebert.finetune.saved
    import litebert.tokenizer
    import litebert.tokenizer.train

    for name in ("evaluate", "predict", "load_finetuned", "Finetuned"):
        assert getattr(litebert.finetune, name) is getattr(litebert.finetune.saved, name)
    for name in ("train_tokenizer", "TokenizerTrainConfig"):
        assert getattr(litebert.tokenizer, name) is getattr(litebert.tokenizer.train, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        litebert.finetune.nothing  # noqa: B018
