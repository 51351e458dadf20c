"""`tfm serve`: load the model, read the token, run uvicorn, stop cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

import torch
import uvicorn

from ..api import Model, open_model
from ..config import ServeConfig
from ..device import default_threads
from ..errors import UsageError
from .app import Server, create_app
from .batcher import Batcher
from .metrics import Metrics
from .reloader import ModelWatcher

log = logging.getLogger("tfm")


def serve_threads() -> int:
    """Half the CPUs this process may use: the rest stays free for a nightly `tfm train`."""
    return max(1, default_threads() // 2)


def read_token(sc: ServeConfig) -> str | None:
    """The bearer token from serve.token_file if set, else from the variable serve.token_env."""
    if sc.token_file:
        try:
            token = Path(sc.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"serve.token_file: cannot read {sc.token_file}: {e}") from None
        if not token:
            raise UsageError(f"serve.token_file: {sc.token_file} is empty")
        return token
    return os.environ.get(sc.token_env, "").strip() or None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def build_server(model: Model, sc: ServeConfig, device: str, precision: str, threads: int,
                 token: str | None) -> Server:
    """The shared state of the routes around a loaded model."""
    metrics = Metrics()
    decode_thread = ThreadPoolExecutor(1, "tfm-decode", initializer=torch.set_num_threads,
                                       initargs=(threads,))
    reload_thread = ThreadPoolExecutor(1, "tfm-reload")
    reopen = functools.partial(open_model, device=device, precision=precision)
    watcher = ModelWatcher(model, reopen, sc.reload_poll_s, reload_thread, metrics)
    batcher = Batcher(lambda: watcher.current, decode_thread, sc.batch_tokens,
                      sc.max_wait_ms / 1000, metrics)
    return Server(sc, watcher, batcher, decode_thread, reload_thread, metrics, token)


@contextlib.contextmanager
def _signals_end_cleanly() -> Iterator[None]:
    """uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler it found:
    this one, which lets `tfm serve` exit 0."""

    def stopped(signum: int, frame: FrameType | None) -> None:
        log.info("%s: stopped after answering the requests in flight", signal.Signals(signum).name)

    previous = {s: signal.signal(s, stopped) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def serve(sc: ServeConfig, path: Path, device: str, precision: str) -> None:
    """Serve the model at `path` on sc.host:sc.port until SIGTERM/SIGINT."""
    token = read_token(sc)
    if token is None and not is_loopback(sc.host):
        log.warning("warning: listening on %s without a bearer token: anyone who can reach it can "
                    "use it (set $%s or serve.token_file, or put it behind a proxy)",
                    sc.host, sc.token_env)
    threads = sc.threads or serve_threads()
    torch.set_num_threads(threads)
    model = open_model(path, device, precision)
    app = create_app(build_server(model, sc, device, precision, threads, token))
    uvicorn_log = logging.getLogger("uvicorn")
    uvicorn_log.handlers[:], uvicorn_log.propagate = log.handlers, False
    uvicorn_log.setLevel(log.level)
    log.info("serving %s (%s, sha256 %s) with %d threads; watching it for new versions every %g s",
             path, model.config_name, model.sha256[:12], threads, sc.reload_poll_s)
    config = uvicorn.Config(app, host=sc.host, port=sc.port, log_config=None, access_log=False,
                            lifespan="on")
    with _signals_end_cleanly():
        uvicorn.Server(config).run()
