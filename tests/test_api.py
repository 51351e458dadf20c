"""api.py, the Python API: `tfm.load` gives a Translator that says what it loaded and
translates in lists, streams and ensembles; it refuses what is not text, and decoding options
outside the config's bounds, in one clear exception before any decoding (the CLI: one line,
exit 2). (With a trained model, as a user calls it: serving/test_python_api.py.)"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
from helpers import untrained_checkpoint
from typer.testing import CliRunner

import transformer_cli as tfm
from transformer_cli.api import Translator, decode_option, open_backend
from transformer_cli.cli import app
from transformer_cli.config import DecodeConfig
from transformer_cli.errors import UsageError


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return untrained_checkpoint(tmp_path_factory.mktemp("api-inputs") / "untrained.pt")


@pytest.fixture(scope="module")
def model(checkpoint):
    return tfm.load(checkpoint, device="cpu")


@pytest.mark.parametrize(
    "bad, index, error, message",
    [
        ([None], 0, TypeError, "is NoneType, not str"),
        (["Ein Mann.", 1, 2], 1, TypeError, "is int, not str"),
        (["Ein Mann.", b"x"], 1, TypeError, "is bytes, not str"),
        (
            ["Ein Mann.", "Ein \ud800 Hund."],
            1,
            ValueError,
            "holds an unpaired surrogate '\\ud800' at index 4, which is not text",
        ),
    ],
)
def test_lines_that_are_not_text_are_refused_naming_the_item(model, bad, index, error, message):
    calls = {
        "translate": lambda: model.translate(bad),
        "translate_n_best": lambda: model.translate_n_best(bad),
        "translate_stream": lambda: list(model.translate_stream(iter(bad))),
        "encode": lambda: model.encode(bad),
    }
    for method, call in calls.items():
        with pytest.raises(error) as caught:
            call()
        assert str(caught.value) == f"{method}(): lines[{index}] {message}"
    with pytest.raises(error) as caught:
        model.attention(bad[index])
    assert str(caught.value) == f"attention(): line {message}"
    assert model.translate(["Ein Mann."]) == [model.translate_n_best(["Ein Mann."]).translations[0][0].text]


BOUNDS = {"beam_size": 256, "n_best": 256, "max_output_len": 16384, "batch_size": 100_000, "length_penalty": 100.0}


@pytest.mark.parametrize(
    "option, value",
    [
        ("beam_size", 10**6),
        ("beam_size", 257),
        ("beam_size", 0),
        ("beam_size", "5"),
        ("beam_size", True),
        ("n_best", 257),
        ("max_output_len", 16385),
        ("batch_size", 100_001),
        ("length_penalty", 100.5),
        ("length_penalty", -1),
        ("length_penalty", math.nan),
        ("length_penalty", math.inf),
    ],
)
def test_decoding_options_have_the_bounds_of_the_config(model, option, value):
    low = {"max_output_len": 1, "length_penalty": 0.0}.get(option, 1)
    what = "a number" if option == "length_penalty" else "an integer"
    with pytest.raises(UsageError) as caught:
        model.options(**{option: value})
    assert str(caught.value) == f"{option} must be {what} >= {low} and <= {BOUNDS[option]} (got {value!r})"


def test_the_bounds_are_the_configs_and_reach_the_cli(model, checkpoint):
    fields = {f.name: f.metadata for f in dataclasses.fields(DecodeConfig)}
    assert BOUNDS == {
        "beam_size": fields["beam_size"]["le"],
        "n_best": fields["n_best"]["le"],
        "max_output_len": fields["max_len_b"]["le"],
        "batch_size": fields["batch_size"]["le"],
        "length_penalty": fields["length_penalty"]["le"],
    }
    with pytest.raises(UsageError, match=r"beam_size must be an integer >= 1 and <= 256 \(got 1000000\)"):
        model.translate(["Ein Mann."], beam_size=10**6)  # at once, not after minutes of search
    widest = model.options(**BOUNDS)  # each bound itself is accepted
    assert (widest.beam_size, widest.n_best, widest.max_len_b, widest.batch_size) == (256, 256, 16384, 100_000)
    for value in ("1000000", "257"):
        r = CliRunner().invoke(app, ["translate", "--checkpoint", str(checkpoint), "--beam-size", value, "Ein Mann."])
        assert (r.exit_code, r.stdout) == (2, "")
        assert r.stderr == f"tfm: error: beam_size must be an integer >= 1 and <= 256 (got {value})\n"


def test_an_argument_that_is_not_utf8_is_one_line(checkpoint):
    typed = b"Ein \xff Mann".decode("utf-8", "surrogateescape")  # how Python passes such argv
    r = CliRunner().invoke(app, ["translate", "--checkpoint", str(checkpoint), "Ein Mann.", typed])
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == "tfm: error: argument 2: not valid UTF-8 (byte 0xff at column 5)\n"


def test_a_translator_says_what_it_loaded(model, checkpoint):
    from transformer_cli.checkpoint import read_payload

    assert isinstance(model, Translator) and model.path == checkpoint and model.paths == [checkpoint]
    assert model.sha256 == read_payload(checkpoint)["sha256"] and model.config_name == "untrained"
    assert model.metrics == {} and model.max_src_len == 63  # model.max_len 64, less the <eos>
    info = model.info()
    assert (info["path"], info["sha256"], info["config"]) == (str(checkpoint), model.sha256, "untrained")
    assert info["loaded_at"] == model.loaded_at.isoformat(timespec="seconds")


def test_a_stream_is_translated_in_chunks_in_order_as_a_list_is(model):
    lines = ["Ein Mann.", "", "Zwei Hunde sehen einen Ball.", "Eine Frau.", "Ein Kind malt."]
    short = model.options(max_output_len=4)  # (an untrained model: what it says is no matter)
    chunks = list(model.translate_stream(iter(lines), short, chunk_lines=2))
    assert [chunk for chunk, _ in chunks] == [lines[0:2], lines[2:4], lines[4:]]
    streamed = [hyps[0].text for _, out in chunks for hyps in out.translations]
    assert streamed == model.translate(lines, max_output_len=4)
    with pytest.raises(TypeError, match=r"translate\(\) takes a list of lines, not one string"):
        model.translate("Ein Mann.")


def test_options_start_from_the_models_defaults_and_the_beam_widens_to_n_best(model):
    d = model.options(n_best=3)
    assert (d.n_best, d.beam_size) == (3, 3)  # the model's default beam (1) widened
    capped = model.options(max_output_len=7, recase=False)
    assert (capped.max_len_a, capped.max_len_b, capped.recase) == (0.0, 7, False)
    with pytest.raises(UsageError, match=r"recase must be true or false \(got 'no'\)"):
        model.options(recase="no")
    assert decode_option("beam_size", 5, "beam_size") == 5
    assert decode_option("length_penalty", 1, "length_penalty") == 1.0  # an int for a float
    assert isinstance(decode_option("length_penalty", 1, "length_penalty"), float)


def test_a_model_twice_decodes_as_itself_and_is_named_by_its_members(model, checkpoint):
    pair = tfm.load([checkpoint, checkpoint], device="cpu")
    lines = ["Ein Mann sieht einen Hut.", "Zwei Hunde."]
    assert pair.translate(lines, max_output_len=6) == model.translate(lines, max_output_len=6)
    members = pair.backend.metadata.members
    assert [m.sha256 for m in members] == [model.sha256, model.sha256] and pair.paths == [checkpoint, checkpoint]
    assert pair.sha256 not in (model.sha256, None) and len(pair.sha256) == 64


def test_an_ensemble_takes_exports_by_what_their_engine_reads_back_and_names_it(model, checkpoint, tmp_path):
    """Only models read as checkpoints decode together: an export whose engine reads none back
    (no `read_checkpoint`: CTranslate2's) is refused naming that engine; a plugin engine that
    reads its exports back decodes in an ensemble."""
    import json

    from helpers import ct2_export

    from transformer_cli.api import open_torch
    from transformer_cli.checkpoint import Checkpoint
    from transformer_cli.contracts.engine import Engine
    from transformer_cli.export_manifest import MANIFEST
    from transformer_cli.seams import ENGINES

    export = tmp_path / "ct2"
    ct2_export(checkpoint, export)
    refused = (
        f"ensembles decode checkpoints only: give the checkpoints of {export} (an export for the ctranslate2 engine)"
    )
    with pytest.raises(UsageError, match=f"^{re.escape(refused)} instead$"):
        tfm.load([checkpoint, export], device="cpu")
    manifest = json.loads((export / MANIFEST).read_text())
    (export / MANIFEST).write_text(json.dumps({**manifest, "engine": "onnx"}))
    ENGINES.register("onnx", Engine(open_torch, lambda folder: Checkpoint.read(checkpoint)))  # keeps weights
    try:
        pair = tfm.load([checkpoint, export], device="cpu")
        lines = ["Zwei Hunde."]
        assert pair.translate(lines, max_output_len=6) == model.translate(lines, max_output_len=6)
    finally:
        ENGINES.unregister("onnx")


def test_open_backend_checks_its_arguments_and_sets_the_threads_it_is_given(checkpoint):
    import torch

    for argument, message in [({"precision": "fp8"}, "precision"), ({"device": "tpu"}, "device")]:
        with pytest.raises(UsageError, match=message):
            open_backend(checkpoint, **argument)
    before = torch.get_num_threads()
    try:
        open_backend(checkpoint, device="cpu", threads=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_add_corrections_writes_the_configs_store_through_its_guards(tmp_path, corpus_dir):
    from helpers import write_config

    import transformer_cli as tfm
    from transformer_cli.corrections.store import CorrectionStore
    from transformer_cli.errors import UsageError

    cfg = write_config(tmp_path / "c.yaml", tmp_path, corpus_dir, corrections={"store": str(tmp_path / "store")})
    ok, copy = tfm.add_corrections(str(cfg), [("Ein Hund .", "A dog ."), ("Ein Hund .", "Ein Hund .")], client="app")
    assert (ok.status, copy.status, copy.reasons) == ("accepted", "held", ["the correction is the source itself"])
    assert [c.id for c in CorrectionStore(tmp_path / "store").corrections()] == [ok.id, copy.id]
    with pytest.raises(TypeError, match="corrected is int, not str"):
        tfm.add_corrections(str(cfg), [("Ein Hund .", 5)])
    plain = write_config(tmp_path / "p.yaml", tmp_path, corpus_dir)
    with pytest.raises(UsageError, match="corrections.store is not set"):
        tfm.add_corrections(str(plain), [("a", "b")])


def test_auto_threads_tune_a_backend_that_decodes_on_this_processs_torch_threads(checkpoint):
    """threads="auto" gives a backend that says it decodes on torch threads of this process (a
    torch model on the CPU) a ThreadTuner; a fixed count gives none."""
    from transformer_cli.api import open_backend
    from transformer_cli.host.threads import ThreadTuner

    tuned = open_backend(checkpoint, device="cpu", threads="auto")
    assert tuned.tunes_threads and isinstance(tuned.threads, ThreadTuner)
    assert not isinstance(open_backend(checkpoint, device="cpu", threads=1).threads, ThreadTuner)
