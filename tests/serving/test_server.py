"""serving/server.py: what `tfm serve` settles before it loads a model: the bearer token (file
over variable, blank refused), whether the address is this machine's own, the listening
sockets (a busy port or a bad host: one line, exit 2), the decoding threads, and the server's
shared state around a loaded model. (SIGTERM and the whole process: test_serve_*.py.)"""

from __future__ import annotations

import logging
import signal
import socket

import pytest
import torch
from helpers import untrained_checkpoint
from reliability.cron_helpers import error_lines, run_all

import transformer_cli as tfm
from transformer_cli.config import ServeConfig
from transformer_cli.errors import UsageError
from transformer_cli.host import allocator
from transformer_cli.host.machine import available_cpus
from transformer_cli.serving.server import (
    build_server,
    is_loopback,
    listen,
    log_serving,
    read_token,
    serve_threads,
    stopped,
)


def test_the_token_comes_from_its_file_else_its_variable_and_is_never_blank(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("TFM_TEST_TOKEN", raising=False)
    sc = ServeConfig(token_env="TFM_TEST_TOKEN")
    assert read_token(sc) is None
    monkeypatch.setenv("TFM_TEST_TOKEN", "  spaced  ")
    assert read_token(sc) == "spaced"
    monkeypatch.setenv("TFM_TEST_TOKEN", " \t")
    with pytest.raises(UsageError, match=r"^\$TFM_TEST_TOKEN is set but blank"):
        read_token(sc)
    token = tmp_path / "token"
    token.write_text("from-file\n")
    with caplog.at_level(logging.WARNING, logger="tfm"):
        assert read_token(ServeConfig(token_env="TFM_TEST_TOKEN", token_file=str(token))) == "from-file"
    assert "$TFM_TEST_TOKEN is set too and ignored" in caplog.text
    token.write_text("\n")
    with pytest.raises(UsageError, match=f"serve.token_file: {token} is empty"):
        read_token(ServeConfig(token_file=str(token)))
    with pytest.raises(UsageError, match="serve.token_file: cannot read"):
        read_token(ServeConfig(token_file=str(tmp_path / "none")))


def test_sockets_are_bound_before_the_model_loads_and_a_busy_port_is_one_line():
    [sock] = listen("127.0.0.1", 0)
    try:
        sock.listen()  # (uvicorn listens on it)
        port = sock.getsockname()[1]
        assert sock.family == socket.AF_INET and port > 0
        with pytest.raises(UsageError) as caught:
            listen("127.0.0.1", port)
        assert str(caught.value) == (
            f"cannot listen on 127.0.0.1:{port}: address already in use (--host, --port; serve.host, serve.port)"
        )
    finally:
        sock.close()
    with pytest.raises(UsageError, match=r"cannot listen on no-such-host.invalid:0: cannot resolve"):
        listen("no-such-host.invalid", 0)


def test_half_the_cpus_decode():
    assert serve_threads() == max(1, available_cpus() // 2)


def test_the_servers_state_is_built_around_the_loaded_model(tmp_path):
    model = tfm.load(untrained_checkpoint(tmp_path / "m.pt"), device="cpu")
    sc = ServeConfig(batch_tokens=300, max_wait_ms=5)
    threads = torch.get_num_threads()
    server = build_server(model, sc, "cpu", "fp32", threads, "s3cret")
    try:
        assert server.watcher.current is model and server.token == "s3cret" and server.limits is sc
        assert server.batcher.busy() is None  # nothing admitted yet
        assert server.cut_off == 0
        server.count_cut_off()
        assert server.cut_off == 1
    finally:
        for pool in (server.decode_thread, server.reload_thread, server.tokenize_thread):
            if pool is not None:
                pool.shutdown()


def test_serving_says_what_it_serves_where_and_how_it_stopped(tmp_path, caplog):
    """`tfm serve`'s lines: uvicorn's sent to tfm's handlers, the model, its threads and each
    address; on the stop signal, a plain line, or a warning counting the requests cut off."""
    path = untrained_checkpoint(tmp_path / "m.pt")
    model = tfm.load(path, device="cpu")
    sc = ServeConfig(shutdown_grace_s=2.5)
    server = build_server(model, sc, "cpu", "fp32", 1, None)
    sockets = listen("127.0.0.1", 0)
    uvicorn_log = logging.getLogger("uvicorn")
    before = uvicorn_log.handlers[:], uvicorn_log.propagate, uvicorn_log.level
    try:
        with caplog.at_level(logging.INFO, logger="tfm"):
            log_serving(sc, [path], model, 3, sockets)
            assert uvicorn_log.handlers == logging.getLogger("tfm").handlers and not uvicorn_log.propagate
            assert uvicorn_log.level == logging.getLogger("tfm").level
            stopped(server, signal.SIGTERM, None)
            server.count_cut_off()
            stopped(server, signal.SIGINT, None)
        port = sockets[0].getsockname()[1]
        assert [r.getMessage() for r in caplog.records] == [
            f"serving {path} ({model.config_name}, sha256 {model.sha256[:12]}) with 3 threads, "
            f"{allocator.describe()}; watching it for new versions every {sc.reload_poll_s:g} s",
            f"listening on http://127.0.0.1:{port}",
            "SIGTERM: stopped after answering the requests in flight",
            "warning: SIGINT: stopped; serve.shutdown_grace_s (2.5 s) ran out: 1 request(s) cut off with 503",
        ]
        assert caplog.records[-1].levelno == logging.WARNING
    finally:
        uvicorn_log.handlers[:], uvicorn_log.propagate = before[0], before[1]
        uvicorn_log.setLevel(before[2])
        for sock in sockets:
            sock.close()
        for pool in (server.decode_thread, server.reload_thread, server.tokenize_thread):
            if pool is not None:
                pool.shutdown()


@pytest.mark.slow  # two `tfm serve` processes
def test_token_sources_and_the_open_address_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("TFM_SERVE_TOKEN", " from-env ")
    assert read_token(ServeConfig()) == "from-env"
    monkeypatch.delenv("TFM_SERVE_TOKEN")
    assert read_token(ServeConfig()) is None
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    missing = str(tmp_path / "missing.pt")
    exposed, unreadable = run_all(
        ("serve", "--checkpoint", missing, "--host", "0.0.0.0", "--port", "0"),
        ("serve", "--checkpoint", missing, "--set", f"serve.token_file={tmp_path / 'no-token'}"),
    )
    assert "warning: listening on 0.0.0.0 without a bearer token" in exposed.stderr
    assert exposed.returncode == 2 and "checkpoint not found" in exposed.stderr
    assert unreadable.returncode == 2 and "serve.token_file: cannot read" in unreadable.stderr


def test_bad_address_or_blank_token_is_exit_2_before_loading(trained, tmp_path, monkeypatch):
    model = str(trained["run"] / "published.pt")
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    monkeypatch.setenv("TFM_TEST_BLANK", " \t")
    monkeypatch.setenv("TFM_TEST_TOKEN", "from-env")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken, unknown, blank = run_all(
            ("serve", "--checkpoint", model, "--port", str(port)),
            (
                "serve",
                "--checkpoint",
                model,
                "--host",
                "no-such-host.invalid",
                "--port",
                "0",
                "--set",
                "serve.token_env=TFM_TEST_TOKEN",
                "--set",
                f"serve.token_file={token_file}",
            ),
            (
                "serve",
                "--checkpoint",
                model,
                "--port",
                str(port),  # the port: never serves
                "--set",
                "serve.token_env=TFM_TEST_BLANK",
            ),
        )
    for r in (taken, unknown, blank):
        assert r.returncode == 2 and len(error_lines(r.stderr)) == 1, r.stderr
        assert "Traceback" not in r.stderr and f"serving {model}" not in r.stderr, r.stderr
    assert (
        f"tfm: error: cannot listen on 127.0.0.1:{port}: address already in use "
        "(--host, --port; serve.host, serve.port)"
    ) in taken.stderr
    assert "tfm: error: cannot listen on no-such-host.invalid:0: cannot resolve" in unknown.stderr
    assert (
        f"warning: using the bearer token from serve.token_file ({token_file}); $TFM_TEST_TOKEN is set too and ignored"
    ) in unknown.stderr
    assert "tfm: error: $TFM_TEST_BLANK is set but blank" in blank.stderr
