"""What the server accepts, checked strictly: every problem is a `ClientError` with the HTTP
status to answer (400, 408, 413, 422) and one line naming it.

`POST /translate` takes the Hugging Face translation-task shape:

    {"inputs": "text" | ["text", ...],
     "parameters": {"beam_size": 5, "n_best": 1, "max_output_len": 100, "length_penalty": 1.0}}

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
# The bounds a config file has (decode.max_len_b, decode.length_penalty), as for every entry point.
MAX_OUTPUT_TOKENS = decode_bounds("max_len_b")[1]
MAX_LENGTH_PENALTY = decode_bounds("length_penalty")[1]


class ClientError(Exception):
    """A request the server refuses: `status` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class TranslateRequest:
    lines: list[str]
    parameters: dict[str, Any]  # keyword arguments of `Translator.options`


async def read_body(content_length: str | None, chunks: AsyncIterator[bytes], max_bytes: int,
                    timeout_s: float) -> bytes:
    """The request body, refused with 413 once it is longer than `max_bytes`, and with 408 unless
    all of it has arrived within `timeout_s` seconds: the whole body, not each chunk, so that a
    client sending a byte now and then cannot hold a connection (and a stopping server) for long."""
    too_big = ClientError(413, f"request body larger than {max_bytes} bytes (serve.max_bytes)")
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
        raise ClientError(408, f"request body not received within {timeout_s:g} s "
                               "(serve.body_timeout_s)") from None


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
        raise ClientError(422, f"parameters.{name} must be an integer from {low} to {high}{why} "
                               f"(got {_shown(value)})")
    return value


def _parameters(raw: Any, limits: ServeConfig) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ClientError(422, f'"parameters" must be an object (got {_shown(raw)})')
    unknown = sorted(k for k in raw if k not in PARAMETERS)
    if unknown:
        raise ClientError(422, f"unknown parameter(s): {', '.join(unknown)} "
                               f"(known: {', '.join(PARAMETERS)})")
    params = {k: v for k, v in raw.items() if v is not None}
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
            raise ClientError(422, f"parameters.length_penalty must be a number from 0 to "
                                   f"{MAX_LENGTH_PENALTY:g} (got {_shown(lp)})")
    return params


def parse_translate(obj: Any, limits: ServeConfig) -> TranslateRequest:
    """Check a decoded JSON body against the translate shape and the server's limits."""
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
        raise ClientError(413, f"{len(lines)} inputs: at most {limits.max_inputs} per request "
                               "(serve.max_inputs)")
    for i, line in enumerate(lines):
        _check_text(line, f"inputs[{i}]")
    return TranslateRequest(lines, _parameters(obj.get("parameters"), limits))


def parse_attention(obj: Any, limits: ServeConfig) -> TranslateRequest:
    """Like `parse_translate`, for exactly one non-empty sentence."""
    request = parse_translate(obj, limits)
    if len(request.lines) != 1 or not request.lines[0].strip():
        raise ClientError(422, '"inputs" must be one non-empty sentence')
    return request
