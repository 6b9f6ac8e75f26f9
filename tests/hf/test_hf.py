"""Parity with transformers' AlbertForPreTraining in both directions (random weights, fp32, eval, padding)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

import litebert
from litebert import hf

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

SMALL = dict(vocab_size=120, embedding_size=16, hidden_size=32, num_heads=4, intermediate_size=48, max_position=64)
CONFIGS = {
    "all-shared": dict(num_layers=3, sharing="all"),
    "not-shared": dict(num_layers=3, sharing="none"),
    "groups2-inner2": dict(num_layers=4, sharing="all", num_hidden_groups=2, inner_group_num=2),
    "groups2-of-3": dict(num_layers=3, sharing="all", num_hidden_groups=2),  # layers 0, 1 -> group 0; 2 -> 1
    "E=H": dict(num_layers=2, sharing="all", embedding_size=32),
    "E=H-not-shared-bert": dict(num_layers=2, sharing="none", embedding_size=32),
}


def _batch(vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (4, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding in the batch
    mask[2, 4:] = 0
    mask[3, :3] = 0  # left padding: the pooler reads a padded position 0
    ids[mask == 0] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def _compare(ours: litebert.AlbertForPretraining, theirs: torch.nn.Module) -> None:
    ours.eval()
    theirs.eval()
    batch = _batch(ours.config.vocab_size)
    with torch.no_grad():
        a = ours(**batch)
        b = theirs(**batch, output_hidden_states=True)
        base = theirs.albert(**batch)
    # Padded positions carry no meaning (litebert skips them and returns zeros); every real one must agree.
    valid = batch["attention_mask"].bool()
    torch.testing.assert_close(a.last_hidden_state[valid], base.last_hidden_state[valid], atol=1e-5, rtol=0)
    assert a.last_hidden_state[~valid].abs().max() == 0
    torch.testing.assert_close(a.pooled, base.pooler_output, atol=1e-5, rtol=0)
    torch.testing.assert_close(a.mlm_logits[valid], b.prediction_logits[valid], atol=1e-5, rtol=0)
    torch.testing.assert_close(a.sop_logits, b.sop_logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_export_then_transformers_loads_identically(tmp_path, name):
    torch.manual_seed(0)
    ours = litebert.AlbertForPretraining(litebert.ModelConfig(**{**SMALL, **CONFIGS[name]}))
    litebert.save(ours, tmp_path / "ours")
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    theirs = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "hf")
    _compare(ours, theirs)


@pytest.mark.parametrize("name", ["all-shared", "not-shared", "groups2-inner2", "groups2-of-3", "E=H"])
def test_transformers_saved_then_litebert_loads_identically(tmp_path, name):
    c = {**SMALL, **CONFIGS[name]}
    groups = c["num_layers"] if c["sharing"] == "none" else c.get("num_hidden_groups", 1)
    hf_config = transformers.AlbertConfig(
        vocab_size=c["vocab_size"],
        embedding_size=c["embedding_size"],
        hidden_size=c["hidden_size"],
        num_hidden_layers=c["num_layers"],
        num_hidden_groups=groups,
        inner_group_num=c.get("inner_group_num", 1),
        num_attention_heads=c["num_heads"],
        intermediate_size=c["intermediate_size"],
        max_position_embeddings=c["max_position"],
    )
    torch.manual_seed(1)
    theirs = transformers.AlbertForPreTraining(hf_config)
    theirs.save_pretrained(tmp_path / "hf")
    ours = litebert.load(tmp_path / "hf")  # litebert.load reads a transformers directory directly
    assert ours.config.has_projection  # transformers always maps E -> H, even when E == H
    assert ours.config.sharing == c["sharing"]  # one group of one block per layer shares nothing: "none"
    _compare(ours, theirs)
    # ...and through import into litebert's own format, then back out, nothing changes.
    hf.import_hf(tmp_path / "hf", tmp_path / "ours")
    again = litebert.load(tmp_path / "ours")
    _compare(again, theirs)
    hf.export_hf(tmp_path / "ours", tmp_path / "hf2")
    _compare(again, transformers.AlbertForPreTraining.from_pretrained(tmp_path / "hf2"))


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
def test_export_refuses_partial_sharing(tmp_path, sharing):
    model = litebert.AlbertForPretraining(litebert.ModelConfig(**{**SMALL, "num_layers": 2, "sharing": sharing}))
    litebert.save(model, tmp_path / "ours")
    with pytest.raises(ValueError, match=f"sharing='{sharing}'.*no transformers ALBERT equivalent"):
        hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_export_writes_transformers_config(tmp_path, tokenizer_dir):
    model = litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100))
    litebert.save(model, tmp_path / "ours")
    shutil.copy(tokenizer_dir / "spiece.model", tmp_path / "ours")  # a tokenizer without transformers' files
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "albert" and config["num_hidden_layers"] == 4
    assert (tmp_path / "hf" / "spiece.model").read_bytes() == (tokenizer_dir / "spiece.model").read_bytes()
    assert (tmp_path / "hf" / "tokenizer.json").is_file()  # written from spiece.model: AutoTokenizer reads it
    (tmp_path / "ours" / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 512}))
    hf.export_hf(tmp_path / "ours", tmp_path / "hf2")
    settings = json.loads((tmp_path / "hf2" / "tokenizer_config.json").read_text())
    assert settings["model_max_length"] == model.config.max_position == 128


@pytest.mark.parametrize(
    ("cls", "fresh"),
    [
        ("AlbertForMaskedLM", "no pooler and no SOP head"),  # the hub's usual layout
        ("AlbertModel", "no MLM head and no SOP head"),
        ("AlbertForSequenceClassification", "no MLM head and no SOP head"),
        ("AlbertForQuestionAnswering", "no pooler and no MLM head and no SOP head"),
    ],
)
@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
def test_loads_every_transformers_albert_class(tmp_path, cls, fresh, weights):
    hf_config = transformers.AlbertConfig(
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    torch.manual_seed(2)
    theirs = getattr(transformers, cls)(hf_config).eval()
    theirs.save_pretrained(tmp_path / "hf")
    if weights == "pytorch_model.bin":  # older checkpoints; transformers 5 only writes safetensors
        (tmp_path / "hf" / "model.safetensors").unlink()
        torch.save(theirs.state_dict(), tmp_path / "hf" / weights)
    with pytest.warns(UserWarning) as record:
        ours = litebert.load(tmp_path / "hf")
    messages = [str(w.message) for w in record]
    assert any(f"has {fresh} " in m and "fresh initialisation" in m for m in messages), messages
    head = {"AlbertForSequenceClassification": "classifier", "AlbertForQuestionAnswering": "qa_outputs"}.get(cls)
    # a task model's own head is never loaded, and the user is told so
    assert any(f"task head ({head}.bias, {head}.weight) is not loaded" in m for m in messages) == bool(head)
    ours.eval()
    batch = _batch(120)
    valid = batch["attention_mask"].bool()
    backbone = theirs if cls == "AlbertModel" else theirs.albert
    with torch.no_grad():
        a = ours.albert(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        b = backbone(**batch)
        torch.testing.assert_close(a[0][valid], b.last_hidden_state[valid], atol=1e-5, rtol=0)
        if b.pooler_output is not None:
            torch.testing.assert_close(a[1], b.pooler_output, atol=1e-5, rtol=0)
        if cls == "AlbertForMaskedLM":
            logits = ours(**batch).mlm_logits
            torch.testing.assert_close(logits[valid], theirs(**batch).logits[valid], atol=1e-5, rtol=0)


def test_transformers_checkpoint_missing_backbone_tensor_is_named(tmp_path):
    from safetensors.torch import load_file, save_file

    theirs = transformers.AlbertForMaskedLM(
        transformers.AlbertConfig(
            vocab_size=120,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=64,
        )
    )
    theirs.save_pretrained(tmp_path / "hf")
    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    del tensors["albert.embeddings.LayerNorm.bias"]
    save_file(tensors, tmp_path / "hf" / "model.safetensors")
    with pytest.raises(ValueError, match="lacks tensor 'albert.embeddings.LayerNorm.bias'"):
        litebert.load(tmp_path / "hf")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_hidden_layers", "4", r"num_layers must be a positive integer, got '4'"),
        ("num_hidden_layers", None, r"num_layers must be a positive integer, got None"),
        ("hidden_act", ["gelu"], r"hidden_act must be one of .*, got \['gelu'\]"),
        ("tie_word_embeddings", "false", r"tie_word_embeddings must be true or false, got 'false'"),
    ],
)
def test_a_wrong_typed_transformers_config_field_is_named(tmp_path, field, value, message):
    litebert.save(litebert.AlbertForPretraining(litebert.ModelConfig(**SMALL, num_layers=2)), tmp_path / "ours")
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(ValueError, match=r"transformers config.json: .*" + message):
        litebert.load(tmp_path / "hf")


def test_an_mlm_bias_saved_only_as_the_decoder_bias_is_read(tmp_path):
    from safetensors.torch import load_file, save_file

    theirs = transformers.AlbertForMaskedLM(
        transformers.AlbertConfig(
            vocab_size=120,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=48,
            max_position_embeddings=64,
        )
    )
    with torch.no_grad():
        theirs.predictions.bias.normal_()
    theirs.save_pretrained(tmp_path / "hf")
    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    tensors["predictions.decoder.bias"] = tensors.pop("predictions.bias")
    save_file(tensors, tmp_path / "hf" / "model.safetensors")
    ours = litebert.load(tmp_path / "hf")
    assert torch.equal(ours.state_dict()["mlm_head.bias"], theirs.predictions.bias.detach())


class _NotATensor:  # a pickled object that weights_only loading must refuse
    pass


def test_pytorch_model_bin_is_never_unpickled(tmp_path):
    model = transformers.AlbertModel(transformers.AlbertConfig(vocab_size=50, hidden_size=32, num_attention_heads=4))
    model.config.save_pretrained(tmp_path)
    torch.save({"embeddings.word_embeddings.weight": _NotATensor()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pytorch_model.bin: not a plain tensor checkpoint"):
        litebert.load(tmp_path)


def test_conversions_refuse_what_would_lose_or_change_a_model(tmp_path):
    small = dict(
        vocab_size=120,
        embedding_size=16,
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    litebert.save(litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100)), tmp_path / "ours")
    before = (tmp_path / "ours" / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="the destination is the source"):
        hf.export_hf(tmp_path / "ours", tmp_path / "ours" / ".")
    assert (tmp_path / "ours" / "model.safetensors").read_bytes() == before
    with pytest.raises(ValueError, match="not a transformers ALBERT directory \\(a litebert directory\\)"):
        hf.import_hf(tmp_path / "ours", tmp_path / "x")
    # an untied MLM decoder has no litebert equivalent
    untied = transformers.AlbertForPreTraining(
        transformers.AlbertConfig(**small, num_attention_heads=4, tie_word_embeddings=False)
    )
    untied.save_pretrained(tmp_path / "untied")
    with pytest.raises(ValueError, match="tie_word_embeddings is false"):
        litebert.load(tmp_path / "untied")
    # fields a config.json leaves out take transformers' defaults, as transformers reads them (64 heads, no dropout)
    config = {**json.loads((tmp_path / "untied" / "config.json").read_text()), "hidden_size": 128}
    for key in ("num_attention_heads", "hidden_dropout_prob", "attention_probs_dropout_prob", "tie_word_embeddings"):
        config.pop(key, None)
    ours = hf.config_from_hf(config)
    assert (ours.num_heads, ours.hidden_dropout, ours.attention_dropout) == (64, 0.0, 0.0)
    # transformers' other names for the tanh GELU are the same function (test below)
    assert hf.config_from_hf({**config, "hidden_act": "gelu_pytorch_tanh"}).hidden_act == "gelu_new"
    with pytest.raises(ValueError, match="hidden_act must be one of"):
        hf.config_from_hf({**config, "hidden_act": "silu"})
    # a legacy checkpoint whose decoder bias differs from predictions.bias is untied too
    tied = transformers.AlbertForPreTraining(transformers.AlbertConfig(**small, num_attention_heads=4))
    tied.save_pretrained(tmp_path / "legacy")
    (tmp_path / "legacy" / "model.safetensors").unlink()
    state = {k: v.clone() for k, v in tied.state_dict().items()}
    state["predictions.decoder.bias"] = state["predictions.bias"] + 1
    torch.save(state, tmp_path / "legacy" / "pytorch_model.bin")
    with pytest.raises(ValueError, match="predictions.decoder.bias differs from predictions.bias"):
        litebert.load(tmp_path / "legacy")


def test_conversions_refuse_a_destination_holding_a_model(tmp_path, capsys):
    from litebert.cli import main

    litebert.save(litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=100)), tmp_path / "ours")
    litebert.save(litebert.AlbertForPretraining(litebert.preset("tiny", vocab_size=120)), tmp_path / "other")
    hf.export_hf(tmp_path / "ours", tmp_path / "hf")
    before = {p.name: p.read_bytes() for p in (tmp_path / "other").iterdir()}
    for direction, src in (("to-hf", "ours"), ("from-hf", "hf")):
        assert main(["convert", direction, str(tmp_path / src), str(tmp_path / "other")]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / 'other'}: already holds a model (config.json, model.safetensors)" in err
    assert {p.name: p.read_bytes() for p in (tmp_path / "other").iterdir()} == before  # the model is intact
    with pytest.raises(ValueError, match=r"hf: already holds a model \(config.json, model.safetensors\)"):
        hf.export_hf(tmp_path / "other", tmp_path / "hf")  # an earlier export is not replaced either
    (tmp_path / "hf" / "config.json").unlink()
    with pytest.raises(ValueError, match=r"hf: already holds a model \(model.safetensors\)"):
        hf.import_hf(tmp_path / "other", tmp_path / "hf")  # weights alone are a model too
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="file: a file, not a directory"):
        hf.export_hf(tmp_path / "ours", tmp_path / "file")
    # other files would pass for the converted model's own (ours has no tokenizer to copy over this one)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "spiece.model").write_bytes(b"another model's tokenizer")
    with pytest.raises(ValueError, match=r"tok: not empty \(spiece.model\)"):
        hf.export_hf(tmp_path / "ours", tmp_path / "tok")
    (tmp_path / "clone" / ".git").mkdir(parents=True)  # a hub repository's clone: its git files and README
    (tmp_path / "clone" / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    (tmp_path / "clone" / "README.md").write_text("# my model\n")
    assert main(["convert", "to-hf", str(tmp_path / "ours"), str(tmp_path / "clone")]) == 0
    (tmp_path / "empty").mkdir()  # an empty directory is a fine destination
    assert main(["convert", "to-hf", str(tmp_path / "ours"), str(tmp_path / "empty")]) == 0
    assert litebert.load(tmp_path / "empty").config.vocab_size == 100


def test_the_identity_projection_of_an_e_equals_h_model_takes_the_model_dtype():
    config = litebert.ModelConfig(**{**SMALL, **CONFIGS["E=H"]})
    assert not config.has_projection
    model = litebert.AlbertForPretraining(config).to(torch.bfloat16)
    tensors = hf.to_hf_state_dict(model)
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    assert torch.equal(tensors["albert.encoder.embedding_hidden_mapping_in.weight"].float(), torch.eye(32))


TASKS = Path(__file__).parents[1] / "fixtures" / "tasks"


@pytest.mark.parametrize(
    ("task", "data", "cls"),
    [
        ("classification", "sst2.tsv", "AlbertForSequenceClassification"),
        ("regression", "sts.tsv", "AlbertForSequenceClassification"),
        ("token-classification", "conll2003.txt", "AlbertForTokenClassification"),
        ("squad", "squad_v2.json", "AlbertForQuestionAnswering"),
        ("multiple-choice", "race.json", "AlbertForMultipleChoice"),
    ],
)
def test_a_fine_tuned_model_exports_as_its_transformers_task_class(ft_cfg, tmp_path, task, data, cls):
    from litebert.finetune import finetune
    from litebert.finetune.saved import load_finetuned

    path = str(TASKS / data)
    lengths = {"max_query_length": 16} if task == "squad" else {}
    finetune(ft_cfg(tmp_path / "ft", task=task, train=path, dev=path, max_steps=2, eval_every=2, **lengths))
    ft = load_finetuned(tmp_path / "ft" / "best")
    hf.export_hf(tmp_path / "ft" / "best", tmp_path / "hf")
    theirs, info = getattr(transformers, cls).from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]  # the backbone and the head, nothing else
    batch = _batch(ft.model.backbone.config.vocab_size)
    valid = batch["attention_mask"].bool()
    if task == "multiple-choice":  # 2 examples of 2 options each
        batch = {k: v.view(2, 2, -1) for k, v in batch.items()}
    with torch.no_grad():
        ours, out = ft.model(batch), theirs.eval()(**batch)
    if task == "squad":  # litebert scores padding -1e4 (never an answer); the real positions must agree
        for end in ("start_logits", "end_logits"):
            torch.testing.assert_close(ours[end][valid], getattr(out, end)[valid], atol=1e-5, rtol=0)
    elif task == "token-classification":
        torch.testing.assert_close(ours["logits"][valid], out.logits[valid], atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(ours["logits"], out.logits, atol=1e-5, rtol=0)
    if task in ("classification", "token-classification"):  # its labels travel with it
        assert [theirs.config.id2label[i] for i in range(theirs.config.num_labels)] == ft.state["labels"]
    assert theirs.config.problem_type == {
        "classification": "single_label_classification",
        "regression": "regression",
    }.get(task)


def test_a_head_transformers_has_no_class_for_is_left_out_with_a_warning(ft_cfg, tmp_path):
    from litebert.finetune import finetune

    path = str(TASKS / "sst2.tsv")
    finetune(ft_cfg(tmp_path / "ft", task="classification", train=path, dev=path, max_steps=1, pooling="mean"))
    left_out = r"best: transformers has no ALBERT class for mean pooling.*\(head.safetensors, finetune.json\)"
    with pytest.warns(UserWarning, match=left_out):
        hf.export_hf(tmp_path / "ft" / "best", tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == ["AlbertForPreTraining"]


def test_a_sharded_index_without_a_weight_map_is_named(tmp_path):
    from litebert.hf import read_hf_weights

    index = tmp_path / "model.safetensors.index.json"
    for text in ('{"metadata": {}}', "[]", "{"):
        index.write_text(text)
        with pytest.raises(ValueError, match=r"model\.safetensors\.index\.json: (no \"weight_map\"|invalid JSON)"):
            read_hf_weights(tmp_path)


@pytest.mark.parametrize("act", ["gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python_tanh", "gelu_python"])
def test_transformers_other_names_of_the_gelus_load_with_the_same_outputs(tmp_path, act):
    c = {**SMALL, **CONFIGS["all-shared"]}
    hf_config = transformers.AlbertConfig(
        vocab_size=c["vocab_size"],
        embedding_size=c["embedding_size"],
        hidden_size=c["hidden_size"],
        num_hidden_layers=c["num_layers"],
        num_attention_heads=c["num_heads"],
        intermediate_size=c["intermediate_size"],
        max_position_embeddings=c["max_position"],
        hidden_act=act,
    )
    torch.manual_seed(2)
    theirs = transformers.AlbertForPreTraining(hf_config)
    theirs.save_pretrained(tmp_path / "hf")
    ours = litebert.load(tmp_path / "hf")
    assert ours.config.hidden_act == ("gelu" if act == "gelu_python" else "gelu_new")
    _compare(ours, theirs)
