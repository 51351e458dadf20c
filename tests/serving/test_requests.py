"""Request parsing on its own: every accepted shape, and every refusal with its status."""

from __future__ import annotations

import asyncio

import pytest

from transformer_cli.config import ServeConfig
from transformer_cli.serving.requests import (
    ClientError,
    TranslateRequest,
    parse_attention,
    parse_json,
    parse_translate,
    read_body,
)

LIMITS = ServeConfig(max_inputs=3, max_beam_size=4)


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"inputs": "Ein Hund."}, TranslateRequest(["Ein Hund."], {})),
        (
            {
                "inputs": ["a", "b"],
                "parameters": {"beam_size": 4, "n_best": 2, "max_output_len": 16384, "length_penalty": 0.5},
            },
            TranslateRequest(["a", "b"], {"beam_size": 4, "n_best": 2, "max_output_len": 16384, "length_penalty": 0.5}),
        ),
        ({"inputs": ["a"], "parameters": {"beam_size": None}}, TranslateRequest(["a"], {})),  # null: default
        ({"inputs": ["a"], "parameters": None}, TranslateRequest(["a"], {})),
    ],
)
def test_accepted_shapes(body, expected):
    assert parse_translate(body, LIMITS) == expected


@pytest.mark.parametrize(
    "body, status, words",
    [
        ([], 422, '"inputs"'),
        ({"input": "a"}, 422, '"inputs"'),
        ({"inputs": "a", "extra": 1}, 422, "unknown field(s): extra"),
        ({"inputs": [1]}, 422, "a string or a list of strings"),
        ({"inputs": []}, 422, "empty list"),
        ({"inputs": ["a"] * 4}, 413, "serve.max_inputs"),
        ({"inputs": ["\ud800"]}, 422, "inputs[0] holds an unpaired surrogate"),
        ({"inputs": "a", "parameters": []}, 422, '"parameters" must be an object (got a list)'),
        ({"inputs": "a", "parameters": {"temperature": 1}}, 422, "unknown parameter(s): temperature"),
        ({"inputs": "a", "parameters": {"beam_size": 5}}, 422, "from 1 to 4 (serve.max_beam_size)"),
        ({"inputs": "a", "parameters": {"beam_size": True}}, 422, "beam_size must be an integer"),
        (
            {"inputs": "a", "parameters": {"max_output_len": 16385}},
            422,
            "max_output_len must be an integer from 1 to 16384",
        ),
        ({"inputs": "a", "parameters": {"length_penalty": -1}}, 422, "length_penalty must be a number"),
    ],
)
def test_refusals_name_the_problem(body, status, words):
    with pytest.raises(ClientError) as e:
        parse_translate(body, LIMITS)
    assert e.value.status == status and words in str(e.value) and "\n" not in str(e.value)


def test_every_hugging_face_parameter_problem_is_named_in_one_400():
    """A language pair other than the model's was left out of the 400 when other parameters
    were refused too."""
    body = {
        "inputs": "a",
        "parameters": {"src_lang": "fr", "truncation": "do_not_truncate", "generate_parameters": {"do_sample": True}},
    }
    with pytest.raises(ClientError) as e:
        parse_translate(body, LIMITS, ("de", "en"))
    assert e.value.status == 400
    assert str(e.value) == (
        'not supported by tfm: truncation="do_not_truncate" (tfm cuts an input to '
        "the model's limit: longest_first or only_first), generate_parameters.do_sample=true; "
        "this model translates de to en, not fr to en (parameters.src_lang, tgt_lang)"
    )
    with pytest.raises(ClientError, match="^this model translates de to en, not de to fr "):
        parse_attention({"inputs": "a", "parameters": {"tgt_lang": "fr"}}, LIMITS, ("de", "en"))
    asked = {"inputs": "a", "parameters": {"src_lang": "de", "tgt_lang": "en"}}
    assert parse_translate(asked, LIMITS, ("de", "en")) == TranslateRequest(["a"], {})
    assert parse_translate(asked, LIMITS, None) == TranslateRequest(["a"], {})  # a model that does not say


def test_attention_takes_one_sentence():
    assert parse_attention({"inputs": "Ein Hund."}, LIMITS).lines == ["Ein Hund."]
    for inputs in (["a", "b"], " "):
        with pytest.raises(ClientError, match="one non-empty sentence"):
            parse_attention({"inputs": inputs}, LIMITS)


@pytest.mark.parametrize(
    "body, words",
    [
        (b"", "empty body"),
        (b"{", "invalid JSON: Expecting"),
        (b"\xff", "not valid UTF-8"),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b"1" * 5001, "too many digits"),
    ],
)
def test_bodies_that_are_not_json_are_400(body, words):
    with pytest.raises(ClientError) as e:
        parse_json(body)
    assert e.value.status == 400 and words in str(e.value)


def test_body_size_and_time_limits():
    async def chunks(parts, pause=0.0):
        for part in parts:
            await asyncio.sleep(pause)
            yield part

    def status(content_length, parts, pause=0.0, timeout=1.0):
        try:
            asyncio.run(read_body(content_length, chunks(parts, pause), 10, timeout))
        except ClientError as e:
            return e.status
        return 200

    assert asyncio.run(read_body("4", chunks([b"ab", b"cd"]), 10, 1.0)) == b"abcd"
    assert status("11", [b"x"]) == 413  # refused on the header, before reading
    assert status(None, [b"123456", b"123456"]) == 413  # refused as it grows past the limit
    assert status("3", [b"a", b"b", b"c"], pause=0.2, timeout=0.3) == 408  # too slow in all
