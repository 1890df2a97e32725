"""``trl-ext sandbox-serve``: SandboxFusion's ``POST /run_code`` served by trl_ext's own local sandbox.

A CPU machine becomes an execution node for the remote backend with one command. Every program runs in the
local sandbox ("auto": bubblewrap, else landlock) exactly like a local run; the service judges nothing. The
protocol (request decoding, ``files``/``fetch_files``, the answer's shape) lives in ``run_code.py``.
``GET /health`` (and SandboxFusion's ``GET /v1/ping``) answer while the service is up.

The service is reachable by anyone who reaches its port, so every limit holds before any work is done for a
client (docs/sandbox.md, class 10). The HTTP layer (``serve_http.py``) keeps a connection off the handler threads
until its headers are in, serves at most ``workers + queue + 32`` connections with threads, holds further ones in
the listen backlog (never reset), and bounds each request's reading by ``read_timeout_s`` from the connection.
Then, from the headers alone: with a shared secret, a ``POST`` without ``Authorization: Bearer <secret>`` gets
401; a place among ``workers`` running and ``queue`` waiting requests is taken (else 429), so at most that many
bodies of at most ``max_request_bytes`` are ever held; only then is the body read. Every bad body gets 400
(``run_code.decode_body`` is total).
"""

from __future__ import annotations

import dataclasses
import hmac
import http.client
import io
import ipaddress
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from trl_ext.sandbox import native_payload
from trl_ext.sandbox.backends import Backend, get_backend
from trl_ext.sandbox.base import harness_digest
from trl_ext.sandbox.remote import SECRET_ENV
from trl_ext.sandbox.run_code import (
    BadRequest,
    RunRequest,
    answer,
    decode_body,
    program,
    response_for,
    unavailable_language,
)
from trl_ext.sandbox.serve_http import HEADER_TIMEOUT_S, BoundedHTTPServer, DeadlineReader, http_answer, json_pieces

_SPARE_CONNECTIONS = 32  # threads beyond workers + queue: they answer 429, 400, 401 while the queue is full
_DRAIN_BYTES = 1 << 20  # an unread body is read and dropped up to this size, so the client gets the answer
_DRAIN_S = 5.0
# what the service may hold for one answer per byte of the run's output cap, at worst: the bytes read, their text
# (four bytes a character once one is outside the BMP) and the UTF-8 copies that cut it at the cap: 9.1x measured
# for bytes that are no UTF-8 and one emoji, 3.0x for control bytes. The JSON is written a piece at a time
# (``json_pieces``); made whole, it took 8.7x the output (red team round 12)
ANSWER_BYTES_PER_OUTPUT_BYTE = 12
_LOGGER = logging.getLogger("trl_ext.sandbox.server")


@dataclasses.dataclass
class ServeConfig:
    """Settings of one ``sandbox-serve`` process (``secret``: required as ``Authorization: Bearer <secret>``)."""

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
    queue: int = 64
    backend: str | None = None
    max_request_bytes: int = 16 << 20
    max_timeout_s: float = 300.0
    max_memory_mb: int = 8192
    read_timeout_s: float = 30.0
    secret: str | None = dataclasses.field(default=None, repr=False)
    header_timeout_s: float = HEADER_TIMEOUT_S
    per_address: int | None = None  # connections held per client address; None: half the held places
    max_answers_mb: int = 2048  # answers held at once, at their worst case (ANSWER_BYTES_PER_OUTPUT_BYTE), else 429

    def __post_init__(self) -> None:
        positive = ("workers", "queue", "max_request_bytes", "max_timeout_s", "max_memory_mb", "read_timeout_s")
        positive += ("max_answers_mb",)
        for name in (*positive, "header_timeout_s", *(("per_address",) if self.per_address is not None else ())):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"sandbox-serve `--{name.replace('_', '-')}` must be > 0, got {getattr(self, name)!r}."
                )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"sandbox-serve `--port` must be in 0..65535, got {self.port}.")
        if self.secret is not None and (not self.secret or not self.secret.isprintable()):
            raise ValueError(f"the sandbox-serve secret (${SECRET_ENV}) must be non-empty printable text.")

    @property
    def connections(self) -> int:
        return self.workers + self.queue + _SPARE_CONNECTIONS


class _Admission:
    """At most ``workers`` runs at once and ``queue`` more waiting, and answers of at most ``answer_bytes`` in all;
    beyond that, refuse at once."""

    def __init__(self, workers: int, queue: int, answer_bytes: int) -> None:
        self._lock, self._admitted, self._limit = threading.Lock(), 0, workers + queue
        self._running = threading.Semaphore(workers)
        self._answers_free = answer_bytes

    def hold_answer(self, size: int) -> bool:
        """Take ``size`` bytes of the answers' budget (an answer's worst case, before its run); False: none left."""
        with self._lock:
            if size > self._answers_free:
                return False
            self._answers_free -= size
            return True

    def drop_answer(self, size: int) -> None:
        with self._lock:
            self._answers_free += size

    def reserve(self) -> bool:
        """Take a place (running or waiting) without waiting; False when every place is taken."""
        with self._lock:
            if self._admitted >= self._limit:
                return False
            self._admitted += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._admitted -= 1

    @property
    def running(self) -> threading.Semaphore:
        return self._running


def make_server(config: ServeConfig, backend: Backend | None = None) -> BoundedHTTPServer:
    """A bound, not yet serving, HTTP server (``server.server_address`` holds the port when ``config.port`` is 0)."""
    runner = backend or get_backend(config.backend)
    if runner.name == "remote":
        raise ValueError("sandbox-serve runs programs locally: `--backend` cannot be remote.")
    admission = _Admission(config.workers, config.queue, config.max_answers_mb << 20)
    expected = f"Bearer {config.secret}".encode() if config.secret else None

    class Handler(BaseHTTPRequestHandler):
        server_version = "trl-ext-sandbox"
        timeout = config.read_timeout_s  # each socket operation; the reader below bounds the whole request

        def setup(self) -> None:
            super().setup()
            self.rfile.close()
            prefix, deadline = self.server.request_start(self.request)  # the headers, read by the gate
            self.rfile = io.BufferedReader(DeadlineReader(self.connection, deadline, prefix))

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
            pass  # one line per run would flood the log of a busy node

        def _reply(self, code: int, body: dict | str) -> None:
            """JSON always, as SandboxFusion's FastAPI answers ("pong" included), measured and then written a piece
            at a time (``json_pieces``: ASCII, so its characters are its bytes)."""
            self.request_version = "HTTP/1.1"  # a status line always (an HTTP/0.9 request line would get none)
            self.connection.settimeout(config.read_timeout_s)  # writing, too, is bounded
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(sum(map(len, json_pieces(body)))))
                self.send_header("Connection", "close")
                self.end_headers()
                for piece in json_pieces(body):
                    self.wfile.write(piece.encode("ascii"))
                self.wfile.flush()
            except OSError:  # the client left or stopped reading
                pass
            self.close_connection = True

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """The base class's errors (a malformed request line, HTTP/0.9, an unknown method) as JSON too, with a
            status line always; an unknown method is 405, as from SandboxFusion's FastAPI."""
            code, message = (405, "Method Not Allowed") if code == 501 else (code, message)
            self._reply(code, {"detail": message or explain or "bad request"})

        def _refuse(self, code: int, error: str, unread: int = 0, wait_s: float = 0.0) -> None:
            """Answer without reading the body, then drop what the client has sent of it (waiting up to
            ``wait_s`` for the rest, at most ``_DRAIN_BYTES``), so that closing the socket does not reset the
            connection before the client reads the answer."""
            self._reply(code, {"detail": error})
            reader, unread = self.rfile.raw, min(unread, _DRAIN_BYTES)
            reader.deadline, reader.drain = min(reader.deadline, time.monotonic() + wait_s), True
            try:
                while unread > 0 and (chunk := self.rfile.read1(min(unread, 1 << 16))):
                    unread -= len(chunk)
            except OSError:
                pass

        def _authorized(self) -> bool:
            given = (self.headers.get("Authorization") or "").encode("utf-8", "replace")
            return expected is None or hmac.compare_digest(given, expected)

        def do_GET(self) -> None:
            if self.path in ("/health", "/v1/ping"):
                health = {"status": "ok", "backend": runner.name, native_payload.HEALTH_KEY: harness_digest()}
                health[native_payload.LIMIT_KEY] = config.max_request_bytes
                health[native_payload.WORKERS_KEY] = config.workers
                health[native_payload.TIMEOUT_KEY] = config.max_timeout_s
                self._reply(200, health if self.path == "/health" else "pong")
            else:
                self._reply(404, {"detail": f"no such endpoint {self.path[:200]}"})

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._refuse(411, "Content-Length is required")
            if length < 0 or length > config.max_request_bytes:
                return self._refuse(413, f"request body over {config.max_request_bytes} bytes", length)
            if self.path.rstrip("/") not in ("/run_code", "/v1/run_code"):
                return self._refuse(404, f"no such endpoint {self.path[:200]}", length)
            if not self._authorized():
                return self._refuse(401, "a valid `Authorization: Bearer <secret>` header is required", length)
            if not admission.reserve():
                return self._refuse(429, "queue full, retry later", length, _DRAIN_S)
            try:
                self._run(length)
            finally:
                admission.release()

        def _run(self, length: int) -> None:
            try:
                data = self.rfile.read(length)
            except TimeoutError:
                return self._reply(408, {"detail": f"the request was not sent within {config.read_timeout_s} s"})
            if len(data) < length:
                return self._reply(400, {"detail": "the body is shorter than its Content-Length"})
            try:
                request = decode_body(data, config.max_timeout_s, config.max_memory_mb)
            except BadRequest as exc:
                return self._reply(400, {"detail": str(exc)})
            del data
            if request.language != "python":
                return self._reply(200, unavailable_language(request.language))
            self._answer(request)

        def _answer(self, request: RunRequest) -> None:
            """Run ``request`` and answer it, its answer's worst case held in the answers' budget meanwhile."""
            caps = request.limits.max_output_bytes + request.limits.max_stderr_bytes  # every output the answer carries
            size = caps * ANSWER_BYTES_PER_OUTPUT_BYTE  # (stdout's cap holds the fetched files' too)
            if size > config.max_answers_mb << 20:
                most = (config.max_answers_mb << 20) // ANSWER_BYTES_PER_OUTPUT_BYTE - request.limits.max_stderr_bytes
                return self._reply(400, {"detail": f"`output_limit_bytes` is over this service's ~{most}"})
            if not admission.hold_answer(size):
                return self._reply(429, {"detail": "the answers' memory is taken: retry later, or ask less output"})
            try:
                self._reply(*_executed(runner, request, admission.running))
            finally:
                admission.drop_answer(size)

    timeouts = (config.read_timeout_s, config.header_timeout_s)
    return BoundedHTTPServer(
        (config.host, config.port), Handler, config.connections, *timeouts, config.per_address, _screen(expected)
    )


_OPEN_PATHS = (b"/health", b"/v1/ping")  # load balancers' probes: answered without the secret
_UNAUTHORIZED = http_answer(401, "Unauthorized", "a valid `Authorization: Bearer <secret>` header is required")


def _screen(expected: bytes | None) -> Callable[[bytes], bytes | None] | None:
    """With a secret, the header gate's check of a request's head: 401 at once, before any thread or place is
    taken, for every request but the open probes that lacks ``Authorization: <expected>``."""
    if expected is None:
        return None

    def screen(head: bytes) -> bytes | None:
        line, _, rest = head.partition(b"\n")
        method, _, target = line.partition(b" ")
        if method == b"GET" and target.split(b" ", 1)[0] in _OPEN_PATHS:
            return None
        try:
            given = http.client.parse_headers(io.BytesIO(rest)).get("Authorization") or ""
        except (http.client.HTTPException, ValueError):  # too many or malformed headers: not shown the secret
            return _UNAUTHORIZED
        return None if hmac.compare_digest(given.encode("utf-8", "replace"), expected) else _UNAUTHORIZED

    return screen


# what signal(7) says does not end a process by default (ignored, stopped, continued), and what a handler here must
# not take: SIGKILL and SIGSTOP (it cannot), SIGINT (KeyboardInterrupt already ends the service cleanly), SIGPIPE
# (python ignores it) and the faults of this process's own code (no Python runs safely there)
_NOT_ENDING = {"SIGCHLD", "SIGCONT", "SIGURG", "SIGWINCH", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGKILL", "SIGSTOP"}
_NOT_ENDING |= {"SIGINT", "SIGPIPE", "SIGILL", "SIGTRAP", "SIGBUS", "SIGFPE", "SIGSEGV"}


def ending_signals() -> list[int]:
    """Every signal whose default action ends the service, from this system's table (real-time ones included), to
    end it cleanly instead: the fork servers stop, their directories go and runs in flight are killed (red team
    rounds 13 and 14: HUP, QUIT, then PWR and PROF left a run's daemon). One inherited as ignored stays ignored."""
    numbers = [number for number in signal.valid_signals() if _name(number) not in _NOT_ENDING]
    return [number for number in numbers if signal.getsignal(number) != signal.SIG_IGN]


def _name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal past the named ones
        return f"SIGRT{number}"


def _executed(runner: Backend, request: RunRequest, running: threading.Semaphore) -> tuple[int, dict]:
    """(HTTP status, answer) of ``request`` run by ``runner``: 500 for a fault of this service (the client retries)."""
    try:
        return 200, _execute(runner, request, running)
    except Exception:
        _LOGGER.exception("sandbox-serve: the run failed")
        return 500, {"detail": "internal error of the execution service"}


def _execute(runner: Backend, request: RunRequest, running: threading.Semaphore) -> dict:
    if request.native is not None:
        with running:
            return response_for(native_payload.run(runner, request.native, request.stdin, request.limits))
    code, marker = program(request)
    with running:
        result = runner.launch({"mode": "script", "code": code}, request.stdin, request.limits)
    return answer(result, request, marker)


def exposure_warning(host: str, secret: str | None) -> str | None:
    """The warning for a service that anyone on the network can use, or None."""
    if secret:
        return None
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None
    return (
        f"WARNING: trl-ext sandbox-serve listens on {host or 'every interface'} WITHOUT A SECRET: anyone who can "
        f"reach this port can run code on this machine and use its CPUs. Set {SECRET_ENV} here and on the "
        "trainers (they send it as `Authorization: Bearer ...`), or listen on 127.0.0.1 only."
    )


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(config: ServeConfig) -> None:
    """Serve until interrupted."""
    server = make_server(config)
    host, port = server.server_address[:2]
    warning = exposure_warning(config.host, config.secret)
    if warning:
        banner = "!" * 100
        print(f"{banner}\n{warning}\n{banner}", file=sys.stderr, flush=True)
        _LOGGER.warning(warning)
    print(
        f"trl-ext sandbox-serve: http://{host}:{port} (backend {get_backend(config.backend).name}, "
        f"{config.workers} workers, queue {config.queue}, {'secret required' if config.secret else 'no secret'})",
        flush=True,
    )
    for number in ending_signals():
        signal.signal(number, _terminate)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
