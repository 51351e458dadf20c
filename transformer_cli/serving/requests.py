"""What the server accepts, checked strictly: every problem is a `ClientError` with the HTTP
status to answer (400, 408, 413, 422) and one line naming it.

`POST /translate` (and `POST /`) take the Hugging Face translation-task shape, with tfm's own
decoding parameters or those of the Hugging Face Inference API (what
`huggingface_hub.InferenceClient.translation` sends):

    {"inputs": "text" | ["text", ...],
     "parameters": {"beam_size": 5, "n_best": 1, "max_output_len": 100, "length_penalty": 1.0}}
    {"inputs": "text", "parameters": {"src_lang": "de", "tgt_lang": "en", "truncation": "longest_first",
     "clean_up_tokenization_spaces": true,
     "generate_parameters": {"num_beams": 5, "max_new_tokens": 100, "length_penalty": 1.0,
                             "num_return_sequences": 1, "do_sample": false, "early_stopping": true}}}

The Hugging Face names map onto tfm's (num_beams -> beam_size, num_return_sequences -> n_best,
max_new_tokens or max_length - 1 -> max_output_len); what tfm cannot do (sampling, another
truncation, another language pair, repetition penalties, ...) is a 400 that names every such
parameter. Output spaces need no clean-up: tfm's detokenization writes natural text.

`POST /attention` takes the same shape with one non-empty sentence.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ..api import decode_bounds
from ..config import ServeConfig

PARAMETERS = ("beam_size", "n_best", "max_output_len", "length_penalty")
HF_PARAMETERS = ("src_lang", "tgt_lang", "clean_up_tokenization_spaces", "truncation", "generate_parameters")
# generate_parameters tfm follows: the name of tfm's, or a value it accepts and does as asked
GENERATE_AS = {
    "num_beams": "beam_size",
    "num_return_sequences": "n_best",
    "max_new_tokens": "max_output_len",
    "length_penalty": "length_penalty",
}
GENERATE_ACCEPTED = {
    "do_sample": (False,),
    "early_stopping": (True,),
    "use_cache": (True, False),
    "min_length": (0,),
    "min_new_tokens": (0,),
    "num_beam_groups": (1,),
    "repetition_penalty": (1, 1.0),
    "no_repeat_ngram_size": (0,),
}
TRUNCATIONS = ("longest_first", "only_first")  # what tfm does: an input cut to the model's limit
# The bounds a config file has (decode.max_len_b, decode.length_penalty), as for every entry point.
MAX_OUTPUT_TOKENS = decode_bounds("max_len_b")[1]
MAX_LENGTH_PENALTY = decode_bounds("length_penalty")[1]


class ClientError(Exception):
    """A request the server refuses: `status` is the HTTP status, the message says why,
    `headers` go with the answer (Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers or {}


Languages = tuple[str, str]  # (source, target) codes: the model's, when it says


@dataclass
class TranslateRequest:
    lines: list[str]
    parameters: dict[str, Any]  # keyword arguments of `Translator.options`


def _other_languages(raw: dict[str, Any], languages: Languages | None) -> str | None:
    """Why the languages a request asks for (src_lang, tgt_lang) are not the model's; None
    when they are, or when the model does not say which it translates."""
    if languages is None:
        return None
    asked = tuple(a if isinstance(a, str) else m for a, m in zip((raw.get("src_lang"), raw.get("tgt_lang")), languages))
    if asked == languages:
        return None
    return (
        f"this model translates {languages[0]} to {languages[1]}, not {asked[0]} to {asked[1]} "
        "(parameters.src_lang, tgt_lang)"
    )


async def read_body(
    content_length: str | None,
    chunks: AsyncIterator[bytes],
    max_bytes: int,
    timeout_s: float,
    bound_key: str = "serve.max_bytes",
) -> bytes:
    """The request body, refused with 413 once it is longer than `max_bytes` (the config's
    `bound_key`), and with 408 unless all of it has arrived within `timeout_s` seconds: the whole
    body, not each chunk, so that a client sending a byte now and then cannot hold a connection
    (and a stopping server) for long."""
    too_big = ClientError(413, f"request body larger than {max_bytes} bytes ({bound_key})")
    if content_length is not None and content_length.isdigit() and int(content_length) > max_bytes:
        raise too_big

    async def read() -> bytes:
        body = bytearray()
        async for chunk in chunks:
            body += chunk
            if len(body) > max_bytes:
                raise too_big
        return bytes(body)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:
        raise ClientError(408, f"request body not received within {timeout_s:g} s (serve.body_timeout_s)") from None


def parse_json(body: bytes) -> Any:
    if not body.strip():
        raise ClientError(400, 'empty body: send JSON like {"inputs": "Ein Haus."}')
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ClientError(400, f"body is not valid UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ClientError(400, f"invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ClientError(400, "invalid JSON: nested too deeply") from None
    except ValueError:  # the only other one: an integer past CPython's int-string conversion limit
        raise ClientError(400, "invalid JSON: a number with too many digits") from None


def _shown(value: Any) -> str:
    """`value` in an error message: a list or an object by its kind only (it may be nested too
    deeply to print), anything else as JSON, shortened past 40 characters."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_text(text: str, where: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ClientError(422, f"{where} holds an unpaired surrogate (not valid Unicode text)") from None
    return text


def _integer(name: str, value: Any, low: int, high: int, why: str = "") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ClientError(422, f"parameters.{name} must be an integer from {low} to {high}{why} (got {_shown(value)})")
    return value


def _hf_parameters(raw: dict[str, Any], languages: Languages | None) -> dict[str, Any]:
    """The Hugging Face Inference API's parameters as tfm's; a 400 naming every one tfm cannot
    follow, languages other than the model's (`languages`) included."""
    refused, params = [], {}
    truncation = raw.get("truncation")
    if truncation is not None and truncation not in TRUNCATIONS:
        refused.append(
            f"truncation={_shown(truncation)} (tfm cuts an input to the model's limit: {' or '.join(TRUNCATIONS)})"
        )
    cleanup = raw.get("clean_up_tokenization_spaces")
    if cleanup is not None and not isinstance(cleanup, bool):
        raise ClientError(422, f"parameters.clean_up_tokenization_spaces must be true or false (got {_shown(cleanup)})")
    generate = raw.get("generate_parameters") or {}
    if not isinstance(generate, dict):
        raise ClientError(422, f"parameters.generate_parameters must be an object (got {_shown(generate)})")
    for name, value in generate.items():
        if value is None:
            continue
        if name in GENERATE_AS:
            params[GENERATE_AS[name]] = value
        elif name == "max_length":  # counts the decoder's start token, which max_output_len does not
            if not isinstance(value, int) or isinstance(value, bool) or value < 2:
                raise ClientError(422, f"generate_parameters.max_length must be an integer >= 2 (got {_shown(value)})")
            params["max_output_len"] = value - 1
        elif not any(type(value) is type(ok) and value == ok for ok in GENERATE_ACCEPTED.get(name, ())):
            refused.append(f"generate_parameters.{name}={_shown(value)}")
    problems = [f"not supported by tfm: {', '.join(refused)}"] if refused else []
    if (other := _other_languages(raw, languages)) is not None:
        problems.append(other)
    if problems:
        raise ClientError(400, "; ".join(problems))
    return params


def _parameters(raw: Any, limits: ServeConfig, languages: Languages | None) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ClientError(422, f'"parameters" must be an object (got {_shown(raw)})')
    unknown = sorted(k for k in raw if k not in PARAMETERS + HF_PARAMETERS)
    if unknown:
        raise ClientError(
            422, f"unknown parameter(s): {', '.join(unknown)} (known: {', '.join(PARAMETERS + HF_PARAMETERS)})"
        )
    params = {k: v for k, v in raw.items() if v is not None and k in PARAMETERS}
    hf = _hf_parameters({k: v for k, v in raw.items() if k in HF_PARAMETERS}, languages)
    twice = sorted(set(hf) & set(params))
    if twice:
        raise ClientError(
            422, f"{', '.join(twice)} given twice (as a tfm parameter and in generate_parameters): give one"
        )
    params.update(hf)
    beam_limit = " (serve.max_beam_size)"
    if "beam_size" in params:
        _integer("beam_size", params["beam_size"], 1, limits.max_beam_size, beam_limit)
    if "n_best" in params:
        _integer("n_best", params["n_best"], 1, limits.max_beam_size, beam_limit)
    if "max_output_len" in params:
        _integer("max_output_len", params["max_output_len"], 1, MAX_OUTPUT_TOKENS)
    if "length_penalty" in params:
        lp = params["length_penalty"]
        if not isinstance(lp, (int, float)) or isinstance(lp, bool) or not 0 <= lp <= MAX_LENGTH_PENALTY:
            raise ClientError(
                422, f"parameters.length_penalty must be a number from 0 to {MAX_LENGTH_PENALTY:g} (got {_shown(lp)})"
            )
    return params


def parse_translate(obj: Any, limits: ServeConfig, languages: Languages | None = None) -> TranslateRequest:
    """Check a decoded JSON body against the translate shape, the server's limits and the
    languages of the model (`languages`; None: it does not say)."""
    if not isinstance(obj, dict) or "inputs" not in obj:
        raise ClientError(422, 'the body must be a JSON object with "inputs" (a string or a list of strings)')
    extra = sorted(k for k in obj if k not in ("inputs", "parameters"))
    if extra:
        raise ClientError(422, f"unknown field(s): {', '.join(extra)} (known: inputs, parameters)")
    inputs = obj["inputs"]
    lines = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise ClientError(422, '"inputs" must be a string or a list of strings')
    if not lines:
        raise ClientError(422, '"inputs" is an empty list')
    if len(lines) > limits.max_inputs:
        raise ClientError(413, f"{len(lines)} inputs: at most {limits.max_inputs} per request (serve.max_inputs)")
    for i, line in enumerate(lines):
        _check_text(line, f"inputs[{i}]")
    return TranslateRequest(lines, _parameters(obj.get("parameters"), limits, languages))


def parse_attention(obj: Any, limits: ServeConfig, languages: Languages | None = None) -> TranslateRequest:
    """Like `parse_translate`, for exactly one non-empty sentence."""
    request = parse_translate(obj, limits, languages)
    if len(request.lines) != 1 or not request.lines[0].strip():
        raise ClientError(422, '"inputs" must be one non-empty sentence')
    return request
