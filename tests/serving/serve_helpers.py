"""Helpers for the server tests: start the real `tfm serve`, load it with real HTTP clients."""

from __future__ import annotations

import asyncio
import json
import re
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from reliability.cron_helpers import Tfm, wait_until

from transformer_cli.checkpoint import read_payload, write_payload

SENTENCES = [
    "Ein mann sieht einen ball.",
    "Eine frau malt eine blume am strand.",
    "Ein kind hält einen hut.",
    "Zwei hunde trägt ein fahrrad im park.",
    "Ein junge sieht ein buch in der stadt.",
    "Ein mädchen malt einen hut.",
]


def toy_model_args(trained: dict, *settings: str) -> list[str]:
    """`tfm serve` arguments for the toy model of `trained` (its published.pt) with one decoding
    thread, and each `KEY=VALUE` of `settings` as a --set."""
    args = ["-c", str(trained["config"]), "--checkpoint", str(trained["run"] / "published.pt")]
    for setting in ("serve.threads=1", *settings):
        args += ["--set", setting]
    return args


TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def corrections_args(trained: dict, folder: Path, *settings: str) -> tuple[list[str], Path]:
    """`tfm serve` arguments for the toy model of `trained` behind the bearer token TOKEN (a file
    in `folder`), taking corrections into a store in `folder`, without the bound on waits
    (serve.max_pending_s=null), and each `KEY=VALUE` of `settings`; and the store's folder."""
    token, store = folder / "token", folder / "store"
    token.write_text(TOKEN)
    settings = (f"serve.token_file={token}", f"corrections.store={store}", "serve.max_pending_s=null", *settings)
    return toy_model_args(trained, *settings), store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`tfm serve ARGS` on 127.0.0.1 and a free port, ready (GET /health answers) on return."""

    def __init__(self, *args: str, log_to: Path, timeout: float = 60):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tfm = Tfm("serve", *args, "--port", str(self.port), log_to=log_to)
        try:
            wait_until(self._healthy, timeout, "the server to answer /health", alive=self.tfm)
        except BaseException:
            self.tfm.proc.kill()
            self.tfm.wait()
            raise

    def _healthy(self) -> bool:
        try:
            return httpx.get(self.url + "/health", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def get(self, path: str, **kw) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return httpx.post(self.url + path, timeout=30, **kw)

    def sha256(self) -> str:
        return self.get("/health").json()["model"]["sha256"]

    def metric(self, name: str, **labels: str) -> float:
        """One sample of /metrics (0 when absent)."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        pattern = re.escape(name + (f"{{{want}}}" if want else "")) + r" (\S+)"
        found = re.search(r"^" + pattern + "$", self.get("/metrics").text, re.M)
        return float(found.group(1)) if found else 0.0

    def stop(self) -> int:
        if self.tfm.proc.poll() is None:
            self.tfm.proc.terminate()
        return self.tfm.wait(30)


def republish(source: Path, target: Path, note: str) -> str:
    """Write `source`'s model to `target` atomically as a new checkpoint (same weights, another
    sha256, as a promotion would); returns the new sha256."""
    payload = read_payload(source)
    payload["metrics"] = {**payload.get("metrics", {}), "note": note}
    write_payload(target, {k: v for k, v in payload.items() if k not in ("sha256", "format")})
    return read_payload(target)["sha256"]


@dataclass
class Reply:
    sentence: str
    status: int  # 0: no HTTP answer at all
    text: str = ""
    sha256: str = ""
    error: str = ""
    retry_after: str = ""  # the Retry-After header of an answer other than 200

    def shed(self) -> bool:
        """Whether this is admission control's 503 (docs/serving.md, "Under load"): Retry-After
        in whole seconds and `{"error": "the server is busy: ... (serve.max_pending_s=...) ..."}`,
        a documented answer that asks the client to retry, not a failure."""
        if self.status != 503 or not self.retry_after.isdigit() or int(self.retry_after) < 1:
            return False
        try:
            error = json.loads(self.error)["error"]
        except (ValueError, KeyError, TypeError):
            return False
        return isinstance(error, str) and error.startswith("the server is busy: ") and "serve.max_pending_s=" in error


@dataclass
class Load:
    """`clients` concurrent clients sending one sentence per request, in a loop, from a
    thread of their own, until `stop()`."""

    url: str
    clients: int = 8
    sentences: list[str] = field(default_factory=lambda: list(SENTENCES))
    replies: list[Reply] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        wait_until(lambda: len(self.answered()) >= self.clients, 30, "the first answers under load")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def answered(self) -> list[Reply]:
        """The requests admitted and translated."""
        return [r for r in self.replies if r.status == 200]

    def shed(self) -> list[Reply]:
        """The requests admission control answered 503 (`Reply.shed`)."""
        return [r for r in self.replies if r.shed()]

    def failures(self) -> list[Reply]:
        """Every other reply: another status, a 503 of another kind, no answer at all."""
        return [r for r in self.replies if r.status != 200 and not r.shed()]

    def shas(self) -> set[str]:
        """The models that answered."""
        return {r.sha256 for r in self.answered()}

    async def _main(self) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
            await asyncio.gather(*(self._client(client, i) for i in range(self.clients)))

    async def _client(self, client: httpx.AsyncClient, i: int) -> None:
        n = i
        while not self._stop.is_set():
            sentence = self.sentences[n % len(self.sentences)]
            n += 1
            try:
                r = await client.post("/translate", json={"inputs": sentence})
                reply = Reply(sentence, r.status_code, sha256=r.headers.get("x-model-sha256", ""))
                if r.status_code == 200:
                    reply.text = r.json()[0]["translation_text"]
                else:
                    reply.error, reply.retry_after = r.text, r.headers.get("retry-after", "")
            except httpx.HTTPError as e:
                reply = Reply(sentence, 0, error=f"{type(e).__name__}: {e}")
            self.replies.append(reply)


class SlowClient:
    """A raw-socket client that sends a POST /translate's headers (Content-Length:
    `content_length`), then its body one byte every `every_s` seconds from a thread of its own,
    until the body is complete or the server answers or closes the connection."""

    def __init__(self, port: int, content_length: int, every_s: float):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(
            b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % content_length
        )
        self._left, self._every_s = content_length, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self) -> SlowClient:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sock.close()

    def _trickle(self) -> None:
        while self._left and not self._stop.wait(self._every_s):
            if select.select([self.sock], [], [], 0)[0]:  # answered or closed: stop, as curl does
                return
            try:
                self.sock.sendall(b" ")
            except OSError:
                return
            self._left -= 1

    def answer(self, timeout: float) -> tuple[int, str]:
        """(status, body) of the server's answer (0, "" if it closed the connection unanswered)."""
        self.sock.settimeout(timeout)
        return read_answer(self.sock)

    def closed_by_server(self, timeout: float = 5) -> bool:
        """Whether the server closes the connection (after answering) within `timeout` s."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:  # closed with our unread bytes pending: also closed
            return True
        except TimeoutError:
            return False


def read_answer(sock: socket.socket) -> tuple[int, str]:
    """(status, body) of one HTTP answer on `sock` (0, "" if it is closed unanswered)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, ""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert found, head
    length = int(found.group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split()[1]), body.decode()


def _post(path: str, body: dict) -> bytes:
    """The bytes of an HTTP/1.1 POST of `body` as JSON to `path`."""
    payload = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload


def _ask(sock: socket.socket, request: bytes) -> tuple[int, float]:
    """(status, seconds to answer) of `request` sent on `sock`."""
    sent = time.monotonic()
    sock.sendall(request)
    status, _ = read_answer(sock)
    return status, time.monotonic() - sent


def _on_threads(clients: int, client: Callable[[], None], timeout: float) -> None:
    """`client()` on `clients` threads at once; returns when all are done (or `timeout` s each)."""
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def burst(port: int, path: str, body: dict, clients: int, seconds: float) -> list[tuple[int, float]]:
    """(status, seconds to answer) of every request of `clients` clients that POST `body` to
    `path` again as soon as they are answered, for `seconds`, each on a keep-alive connection
    and a thread of its own, as wrk's connections do. Raw sockets, not httpx: on two cores,
    httpx's own work per request in this process added a tenth of a second and more to what
    its clients measured (30 ms 503s took 120 ms), which would time the clients, not the server."""
    request = _post(path, body)
    answers: list[tuple[int, float]] = []
    stop = time.monotonic() + seconds

    def client() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            while time.monotonic() < stop:
                answers.append(_ask(sock, request))
                if not answers[-1][0]:
                    return

    _on_threads(clients, client, seconds + 120)
    return answers


def wave(port: int, path: str, body: dict, clients: int) -> list[tuple[int, float]]:
    """(status, seconds to answer) of one POST of `body` to `path` by each of `clients` clients,
    sent at once: each connects first, on a thread of its own, then all send together (raw
    sockets, as `burst`)."""
    request = _post(path, body)
    answers: list[tuple[int, float]] = []
    connected = threading.Barrier(clients)

    def client() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            connected.wait(60)
            answers.append(_ask(sock, request))

    _on_threads(clients, client, 120)
    return answers
