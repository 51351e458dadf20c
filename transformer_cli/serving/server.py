"""`tfm serve`: load the model, read the token, run uvicorn, stop cleanly on SIGTERM."""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import signal
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

import torch
import uvicorn

from ..api import Translator, open_translator
from ..config import ServeConfig
from ..config_corrections import CorrectionsConfig
from ..errors import UsageError
from ..host import allocator
from ..host.machine import available_cpus
from ..host.stop_signals import on_stop_signals
from .app import Server, create_app
from .batcher import Batcher
from .corrections import ServedCorrections
from .metrics import Metrics
from .reloader import ModelWatcher

log = logging.getLogger("tfm")


def serve_threads() -> int:
    """Half the CPUs this process may use: the rest stays free for a nightly `tfm train`."""
    return max(1, available_cpus() // 2)


def read_token(sc: ServeConfig) -> str | None:
    """The bearer token from serve.token_file if set, else from the variable serve.token_env.
    An empty file or a set but blank variable is refused: it would turn authentication off."""
    from_env = os.environ.get(sc.token_env)
    if sc.token_file:
        try:
            token = Path(sc.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"serve.token_file: cannot read {sc.token_file}: {e}") from None
        if not token:
            raise UsageError(f"serve.token_file: {sc.token_file} is empty")
        if from_env is not None:
            log.warning(
                "warning: using the bearer token from serve.token_file (%s); $%s is set too and ignored",
                sc.token_file,
                sc.token_env,
            )
        return token
    if from_env is None:
        return None
    if not from_env.strip():
        raise UsageError(f"${sc.token_env} is set but blank: set a token in it, or unset it to serve without one")
    return from_env.strip()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address `host` resolves to (asyncio's choice, which uvicorn would
    make), before the model is loaded: a busy port or a bad host is a usage error naming the
    address, at once, rather than uvicorn's exit 3 after the load."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(
            f"cannot listen on {_address(host, port)}: cannot resolve {host!r} ({e.strerror}; --host, serve.host)"
        ) from None
    sockets: list[socket.socket] = []
    for family, kind, proto, _, address in dict.fromkeys(found):  # once each, in order
        sock = socket.socket(family, kind, proto)
        sockets.append(sock)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # else "::" would also take the IPv4 port
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
        except OSError as e:
            for s in sockets:
                s.close()
            why = (e.strerror or str(e)).lower()
            raise UsageError(
                f"cannot listen on {_address(str(address[0]), port)}: {why} (--host, --port; serve.host, serve.port)"
            ) from None
    return sockets


def build_server(
    model: Translator,
    sc: ServeConfig,
    device: str,
    precision: str,
    threads: int,
    token: str | None,
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str | None = None,
    corrections: CorrectionsConfig | None = None,
    glossary: tuple[str | None, str | None] = (None, None),
) -> Server:
    """The shared state of the routes around a loaded model (one, or an ensemble's), the
    corrections of `corrections.store` when it is set, and the `glossary` its translations use
    (decode.glossary's file, decode.glossary_store's terms)."""
    metrics = Metrics()
    decode_thread = ThreadPoolExecutor(1, "tfm-decode", initializer=torch.set_num_threads, initargs=(threads,))
    reload_thread = ThreadPoolExecutor(1, "tfm-reload")
    tokenize_thread = ThreadPoolExecutor(1, "tfm-tokenize")
    reopen = functools.partial(
        open_translator,
        device=device,
        precision=precision,
        ensemble_weights=ensemble_weights,
        ensemble_combine=ensemble_combine,
    )
    watcher = ModelWatcher(model, reopen, sc.reload_poll_s, reload_thread, metrics)
    batcher = Batcher(
        decode_thread,
        sc.batch_tokens,
        sc.max_wait_ms / 1000,
        metrics,
        tokenize_thread,
        sc.max_pending_s,
        sc.attention_slots,
    )
    source_lang = model.languages[0] if model.languages else "src"
    one_file = model.paths[0] if len(model.paths) == 1 else None  # an ensemble reads no examples
    served = (
        ServedCorrections(corrections, source_lang, one_file) if corrections is not None and corrections.store else None
    )
    return Server(sc, watcher, batcher, decode_thread, reload_thread, metrics, token, tokenize_thread, served, glossary)


def checked_token(sc: ServeConfig, corrections: CorrectionsConfig | None) -> str | None:
    """The bearer token (`read_token`): required to take corrections, and its absence warned
    about on an address other than loopback."""
    token = read_token(sc)
    if corrections is not None and corrections.store and token is None:
        raise UsageError(
            f"corrections.store: tfm serve takes corrections only behind a bearer token: set ${sc.token_env} "
            "or serve.token_file"
        )
    if token is None and not is_loopback(sc.host):
        log.warning(
            "warning: listening on %s without a bearer token: anyone who can reach it can "
            "use it (set $%s or serve.token_file, or put it behind a proxy)",
            sc.host,
            sc.token_env,
        )
    return token


def serve(
    sc: ServeConfig,
    paths: Sequence[Path],
    device: str,
    precision: str,
    ensemble_weights: Sequence[float] | None = None,
    ensemble_combine: str | None = None,
    corrections: CorrectionsConfig | None = None,
    glossary: tuple[str | None, str | None] = (None, None),
) -> None:
    """Serve the model at `paths` (several: an ensemble) on sc.host:sc.port until SIGTERM/SIGINT,
    taking users' corrections into `corrections.store` when it is set, its translations using
    the terms of `glossary` (decode.glossary, decode.glossary_store: docs/terms.md)."""
    token = checked_token(sc, corrections)
    sockets = listen(sc.host, sc.port)  # bound, not listening: no client waits on the load
    threads = sc.threads or serve_threads()
    torch.set_num_threads(threads)
    model = open_translator(
        paths, device, precision, ensemble_weights=ensemble_weights, ensemble_combine=ensemble_combine
    )
    state = build_server(
        model, sc, device, precision, threads, token, ensemble_weights, ensemble_combine, corrections, glossary
    )
    log_serving(sc, paths, model, threads, sockets)
    config = uvicorn.Config(
        create_app(state),
        log_config=None,
        access_log=False,
        lifespan="on",
        # uvicorn annotates an int but waits with it as a timeout: a float works
        timeout_graceful_shutdown=sc.shutdown_grace_s,  # type: ignore[arg-type]
    )
    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal to the handler it found:
    # `stopped`, which reports and lets `tfm serve` exit 0.
    with on_stop_signals(functools.partial(stopped, state)):
        uvicorn.Server(config).run(sockets=sockets)


def log_serving(
    sc: ServeConfig, paths: Sequence[Path], model: Translator, threads: int, sockets: Sequence[socket.socket]
) -> None:
    """uvicorn's log lines sent to tfm's handlers at its level, and the lines that say what is
    served, how, and at which addresses."""
    uvicorn_log = logging.getLogger("uvicorn")
    uvicorn_log.handlers[:], uvicorn_log.propagate = log.handlers, False
    uvicorn_log.setLevel(log.level)
    log.info(
        "serving %s (%s, sha256 %s) with %d threads, %s; watching it for new versions every %g s",
        " + ".join(map(str, paths)),
        model.config_name,
        model.sha256[:12],
        threads,
        allocator.describe(),
        sc.reload_poll_s,
    )
    for sock in sockets:
        host, port = sock.getsockname()[:2]
        log.info("listening on http://%s", _address(host, port))


def stopped(state: Server, signum: int, frame: FrameType | None) -> None:
    """The line `tfm serve` ends with once uvicorn has drained on the stop signal `signum`:
    a warning when serve.shutdown_grace_s ran out and requests were cut off."""
    name = signal.Signals(signum).name
    if state.cut_off:
        log.warning(
            "warning: %s: stopped; serve.shutdown_grace_s (%g s) ran out: %d request(s) cut off with 503",
            name,
            state.limits.shutdown_grace_s,
            state.cut_off,
        )
    else:
        log.info("%s: stopped after answering the requests in flight", name)
