"""Class 10, round 8 (outside red team): clients without the secret must not starve clients with it. 2200 idle
connections without the secret took every held place of ``sandbox-serve`` and the trainer's requests timed out
(reward None). Each test uses small limits so that the flood is cheap; the remote backend's deadline is kept
short (``queue_s``) so that a starved client fails the test quickly instead of waiting."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from trl_ext.sandbox import Limits, serve_http
from trl_ext.sandbox.remote import RemoteBackend

from ._serve import post, serving

SECRET = "flood-test-secret"
CODE = {"mode": "script", "code": "print(7)"}


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that never send a byte."""
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def _closed(sock: socket.socket, wait_s: float = 0.0) -> bool:
    sock.settimeout(wait_s or 0.001)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def _authenticated_run(url: str) -> tuple[str, str]:
    backend = RemoteBackend(url, retries=0, secret=SECRET, queue_s=5.0)
    result = backend.launch(CODE, b"", Limits(timeout_s=5))
    return result.status, result.stdout


def test_idle_connections_past_the_held_places_evict_the_oldest_and_a_client_with_the_secret_is_served(monkeypatch):
    monkeypatch.setattr(serve_http, "_HELD", 40)
    settings = {"workers": 1, "queue": 1, "secret": SECRET, "read_timeout_s": 60.0, "header_timeout_s": 60.0}
    with serving(**settings, per_address=10_000) as url:  # only the global bound acts here
        idle = _idle(_port(url), 300)
        try:
            assert _authenticated_run(url) == ("ok", "7\n")  # before: it waited behind them in the backlog
            assert _closed(idle[0], 5.0)  # the oldest made room (its header deadline is a minute away)
            assert not _closed(idle[-1])  # the newest is still held
        finally:
            for sock in idle:
                sock.close()
        assert _authenticated_run(url) == ("ok", "7\n")  # every place the flood took came back
        more = _idle(_port(url), 60)  # and the places are all there: 40 held again without a wait
        try:
            assert _authenticated_run(url) == ("ok", "7\n")
            assert _closed(more[0], 5.0) and not _closed(more[-1])
        finally:
            for sock in more:
                sock.close()


def test_one_address_holds_at_most_its_share_of_connections():
    with serving(workers=1, queue=1, secret=SECRET, header_timeout_s=60.0, per_address=20) as url:
        idle = _idle(_port(url), 100)
        try:
            assert _authenticated_run(url) == ("ok", "7\n")
            time.sleep(0.5)  # the gate has taken every connection in
            still_held = [sock for sock in idle if not _closed(sock)]
            assert 0 < len(still_held) <= 20
            assert still_held == idle[-len(still_held) :]  # the oldest went first
        finally:
            for sock in idle:
                sock.close()


def test_headers_have_a_deadline_of_their_own_shorter_than_the_request():
    with serving(workers=1, queue=1, read_timeout_s=60.0, header_timeout_s=0.5) as url:
        sock = _idle(_port(url), 1)[0]
        started = time.monotonic()
        closed = _closed(sock, 20.0)
        waited = time.monotonic() - started
        sock.close()
    print(f"idle connection dropped after {waited:.2f} s (header timeout 0.5 s, read timeout 60 s)")
    assert closed and waited < 20.0  # a bound: the read timeout alone would hold it for 60 s


def _threads(prefix: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(prefix))


def test_a_request_without_the_secret_is_refused_by_the_gate_before_its_body_and_without_a_thread():
    before = _threads("Thread-")
    with serving(workers=1, queue=1, secret=SECRET, read_timeout_s=60.0) as url:
        port = _port(url)
        heads = []
        for token in ("", "Authorization: Bearer wrong\r\n"):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(f"POST /run_code HTTP/1.1\r\nHost: x\r\n{token}Content-Length: 5000\r\n\r\n".encode())
            heads.append(sock.recv(1 << 16))  # answered with no body sent
            sock.close()
        assert _threads("Thread-") - before <= 1  # the accept loop only: no handler thread was started
        assert post(url, {"code": "print(8)", "language": "python"}, {"Authorization": f"Bearer {SECRET}"})[0] == 200
        with contextlib.closing(socket.create_connection(("127.0.0.1", port), timeout=10)) as probe:
            probe.sendall(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200" in probe.recv(1 << 16).split(b"\r\n")[0]  # the open probe needs no secret
    assert [head.split(b"\r\n")[0] for head in heads] == [b"HTTP/1.1 401 Unauthorized"] * 2
    assert all(b"Authorization: Bearer <secret>" in head for head in heads)


def test_the_service_waits_take_descriptors_past_1023():
    # A flood of connections pushes the service's descriptors past 1023, where select(2) raises ValueError: the
    # fork server's spare thread died of it. Its waits use poll(2) (``_process.readable``).
    import os
    import resource

    from trl_ext.sandbox._process import readable

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        raise AssertionError(f"this test needs RLIMIT_NOFILE's hard limit >= 2048, got {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    read, write = os.pipe()
    high = os.dup2(read, 1500)
    try:
        assert not readable(high, 0.0)
        os.write(write, b"x")
        assert readable(high, 1.0)
    finally:
        for fd in (read, write, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
