"""The Python API refuses what is not text, and decoding options outside the config's bounds,
in one clear exception before any decoding (the CLI: one line, exit 2)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from helpers import untrained_checkpoint
from typer.testing import CliRunner

import transformer_cli as tfm
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
