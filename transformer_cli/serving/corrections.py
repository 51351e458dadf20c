"""`tfm serve`'s side of users' corrections (transformer_cli/corrections/), when the config has a
`corrections.store`:

    POST /corrections  {"source": ..., "corrected": ..., "output": ..., "client": ...} ->
                       {"id", "status": "accepted" | "held", "reasons": [...]}, answered once the
                       correction is on disk; 413 past corrections.max_bytes, 429 past
                       corrections.per_minute for the client (its "client", else its address),
                       507 when the store's disk is full (nothing stored)

and the translation memory: a /translate input equal to an accepted correction's source is
answered with the correction (`"from_memory": true`), by this and every other process serving
from the store, from their next request on. With corrections.served_per_day, the sources the
model translated are kept as self-training text (corrections/served.py). The route needs the
bearer token (serve refuses a store without one).
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import asdict
from typing import Any

from ..api import Translator
from ..config_corrections import CorrectionsConfig
from ..corrections.guards import guarded
from ..corrections.memory import Remembered, TranslationMemory
from ..corrections.served import ServedText
from ..corrections.store import Correction, CorrectionStore, StoreFull
from ..errors import TfmError
from .requests import ClientError, parse_json, read_body

MAX_CLIENT_ID = 100  # characters of a client id


class PerMinute:
    """At most `limit` requests a minute per client (a sliding window)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.times: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)

    def admit(self, client: str) -> None:
        now, seen = time.monotonic(), self.times[client]
        while seen and now - seen[0] >= 60:
            seen.popleft()
        if len(seen) >= self.limit:
            wait = max(1, int(60 - (now - seen[0])) + 1)
            message = f"more than {self.limit} corrections a minute from {client} (corrections.per_minute)"
            raise ClientError(429, message, {"Retry-After": str(wait)})
        seen.append(now)


class ServedCorrections:
    """The store, its memory and the limits of one server (see the module docstring)."""

    def __init__(self, cfg: CorrectionsConfig, source_lang: str):
        assert cfg.store is not None
        self.cfg = cfg
        self.store = CorrectionStore(cfg.store)
        self.memory = TranslationMemory(self.store)
        self.rate = PerMinute(cfg.per_minute)
        self.served = ServedText(cfg.store, source_lang, cfg.served_per_day) if cfg.served_per_day else None

    async def keep_served(self, lines: list[str]) -> None:
        """Keep the sources the model translated as self-training text (corrections.served_per_day)."""
        if self.served is not None:
            await asyncio.to_thread(self.served.add, lines)

    def remembered(self, lines: list[str]) -> list[Remembered | None]:
        """Each line's accepted correction, if any (none when corrections.memory is off)."""
        if not self.cfg.memory:
            return [None] * len(lines)
        self.memory.refresh()
        return [self.memory.lookup(line) for line in lines]

    async def post(self, headers: Any, body: Any, address: str, model: Translator, timeout_s: float) -> dict[str, Any]:
        """Store one posted correction; its id, status and reasons."""
        length = headers.get("content-length")
        raw = parse_json(await read_body(length, body, self.cfg.max_bytes, timeout_s, "corrections.max_bytes"))
        correction = _parse(raw)
        self.rate.admit(correction.client or address)
        check = guarded(self.cfg, _unknown_share(model))
        try:
            await asyncio.to_thread(self.store.add, [correction], check)
        except StoreFull as e:
            raise ClientError(507, str(e)) from None
        except TfmError as e:
            raise ClientError(503, str(e)) from None
        return {k: v for k, v in asdict(correction).items() if k in ("id", "status", "reasons")}


def _parse(raw: Any) -> Correction:
    if not isinstance(raw, dict):
        raise ClientError(422, 'send a JSON object: {"source": ..., "corrected": ..., "output": ..., "client": ...}')
    for key in ("source", "corrected"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ClientError(422, f"{key}: a non-empty string is required")
    for key in ("output", "client"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ClientError(422, f"{key}: a string, if given")
    client = raw.get("client")
    if client is not None and len(client) > MAX_CLIENT_ID:
        raise ClientError(422, f"client: at most {MAX_CLIENT_ID} characters")
    return Correction(raw["source"], raw["corrected"], raw.get("output"), client, origin="serve")


def _unknown_share(model: Translator) -> Any:
    """The share of a target-language text's tokens that the model's vocabulary does not know."""
    tokenizer = model.backend.tokenizers.tgt

    def share(text: str) -> float:
        (ids,) = tokenizer.encode_batch([text])
        return sum(i == tokenizer.ids.unk for i in ids) / max(1, len(ids))

    return share
