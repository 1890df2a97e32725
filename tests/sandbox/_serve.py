"""An in-process ``sandbox-serve`` on 127.0.0.1 (any free port) for the network tests of this folder."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from collections.abc import Iterator

from trl_ext.sandbox.backends import Backend
from trl_ext.sandbox.server import ServeConfig, make_server


@contextlib.contextmanager
def serving(runner: Backend | None = None, **settings) -> Iterator[str]:
    """The URL of a running server with ``settings`` (ServeConfig fields) running programs on ``runner`` (default:
    the configured backend); stopped and closed on exit."""
    server = make_server(ServeConfig(host="127.0.0.1", port=0, **settings), runner)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def post(url: str, body: bytes | dict, headers: dict | None = None, timeout: float = 60.0) -> tuple[int, dict]:
    """(HTTP status, decoded JSON answer) of one POST to ``url``'s /run_code."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/run_code", body=data, headers={"Content-Type": "application/json", **(headers or {})})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()
