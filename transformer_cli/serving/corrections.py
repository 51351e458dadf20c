"""`tfm serve`'s side of users' corrections (transformer_cli/corrections/), when the config has a
`corrections.store`:

    POST /corrections  {"source": ..., "corrected": ..., "output": ..., "client": ...,
                       "terms": [{"source": ..., "target": ...}, ...]} ->
                       {"id", "status": "accepted" | "held", "reasons": [...], "terms": [...]},
                       answered once the correction is on disk; 413 past corrections.max_bytes,
                       429 past corrections.per_minute for its caller, 507 when the store's
                       disk is full (nothing stored). Its terms (optional) go to the store's
                       terms (store.py's TERMS) first, each with its own id, status, reasons.
    POST /terms        {"terms": [{"source": ..., "target": ...}, ...], "client": ...} (or one
                       term as {"source", "target", "client"}) -> {"terms": [{"id", "status",
                       "reasons"}, ...]}: glossary terms (docs/terms.md), guarded and limited as
                       corrections are, used by every translation from the next request on

and the translation memory: a /translate input equal to an accepted correction's source is
answered with the correction (`"from_memory": true`, `"correction"`: its id), by this and every
other process serving from the store, from their next request on; a POST /attention of it (the
try-it page's) too, with the model's attention while it reads the correction (`attention_to`).
With corrections.served_per_day, the sources the model translated are kept as self-training
text (corrections/served.py). The route needs the bearer token (serve refuses a store without
one).

The event loop never waits on the store: POSTs append in a thread of their own, those that
arrive during an append together in the next (`Appends`), and the memory takes in the log's new
records in another thread before a request's lines are looked up (a compacted log is read
whole there, answered from meanwhile as it was); the lookups take no lock.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..api import Attention, Translator
from ..config import DecodeConfig
from ..config_corrections import CorrectionsConfig
from ..corrections.guards import guarded
from ..corrections.memory import Remembered, TranslationMemory
from ..corrections.nearby import NearbySources
from ..corrections.served import ServedText
from ..corrections.store import TERMS, Check, Correction, CorrectionStore, StoreFull
from ..corrections.training import trained_until
from ..errors import TfmError
from ..inference.outputs import Example, NearMatches, NearSettings, Translation
from .near_keys_worker import KeysAhead
from .requests import ClientError, parse_json, read_body

MAX_CLIENT_ID = 100  # characters of a client id
MAX_TERMS = 1000  # terms a post may carry


def caller(address: str) -> str:
    """Who posts from `address`, as the limits count it. tfm serve has one bearer token, shared
    by all its callers, so it names none of them: the network address does (uvicorn's, which
    takes X-Forwarded-For from a proxy on this machine only)."""
    return f"address {address}"


class PerMinute:
    """At most `limit` requests a minute per caller (a sliding window)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.times: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)

    def admit(self, who: str) -> None:
        now, seen = time.monotonic(), self.times[who]
        while seen and now - seen[0] >= 60:
            seen.popleft()
        if len(seen) >= self.limit:
            wait = max(1, int(60 - (now - seen[0])) + 1)
            message = f"more than {self.limit} corrections a minute from {who} (corrections.per_minute)"
            raise ClientError(429, message, {"Retry-After": str(wait)})
        seen.append(now)


class Appends:
    """The POSTs' corrections, appended together: those that arrive while an append is on its
    way to disk go in the next, one hold of the store's lock, one read of the log and one fsync
    for all of them (each checked in turn, counting those before it), so clients posting at
    once wait for about two appends, not for one each."""

    def __init__(self, store: CorrectionStore):
        self.store = store
        self._waiting: list[tuple[list[Correction], Check, asyncio.Future[None]]] = []
        self._taking = threading.Lock()  # _waiting, between the event loop and the append thread
        self._thread = ThreadPoolExecutor(1, f"{store.path.stem}-append")

    async def add(self, corrections: list[Correction], check: Check) -> None:
        """Append `corrections` (one post's), checked by `check`; returns once they are on disk
        (raises the store's TfmError, as `CorrectionStore.add`, when their append failed)."""
        done = asyncio.get_running_loop().create_future()
        with self._taking:
            self._waiting.append((corrections, check, done))
        await asyncio.get_running_loop().run_in_executor(self._thread, self._append)
        await done

    def _append(self) -> None:
        """Append every correction waiting (none: an earlier call took them) and settle each."""
        with self._taking:
            batch, self._waiting = self._waiting, []
        if not batch:
            return
        checks = {id(c): check for posted, check, _ in batch for c in posted}
        failed: Exception | None = None
        try:
            self.store.add([c for posted, _, _ in batch for c in posted], lambda known, c: checks[id(c)](known, c))
        except Exception as e:  # each post answers for it (a TfmError: 507 or 503), none waits on
            failed = e
        for _, _, done in batch:
            done.get_loop().call_soon_threadsafe(_settle, done, failed)


def _settle(done: asyncio.Future[None], failed: Exception | None) -> None:
    if done.cancelled():
        return
    if failed is not None:
        done.set_exception(failed)
    else:
        done.set_result(None)


class ServedCorrections:
    """The store, its memory and the limits of one server (see the module docstring)."""

    def __init__(self, cfg: CorrectionsConfig, source_lang: str, model_path: Path | None = None):
        """`model_path`: the served model's file (None: an ensemble's), whose keys of the
        corrections are computed ahead (corrections.near_matches.ahead)."""
        assert cfg.store is not None
        self.cfg = cfg
        self.store = CorrectionStore(cfg.store)
        self.memory = TranslationMemory(self.store)
        self.rate = PerMinute(cfg.per_minute)
        self.served = ServedText(cfg.store, source_lang, cfg.served_per_day) if cfg.served_per_day else None
        self._appends = Appends(self.store)
        self._term_appends = Appends(CorrectionStore(cfg.store, TERMS))
        self._reads = ThreadPoolExecutor(1, "corrections-read")
        self.near = cfg.near_matches
        near = self.near
        ahead = near.corrections and near.ahead and model_path is not None
        self.ahead = KeysAhead(self.store.folder, model_path) if ahead and model_path is not None else None
        self.settings = NearSettings(
            near.neighbours, near.temperature, near.weight, near.reach, near.doubt, cfg.store if ahead else None
        )
        self.nearby = NearbySources()  # the store's sources by their words: read and updated on _reads
        if self.near.corrections:
            self._reads.submit(self.nearby.follow, self.store.fold)  # what was read at start, indexed meanwhile

    async def keep_served(self, lines: list[str]) -> None:
        """Keep the sources the model translated as self-training text (corrections.served_per_day)."""
        if self.served is not None:
            await asyncio.to_thread(self.served.add, lines)

    async def remembered(self, lines: list[str]) -> list[Remembered | None]:
        """Each line's accepted correction, if any (none when corrections.memory is off), the
        log's new records taken in first, off the event loop."""
        if not self.cfg.memory:
            return [None] * len(lines)
        await asyncio.get_running_loop().run_in_executor(self._reads, self.memory.refresh)
        return [self.memory.lookup(line) for line in lines]

    async def matched(self, lines: list[str], model: Translator) -> tuple[list[Remembered | None], NearMatches | None]:
        """`remembered`, and the near-matches of each other line (corrections.near_matches; None
        when it is off) among the corrections `model` was not trained on, found off the event
        loop from the store as just read."""
        if not self.near.corrections:
            return await self.remembered(lines), None
        after = self._trained_until(model)
        return await asyncio.get_running_loop().run_in_executor(self._reads, self._match, lines, after)

    def _trained_until(self, model: Translator) -> float | None:
        """The time of the newest of this store's corrections `model`'s run trained on (its
        checkpoint's training.corrections; None: none of them)."""
        return trained_until(model.backend.metadata.training, self.store.folder)

    def _match(self, lines: list[str], after: float | None) -> tuple[list[Remembered | None], NearMatches]:
        """Runs on the reading thread: the one that updates the memory and the index."""
        self.memory.refresh()
        self.nearby.follow(self.store.fold)
        remembered = [self.memory.lookup(line) if self.cfg.memory else None for line in lines]
        k, least = self.near.corrections, self.near.similarity
        found = [[] if r is not None else self.nearby.near(line, k, least, after) for line, r in zip(lines, remembered)]
        examples = [[Example.of(m.correction) for m in near] for near in found]
        if self.ahead is not None and any(examples):
            self.ahead.start()
        return remembered, NearMatches(examples, self.settings)

    def close(self) -> None:
        """End the process computing keys ahead, if one was started."""
        if self.ahead is not None:
            self.ahead.close()

    async def post(self, headers: Any, body: Any, address: str, model: Translator, timeout_s: float) -> dict[str, Any]:
        """Store one posted correction, and the terms it carries first; its id, status and
        reasons (and its terms')."""
        raw = await self._body(headers, body, timeout_s)
        who = caller(address)
        correction = _parse(raw, who)
        terms = parse_terms(raw["terms"], who, "terms") if "terms" in raw else []
        self.rate.admit(who)
        if terms:
            await self._append(self._term_appends, terms, guarded(self.cfg, _unknown_share(model), terms=True))
        await self._append(self._appends, [correction], guarded(self.cfg, _unknown_share(model)))
        return _said(correction) | ({"terms": [_said(t) for t in terms]} if terms else {})

    async def post_terms(
        self, headers: Any, body: Any, address: str, model: Translator, timeout_s: float
    ) -> dict[str, Any]:
        """Store posted terms (a list, or one); the id, status and reasons of each."""
        raw = await self._body(headers, body, timeout_s)
        who = caller(address)
        terms = (
            parse_terms(raw["terms"], who, "terms", raw.get("client")) if "terms" in raw else parse_terms([raw], who)
        )
        self.rate.admit(who)
        await self._append(self._term_appends, terms, guarded(self.cfg, _unknown_share(model), terms=True))
        return {"terms": [_said(t) for t in terms]}

    async def _body(self, headers: Any, body: Any, timeout_s: float) -> dict[str, Any]:
        length = headers.get("content-length")
        raw = parse_json(await read_body(length, body, self.cfg.max_bytes, timeout_s, "corrections.max_bytes"))
        if not isinstance(raw, dict):
            raise ClientError(
                422, 'send a JSON object: {"source": ..., "corrected": ..., "output": ..., "client": ...}'
            )
        return raw

    @staticmethod
    async def _append(appends: Appends, corrections: list[Correction], check: Check) -> None:
        try:
            await appends.add(corrections, check)
        except StoreFull as e:
            raise ClientError(507, str(e)) from None
        except TfmError as e:
            raise ClientError(503, str(e)) from None


def _said(c: Correction) -> dict[str, Any]:
    """What a post's answer says of a correction or term it stored."""
    return {"id": c.id, "status": c.status, "reasons": c.reasons}


def attention_to(model: Translator, line: str, translation: str, options: DecodeConfig) -> Attention:
    """`model`'s cross-attention over `line` while it reads `translation`, a correction it did not
    write, as its output (teacher forcing: how `Translator.attention` weighs the model's own best
    translation): the weights the page shows for an answer from the translation memory. A
    translation longer than the model's positions is weighed as far as they go."""
    tokenizer = model.backend.tokenizers.tgt
    (ids,) = tokenizer.encode_batch([translation])
    forced = Translation(translation, ids[: model.max_src_len], 0.0)  # room for <sos>, as for <eos>
    source_tokens, target_tokens, weights = model.backend.cross_attention(line, forced, options.recase)
    return Attention(translation, source_tokens, target_tokens, weights)


def _parse(raw: dict[str, Any], who: str) -> Correction:
    for key in ("source", "corrected"):
        _text(raw, key, key)
    for key in ("output", "client"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ClientError(422, f"{key}: a string, if given")
    return Correction(raw["source"], raw["corrected"], raw.get("output"), _client(raw), origin="serve", caller=who)


def parse_terms(raw: Any, who: str, where: str = "", client: Any = None) -> list[Correction]:
    """Posted terms, `[{"source": ..., "target": ..., "client": ...}, ...]` (the request's
    `where` field; a term without a client takes `client`), as the store's term records; a
    ClientError (422) names the first field that is wrong."""
    if not isinstance(raw, list) or not raw or len(raw) > MAX_TERMS:
        raise ClientError(422, f"{where or 'terms'}: a list of 1 to {MAX_TERMS} terms is required")
    if client is not None and not isinstance(client, str):
        raise ClientError(422, "client: a string, if given")
    terms = []
    for n, term in enumerate(raw):
        at = f"{where}[{n}]." if where else ""
        if not isinstance(term, dict):
            raise ClientError(422, f'{where}[{n}]: a term is {{"source": ..., "target": ...}}')
        source, target = _text(term, "source", f"{at}source"), _text(term, "target", f"{at}target")
        terms.append(Correction(source, target, None, _client(term, client, at), origin="serve", caller=who))
    return terms


def _text(raw: dict[str, Any], key: str, name: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ClientError(422, f"{name}: a non-empty string is required")
    return value


def _client(raw: dict[str, Any], default: Any = None, at: str = "") -> str | None:
    client = raw.get("client", default)
    if client is not None and not isinstance(client, str):
        raise ClientError(422, f"{at}client: a string, if given")
    if client is not None and len(client) > MAX_CLIENT_ID:
        raise ClientError(422, f"{at}client: at most {MAX_CLIENT_ID} characters")
    return client


def _unknown_share(model: Translator) -> Any:
    """The share of a target-language text's tokens that the model's vocabulary does not know."""
    tokenizer = model.backend.tokenizers.tgt

    def share(text: str) -> float:
        (ids,) = tokenizer.encode_batch([text])
        return sum(i == tokenizer.ids.unk for i in ids) / max(1, len(ids))

    return share
