"""The HTTP application: routes, the bearer-token check, metrics per request.

    POST /translate   {"inputs": ..., "parameters": {...}} -> [{"translation_text": ...}, ...]
    POST /            the same (where Hugging Face's InferenceClient(base_url=...) posts)
    POST /attention   one sentence -> its translation and cross-attention weights (the page uses
                      it); queued as a translation is, admitted by its own bound
    POST /terms       glossary terms (source term, target term), with a corrections.store:
                      every translation uses them from the next request (docs/terms.md)
    POST /corrections a user's correction of a translation, with a corrections.store
                      (serving/corrections.py); /translate and /attention then answer its source
                      from memory, and /translate decodes lines close to it with its help
                      ("near_matches": the ids of the corrections drawn on)
    GET  /health      {"status": "ok", "model": {"path", "sha256", "loaded_at", "config", "file"},
                       "defaults": {"beam_size", "max_beam_size"}}
    GET  /metrics     Prometheus text format
    GET  /            a page to try the model in a browser

Every answer but a 2xx is {"error": "one line"}: client mistakes are 4xx (unknown paths and
methods included); nothing a client sends produces a 500 or a traceback. A translation or
attention request that would wait past serve.max_pending_s is answered 503 at once, with
Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException

from ..api import Attention, Translator
from ..config import ServeConfig
from ..corrections.memory import Remembered
from ..inference.outputs import NearMatches, Output
from .batcher import Batcher, Overloaded
from .corrections import ServedCorrections, attention_to
from .guard import RECEIVED, SHED_PATHS, TRANSLATE_PATHS, Guard, ShedPace
from .metrics import Metrics
from .reloader import ModelWatcher
from .requests import (
    ClientError,
    Languages,
    TranslateRequest,
    parse_attention,
    parse_json,
    parse_translate,
    read_body,
)


@dataclass
class Server:
    """Everything the routes share."""

    limits: ServeConfig
    watcher: ModelWatcher
    batcher: Batcher
    decode_thread: ThreadPoolExecutor
    reload_thread: ThreadPoolExecutor
    metrics: Metrics
    token: str | None
    tokenize_thread: ThreadPoolExecutor | None = None
    corrections: ServedCorrections | None = None  # corrections.store's route and memory
    glossary: tuple[str | None, str | None] = (None, None)  # decode.glossary, decode.glossary_store (docs/terms.md)
    cut_off: int = 0  # requests answered 503 because serve.shutdown_grace_s ran out

    def count_cut_off(self) -> None:
        self.cut_off += 1


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _items(out: Output, model: Translator) -> list[dict[str, Any]]:
    """One response item per input line."""
    items: list[dict[str, Any]] = [{"translation_text": hyps[0].text} for hyps in out.translations]
    for item, hyps in zip(items, out.translations):
        if len(hyps) > 1:
            item["alternatives"] = [{"translation_text": h.text, "score": round(h.score, 4)} for h in hyps]
    for i, n in out.truncated:
        items[i]["warning"] = f"input has {n} tokens; truncated to {model.max_src_len} (the model's limit)"
    for item, uses in zip(items, out.terms):
        if uses:
            item["terms"] = [use.as_json() for use in uses]
    for item, ids in zip(items, out.near):
        if ids:
            item["near_matches"] = ids
    return items


async def _remembered(server: Server, lines: list[str]) -> list[Remembered | None]:
    """Each line's accepted correction in the translation memory, if the server has one."""
    return await server.corrections.remembered(lines) if server.corrections else [None] * len(lines)


def _from_memory(remembered: Remembered) -> dict[str, Any]:
    """What an answer from the translation memory says of itself."""
    return {"from_memory": True, "correction": remembered.id}


async def _translations(
    server: Server, req: TranslateRequest, model: Translator, received: float | None
) -> list[dict[str, Any]]:
    """One response item per input line: from the translation memory (a line an accepted
    correction's source), else from the model, within the bound counted from `received`."""
    remembered, near = (
        await server.corrections.matched(req.lines, model) if server.corrections else ([None] * len(req.lines), None)
    )
    asked = [line for line, r in zip(req.lines, remembered) if r is None]
    translated: list[dict[str, Any]] = []
    if asked:
        options = model.options(**req.parameters)
        options.glossary, options.glossary_store = server.glossary
        if near is not None:  # per line the model decodes: those not remembered, not empty
            kept = [e for line, r, e in zip(req.lines, remembered, near.examples) if r is None and line.strip()]
            near = NearMatches(kept, near.settings) if any(kept) else None
        out = await server.batcher.translate(asked, options, model, received, near)
        server.metrics.truncated.inc(len(out.truncated))
        translated = _items(out, model)
        if server.corrections is not None:
            await server.corrections.keep_served(asked)
    answers = iter(translated)
    return [next(answers) if r is None else {"translation_text": r.translation, **_from_memory(r)} for r in remembered]


async def _attention(server: Server, req: TranslateRequest, model: Translator) -> dict[str, Any]:
    """POST /attention's answer: the model's translation of the one line and its cross-attention;
    for a line the translation memory holds, the correction, the model's attention while it
    reads the correction (teacher forcing: it did not write it) and which correction."""
    line, options = req.lines[0], model.options(**req.parameters)
    [remembered] = await _remembered(server, [line])
    attend: Callable[[], Attention] = (
        functools.partial(model.attention, line, options)
        if remembered is None
        else functools.partial(attention_to, model, line, remembered.translation, options)
    )
    att = await server.batcher.attention(line, options, model, attend)
    answer = {
        "translation_text": att.translation,
        "source_tokens": att.source_tokens,
        "target_tokens": att.target_tokens,
        "weights": att.weights,
    }
    return answer if remembered is None else {**answer, **_from_memory(remembered)}


def _answer_errors(app: FastAPI, pace: ShedPace) -> None:
    """Every error as {"error": "one line"}: a client's mistake, a shed request (paced as the
    guard paces its own), a path or method the router does not know, and a bug."""

    @app.exception_handler(ClientError)
    async def client_error(request: Request, e: ClientError) -> JSONResponse:
        # 408: the client is still sending its body; closing is how it learns to stop
        return _error(e.status, str(e), {**e.headers, **({"Connection": "close"} if e.status == 408 else {})})

    @app.exception_handler(Overloaded)
    async def overloaded(request: Request, e: Overloaded) -> JSONResponse:
        await pace.pause()  # as the guard paces the 503s it answers itself
        return _error(503, str(e), {"Retry-After": str(e.retry_after_s)})

    @app.exception_handler(HTTPException)
    async def routing_error(request: Request, e: HTTPException) -> JSONResponse:
        """404 and 405 from the router, in the shape of every other error."""
        return _error(e.status_code, f"{e.detail}: {request.method} {request.url.path}", e.headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> JSONResponse:
        """A bug: one line to the client; uvicorn logs the traceback."""
        return _error(500, f"internal error ({type(e).__name__}); see the server log")


def _take_corrections(app: FastAPI, server: Server, corrections: ServedCorrections) -> None:
    """POST /corrections and POST /terms (serving/corrections.py)."""

    @app.post("/corrections")
    async def correct(request: Request) -> JSONResponse:
        address = request.client.host if request.client else "-"
        timeout = server.limits.body_timeout_s
        answer = await corrections.post(request.headers, request.stream(), address, server.watcher.current, timeout)
        return JSONResponse(answer)

    @app.post("/terms")
    async def terms(request: Request) -> JSONResponse:
        address = request.client.host if request.client else "-"
        timeout = server.limits.body_timeout_s
        current = server.watcher.current
        return JSONResponse(await corrections.post_terms(request.headers, request.stream(), address, current, timeout))


def _lifespan(server: Server) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The batcher's warm-up before uvicorn listens, the server's background tasks (the batcher,
    the model watcher) while the app runs, and its threads stopped after uvicorn has drained the
    requests in flight."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = server.watcher.current  # timed before uvicorn listens: the bound has batch times from the start
        await server.batcher.warm_up(model, model.options(beam_size=server.limits.max_beam_size))
        tasks = [asyncio.create_task(server.batcher.run()), asyncio.create_task(server.watcher.run())]
        yield  # uvicorn has drained the requests in flight when this resumes
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.decode_thread.shutdown(wait=True)
        server.reload_thread.shutdown(wait=False, cancel_futures=True)
        if server.tokenize_thread is not None:
            server.tokenize_thread.shutdown(wait=False, cancel_futures=True)
        if server.corrections is not None:
            server.corrections.close()

    return lifespan


async def _parsed(
    server: Server, request: Request, parse: Callable[[Any, ServeConfig, Languages | None], TranslateRequest]
) -> tuple[TranslateRequest, Translator]:
    """A translation or attention request's body, read within its bounds and parsed against the
    model that will answer it."""
    body = await read_body(
        request.headers.get("content-length"),
        request.stream(),
        server.limits.max_bytes,
        server.limits.body_timeout_s,
    )
    model = server.watcher.current
    return parse(parse_json(body), server.limits, model.languages), model


def create_app(server: Server) -> FastAPI:
    app = FastAPI(title="tfm", lifespan=_lifespan(server), docs_url=None, redoc_url=None, openapi_url=None)
    pace = ShedPace()  # of the 503s the guard answers and of those the batcher raises
    remembers = server.corrections is not None and server.corrections.cfg.memory
    app.add_middleware(
        Guard,
        metrics=server.metrics,
        token=server.token,
        cut_off=server.count_cut_off,
        busy=server.batcher.busy,
        pace=pace,
        # a memory answers its sources at the bound too: the batcher sheds what needs the model
        shed_paths=tuple(p for p in SHED_PATHS if p not in TRANSLATE_PATHS) if remembers else SHED_PATHS,
    )
    page = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")
    _answer_errors(app, pace)

    @app.post("/")
    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        req, model = await _parsed(server, request, parse_translate)
        items = await _translations(server, req, model, request.scope.get(RECEIVED))
        return JSONResponse(items, headers={"X-Model-Sha256": model.sha256})

    if server.corrections is not None:
        _take_corrections(app, server, server.corrections)

    @app.post("/attention")
    async def attention(request: Request) -> JSONResponse:
        req, model = await _parsed(server, request, parse_attention)
        return JSONResponse(await _attention(server, req, model), headers={"X-Model-Sha256": model.sha256})

    @app.get("/health")
    async def health() -> dict[str, Any]:
        # still "ok" when the file is gone: the model loaded from it keeps serving
        file = "missing" if server.watcher.file_missing else "present"
        model = server.watcher.current
        defaults = {"beam_size": model.backend.decode.beam_size, "max_beam_size": server.limits.max_beam_size}
        return {"status": "ok", "model": {**model.info(), "file": file}, "defaults": defaults}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(server.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    return app
