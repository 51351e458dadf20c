"""hf/folder.py: MarianMT folders made by transformers itself, read by tfm: the same logits,
the same greedy and beam outputs as `generate`, a refusal of what tfm cannot express,
fine-tuning with `tfm train` (train.init_from: the folder), and what names a Hub model rather
than a path."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from helpers import run_tfm, sentence_pairs, write_config
from hf.marian_helpers import hf_generate, make_marian

from transformer_cli.config import DecodeConfig
from transformer_cli.errors import UsageError
from transformer_cli.hf.folder import is_hub_id, read_folder
from transformer_cli.inference.translate import TorchTranslator, model_from_checkpoint

transformers = pytest.importorskip("transformers")

PAIRS = sentence_pairs(300, seed=5)
SOURCES = [de for de, _ in PAIRS]
SHAPES = {  # eos_bias: calibrated so that outputs both end by </s> and reach the length limit
    "shared-tied-swish": dict(shared=True, tied=True, activation="swish", d_model=32, vocab=120),
    "separate-untied-relu": dict(shared=False, tied=False, activation="relu", d_model=48, vocab=90, eos_bias=6.0),
    "separate-tied-gelu": dict(
        shared=False, tied=True, activation="gelu", d_model=32, vocab=150, scale_embedding=False, eos_bias=2.0
    ),
}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def marian(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("marian") / request.param
    return make_marian(folder, SOURCES, [en for _, en in PAIRS], **SHAPES[request.param])


def test_teacher_forced_logits_equal_transformers(marian):
    from transformers import MarianMTModel, MarianTokenizer

    hf = MarianMTModel.from_pretrained(marian).eval()
    tokenizer = MarianTokenizer.from_pretrained(marian)
    model, tokenizers = model_from_checkpoint(read_folder(marian))
    model.eval()
    lines, targets = SOURCES[:16], [en for _, en in PAIRS[:16]]
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    ours = [[*ids, tokenizers.src.ids.eos] for ids in tokenizers.src.encode_batch(lines)]
    assert ours == [[i for i in row if i != tokenizer.pad_token_id] for row in batch["input_ids"].tolist()]
    labels = [tokenizer(text_target=t)["input_ids"] for t in targets]  # each ends with </s>
    assert labels == [[*ids, tokenizers.tgt.ids.eos] for ids in tokenizers.tgt.encode_batch(targets)]
    width, start = max(map(len, labels)), hf.config.decoder_start_token_id
    tgt_in = torch.tensor([[start, *ids[:-1]] + [start] * (width - len(ids)) for ids in labels])
    real = torch.tensor([[True] * len(ids) + [False] * (width - len(ids)) for ids in labels])
    with torch.no_grad():
        expected = hf(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], decoder_input_ids=tgt_in
        ).logits
        got = model(batch["input_ids"], tgt_in)
    # The positions of the targets (what follows a target's end is compared nowhere).
    assert torch.allclose(got[real], expected[real], atol=1e-4), (got[real] - expected[real]).abs().max()


@pytest.mark.slow
@pytest.mark.parametrize("beam, penalty, n_best", [(1, 1.0, 1), (4, 1.0, 1), (5, 0.6, 3)])
def test_greedy_and_beam_outputs_equal_generate(marian, beam, penalty, n_best):
    if n_best > 1 and marian.name != "shared-tied-swish":
        pytest.skip("n-best lists: one shape is enough")
    limit = 24
    expected = hf_generate(marian, SOURCES, beam, limit, penalty, n_best)
    decode = DecodeConfig(
        beam_size=beam, n_best=n_best, length_penalty=penalty, max_len_a=0.0, max_len_b=limit, batch_size=64
    )
    translator = TorchTranslator.load(read_folder(marian), torch.device("cpu"), decode)
    got = [[h.tokens for h in hyps] for hyps in translator.translate(SOURCES).translations]
    assert got == expected
    ended_early = sum(len(h[0]) < limit - 1 for h in expected)
    assert 0 < ended_early < len(SOURCES)  # both endings: </s> chosen, and forced at the limit


def test_what_tfm_cannot_express_is_refused_at_once(tmp_path):
    folder = make_marian(tmp_path / "m", SOURCES, [en for _, en in PAIRS])
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="bart", activation_function="gelu_new", decoder_ffn_dim=99)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UsageError) as e:
        read_folder(folder)
    message = str(e.value)
    assert "tfm cannot express this model:" in message and "\n" not in message
    for reason in (
        "model_type 'bart'",
        "encoder_ffn_dim=64 differs from decoder_ffn_dim=99",
        "activation_function 'gelu_new'",
    ):
        assert reason in message


@pytest.mark.slow
def test_an_imported_model_fine_tunes_with_tfm_train_and_stays_exportable(tmp_path, corpus_dir):
    folder = make_marian(tmp_path / "parent", SOURCES, [en for _, en in PAIRS])
    cfg = write_config(
        tmp_path / "ft.yaml",
        tmp_path,
        corpus_dir,
        train={"epochs": 2, "lr": 1e-3, "threads": 1, "init_from": str(folder), "batch_size": 32},
    )
    r = run_tfm("train", "-c", str(cfg), "--quiet")
    assert r.returncode == 0, r.stderr
    run = tmp_path / "checkpoints" / "ft"
    log = (run / "train.log").read_text()
    assert f"continuing {folder}" in log and "the model is the parent's" in log  # the config's is unused
    from transformer_cli.checkpoint import Checkpoint

    best = Checkpoint.read(run / "best.pt")
    assert best.model_config["activation"] == "swish" and best.model_config["sinusoid_layout"] == "halves"
    assert best.tokenizer["shared"]["kind"] == "piece-vocab"
    parent = read_folder(folder)
    from transformer_cli.config_loading import load_config
    from transformer_cli.data.preprocess import prepare
    from transformer_cli.training.parent import parent_tokenizers
    from transformer_cli.training.promotion import Metric, Scorer

    config = load_config(str(cfg))
    prepared, rebuilt = prepare(config, given=parent_tokenizers(config))
    assert not rebuilt  # encoded with the parent's tokenizers already
    scorer = Scorer(prepared, "de", "en", torch.device("cpu"), "fp32")
    assert scorer(best, Metric.VALID_LOSS) < scorer(parent, Metric.VALID_LOSS) - 1.0
    out = tmp_path / "ft-hf"
    r = run_tfm("export", "--checkpoint", str(run / "best.pt"), "--format", "hf", "-o", str(out))
    assert r.returncode == 0, r.stderr
    from transformers import MarianMTModel

    assert MarianMTModel.from_pretrained(out).config.d_model == 32
    shutil.rmtree(out)


def test_the_cli_and_the_api_take_the_folder_and_a_hub_id_needs_a_network(marian, tmp_path):
    import transformer_cli as tfm

    if marian.name != "shared-tied-swish":
        pytest.skip("one shape is enough")
    expected = tfm.load(marian, device="cpu").translate(SOURCES[:2])
    r = run_tfm("translate", "--checkpoint", str(marian), *SOURCES[:2])
    assert r.returncode == 0 and r.stdout.splitlines() == expected, r.stderr
    r = run_tfm(
        "translate",
        "--checkpoint",
        "Helsinki-NLP/opus-mt-de-en",
        "Ein Hund.",
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 1, r.stderr
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("tfm: error: cannot fetch Helsinki-NLP/opus-mt-de-en from the Hugging Face Hub (")
    assert line.endswith("without a network, give a local folder")


@pytest.mark.parametrize(
    "spec, hub",
    [
        ("Helsinki-NLP/opus-mt-de-en", True),
        ("facebook/wmt19-de-en", True),
        ("EleutherAI/gpt-neo-1.3B", True),  # a dot is no file ending
        ("bad/nope.pt", False),  # ends like a file
        ("bad/nope.PTH", False),
        ("bad/model.safetensors", False),
        ("bad/run.yaml", False),
        ("here/nope", False),  # here/ exists: a path
        ("a/b/c", False),  # two slashes
        ("nope.pt", False),
    ],
)
def test_a_hub_id_is_owner_slash_name_that_is_no_path(spec, hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    assert is_hub_id(spec) is hub
