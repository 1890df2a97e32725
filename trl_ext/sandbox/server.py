"""``trl-ext sandbox-serve``: SandboxFusion's ``POST /run_code`` served by trl_ext's own local sandbox.

A CPU machine becomes an execution node for the remote backend with one command. Every program runs in the
local sandbox ("auto": bubblewrap, else landlock) exactly like a local run; the service judges nothing.
Bounded: a request body over ``max_request_bytes`` gets 413, more than ``workers`` running plus ``queue`` waiting
requests get 429 (clients back off and retry), ``run_timeout`` is capped at ``max_timeout_s``.
``GET /health`` (and SandboxFusion's ``GET /v1/ping``) answer while the service is up.

The HTTP layer is the standard library's ThreadingHTTPServer: each request is one bounded JSON exchange that
blocks a thread for the run, and the admission control above caps the threads doing work.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trl_ext.sandbox._process import RunResult
from trl_ext.sandbox.backends import Backend, get_backend
from trl_ext.sandbox.limits import Limits

_MAX_OUTPUT_BYTES = 64 << 20
_HEADROOM_BYTES = 1 << 17


@dataclasses.dataclass
class ServeConfig:
    """Settings of one ``sandbox-serve`` process."""

    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 2
    queue: int = 64
    backend: str | None = None
    max_request_bytes: int = 16 << 20
    max_timeout_s: float = 300.0
    max_memory_mb: int = 8192

    def __post_init__(self) -> None:
        for name in ("workers", "queue", "max_request_bytes", "max_timeout_s", "max_memory_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"sandbox-serve `--{name.replace('_', '-')}` must be > 0, got {getattr(self, name)!r}."
                )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"sandbox-serve `--port` must be in 0..65535, got {self.port}.")


class _Admission:
    """At most ``workers`` runs at once and ``queue`` more waiting; beyond that, refuse at once."""

    def __init__(self, workers: int, queue: int) -> None:
        self._lock, self._admitted, self._limit = threading.Lock(), 0, workers + queue
        self._running = threading.Semaphore(workers)

    def enter(self) -> bool:
        with self._lock:
            if self._admitted >= self._limit:
                return False
            self._admitted += 1
        self._running.acquire()
        return True

    def leave(self) -> None:
        self._running.release()
        with self._lock:
            self._admitted -= 1


class BadRequest(ValueError):
    """A request that does not follow the /run_code protocol (400, with what is wrong)."""


def parse_request(body: dict, config: ServeConfig) -> tuple[str, bytes, Limits]:
    """(code, stdin, limits) of a /run_code request."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    code, language, stdin = body.get("code"), body.get("language"), body.get("stdin") or ""
    if not isinstance(code, str):
        raise BadRequest("`code` must be a string")
    if language != "python":
        raise BadRequest(f"`language` must be 'python' (the only language served), got {language!r}")
    if not isinstance(stdin, str):
        raise BadRequest("`stdin` must be a string or null")
    timeout, memory = body.get("run_timeout", 10), body.get("memory_limit_MB", -1)
    output = body.get("output_limit_bytes", Limits().max_output_bytes)
    for name, value in (("run_timeout", timeout), ("memory_limit_MB", memory), ("output_limit_bytes", output)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"`{name}` must be a number, got {value!r}")
    if not 0 < timeout <= config.max_timeout_s:
        raise BadRequest(f"`run_timeout` must be in (0, {config.max_timeout_s}], got {timeout}")
    memory = Limits().memory_mb if memory <= 0 else int(memory)
    if memory > config.max_memory_mb:
        raise BadRequest(f"`memory_limit_MB` must be at most {config.max_memory_mb}, got {memory}")
    # headroom over the client's caps: trl_ext's bootstrap enforces them itself and says so on stderr
    output = min(max(int(output), 1), _MAX_OUTPUT_BYTES) + _HEADROOM_BYTES
    limits = Limits(timeout_s=float(timeout), memory_mb=memory, max_output_bytes=output, max_stderr_bytes=1 << 20)
    return code, stdin.encode(), limits


def response_for(result: RunResult) -> dict:
    """SandboxFusion's RunCodeResponse for one run (plus ``trl_ext_status``, our own exact status)."""
    if result.status == "infra_error":
        run = {"status": "Error", "return_code": None, "stdout": "", "stderr": result.stderr}
        status, message = "SandboxError", result.stderr[-1000:]
    else:
        timed_out = result.status == "timeout"
        run = {"status": "TimeLimitExceeded" if timed_out else "Finished", "return_code": result.exit_code}
        run.update(stdout=result.stdout, stderr=result.stderr)
        status, message = ("Success" if result.status == "ok" else "Failed"), ""
    run.update(execution_time=result.wall_s, trl_ext_status=result.status)
    return {"status": status, "message": message, "compile_result": None, "run_result": run, "files": {}}


def make_server(config: ServeConfig, backend: Backend | None = None) -> ThreadingHTTPServer:
    """A bound, not yet serving, HTTP server (``server.server_address`` holds the port when ``config.port`` is 0)."""
    runner = backend or get_backend(config.backend)
    if runner.name == "remote":
        raise ValueError("sandbox-serve runs programs locally: `--backend` cannot be remote.")
    admission = _Admission(config.workers, config.queue)

    class Handler(BaseHTTPRequestHandler):
        server_version = "trl-ext-sandbox"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
            pass  # one line per run would flood the log of a busy node

        def _reply(self, code: int, body: dict | str) -> None:
            data = (json.dumps(body) if isinstance(body, dict) else body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/v1/ping"):
                self._reply(200, {"status": "ok", "backend": runner.name} if self.path == "/health" else "pong")
            else:
                self._reply(404, {"error": f"no such endpoint {self.path}"})

        def do_POST(self) -> None:
            if self.path.rstrip("/") not in ("/run_code", "/v1/run_code"):
                return self._reply(404, {"error": f"no such endpoint {self.path}"})
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._reply(HTTPStatus.LENGTH_REQUIRED, {"error": "Content-Length is required"})
            if length > config.max_request_bytes or length < 0:
                self.close_connection = True
                return self._reply(413, {"error": f"request body over {config.max_request_bytes} bytes"})
            try:
                code, stdin, limits = parse_request(json.loads(self.rfile.read(length)), config)
            except (ValueError, UnicodeDecodeError) as exc:
                return self._reply(400, {"error": str(exc)})
            if not admission.enter():
                return self._reply(429, {"error": "queue full, retry later"})
            try:
                result = runner.launch({"mode": "script", "code": code}, stdin, limits)
            finally:
                admission.leave()
            self._reply(200, response_for(result))

    server = ThreadingHTTPServer((config.host, config.port), Handler)
    server.daemon_threads = True
    return server


def serve(config: ServeConfig) -> None:
    """Serve until interrupted."""
    server = make_server(config)
    host, port = server.server_address[:2]
    print(
        f"trl-ext sandbox-serve: http://{host}:{port} (backend {get_backend(config.backend).name}, "
        f"{config.workers} workers, queue {config.queue})",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
