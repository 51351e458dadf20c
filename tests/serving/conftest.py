"""Fixtures for the server tests: the toy model of `trained` (tests/conftest.py), served once."""

from __future__ import annotations

import pytest
from serving.serve_helpers import Served

# serve.max_pending_s=null: what these servers answer must not depend on how busy the machine
# is (the suite runs two tests at a time); load shedding has its own servers in test_serve_load.
LIMITS = [
    "--set",
    "serve.max_pending_s=null",
    "--set",
    "serve.threads=1",
    "--set",
    "serve.max_inputs=8",
    "--set",
    "serve.max_bytes=4096",
    "--set",
    "serve.max_beam_size=6",
]


@pytest.fixture(scope="session")
def model(trained):
    """The trained toy model through the Python API (what the server's answers must equal)."""
    import transformer_cli as tfm

    return tfm.load(trained["run"] / "published.pt", device="cpu")


@pytest.fixture
def start_server(tmp_path):
    """start_server(*args) -> Served: `tfm serve ARGS`; any still running at the end is stopped."""
    started: list[Served] = []

    def start(*args: str) -> Served:
        started.append(Served(*args, log_to=tmp_path / f"serve-{len(started)}.log"))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def served(trained, tmp_path_factory):
    """`tfm serve` on the toy model with small limits (8 inputs, 4096 bytes, beam 6)."""
    log = tmp_path_factory.mktemp("served") / "serve.log"
    server = Served(
        "-c", str(trained["config"]), "--checkpoint", str(trained["run"] / "published.pt"), *LIMITS, log_to=log
    )
    yield server
    assert server.stop() == 0, server.tfm.stderr
