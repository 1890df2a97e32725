"""``trl-ext sandbox-serve`` as a network service (docs/sandbox.md, class 10): bounded threads and a real backlog,
read deadlines, admission before the body, 400 for any bad body, the shared secret. Every server listens on
127.0.0.1 only and is stopped by its test; programs are tiny and time-bounded."""

from __future__ import annotations

import json
import math
import random
import resource
import socket
import threading
import time
import urllib.request

import pytest

from trl_ext.sandbox import serve_http
from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.remote import SECRET_ENV, RemoteBackend
from trl_ext.sandbox.run_code import BadRequest, RunRequest, decode_body
from trl_ext.sandbox.server import exposure_warning

from .._backends import start_server, stop_server
from ._serve import post, serving

_RESETS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, ConnectionRefusedError)


def _client(url: str, body: dict, results: list, barrier: threading.Barrier) -> None:
    barrier.wait()
    try:
        results.append(post(url, body, timeout=120)[0])
    except Exception as exc:  # what the test counts: resets and anything else that is not an HTTP answer
        results.append(type(exc).__name__)


def test_a_hundred_concurrent_clients_get_200_or_429_and_no_reset():
    body = {"code": "import time; time.sleep(0.5); print(1)", "language": "python"}
    with serving(workers=2, queue=8) as url:
        results: list = []
        barrier = threading.Barrier(100)
        threads = [threading.Thread(target=_client, args=(url, body, results, barrier)) for _ in range(100)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
    counts = {outcome: results.count(outcome) for outcome in set(results)}
    print("100 concurrent clients:", counts)
    assert len(results) == 100 and set(results) <= {200, 429}, counts
    assert counts.get(200, 0) >= 2 and counts.get(429, 0) >= 1  # the 10 places were full at some point


def _trickle(sock: socket.socket, data: bytes, pause_s: float, limit_s: float) -> float | None:
    """Send ``data`` one byte per ``pause_s``; the seconds until the server closed the connection, or None."""
    start = time.monotonic()
    sock.settimeout(pause_s)
    for byte in data:
        if time.monotonic() - start > limit_s:
            return None
        try:
            sock.sendall(bytes([byte]))
            if sock.recv(1 << 16) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
    return None


def test_a_client_that_trickles_its_headers_is_cut_off_and_others_are_served():
    with serving(workers=1, queue=1, read_timeout_s=1.0) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\n")
            outcome: list = []
            trickler = threading.Thread(
                target=lambda: outcome.append(_trickle(slow, b"X-Slow: " + b"a" * 200, 0.1, 15.0))
            )
            trickler.start()
            assert post(url, {"code": "print(2)", "language": "python"})[0] == 200  # served meanwhile
            trickler.join(30)
    closed_after = outcome[0]
    print(f"slow header client cut after {closed_after} s (read timeout 1 s)")
    assert closed_after is not None and closed_after < 10.0  # a bound, not a timing: without it, never


def test_a_client_that_trickles_its_body_gets_408():
    with serving(workers=1, queue=1, read_timeout_s=1.0) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=15) as slow:
            slow.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            for _ in range(5):
                time.sleep(0.3)
                try:
                    slow.sendall(b" ")
                except OSError:
                    break
            answer = slow.recv(1 << 16)
    assert answer.startswith(b"HTTP/1.0 408"), answer[:100]


def _threads_named(prefix: str) -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith(prefix))


def test_idle_connections_cost_no_thread_and_do_not_delay_real_clients():
    """Connections that send nothing (or trickle their headers) wait without a thread: a real request is served
    at once while 300 of them are still open, and they are dropped at their deadline."""
    before = _threads_named("Thread-")
    with serving(workers=1, queue=1, read_timeout_s=3.0) as url:
        port = int(url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(300)]
        try:
            time.sleep(0.3)
            busy = _threads_named("Thread-") - before
            status, reply = post(url, {"code": "print(3)", "language": "python"})
            still_open = _open(idle[-1])  # served while the idle ones are held, not after they timed out
            print(f"300 idle connections: {busy} server threads; a real request answered {status}")
            assert busy <= 1  # the accept loop; the header gate's thread is not counted here
            assert (status, reply["run_result"]["stdout"], still_open) == (200, "3\n", True)
            idle[0].settimeout(10)
            assert idle[0].recv(1) == b""  # dropped at the deadline, without an answer
        finally:
            for sock in idle:
                sock.close()


def test_headers_longer_than_the_gate_buffer_get_431_and_never_a_thread():
    """A header block that does not end within the gate's buffer is answered 431 by the gate: 100 clients each
    sending 33 KiB of one unfinished header line hold no handler thread, and a real request is served at once."""
    before = _threads_named("Thread-")
    line = b"POST /run_code HTTP/1.1\r\nX-Long: " + b"a" * (33 << 10)
    with serving(workers=1, queue=1, read_timeout_s=20.0) as url:
        port = int(url.rsplit(":", 1)[1])
        long_headers = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        try:
            for sock in long_headers:
                sock.sendall(line)
            time.sleep(0.5)
            busy = _threads_named("Thread-") - before
            started = time.monotonic()
            status, reply = post(url, {"code": "print(3)", "language": "python"})
            waited = time.monotonic() - started
            answers = []
            for sock in long_headers:
                sock.settimeout(10)
                try:
                    answers.append(sock.recv(64).split(b" ")[1])
                except (OSError, IndexError):
                    answers.append(b"closed")
            print(f"100 clients with 33 KiB headers: {busy} server threads; a real request waited {waited:.2f} s")
            assert busy <= 1 and (status, reply["run_result"]["stdout"]) == (200, "3\n")
            assert waited < 10  # far below the 20 s read timeout the long headers would hold a thread for
            assert set(answers) <= {b"431", b"closed"} and answers.count(b"431") >= 90, answers
        finally:
            for sock in long_headers:
                sock.close()


def test_clients_that_stall_their_bodies_hold_at_most_the_bounded_threads():
    before = _threads_named("Thread-")
    with serving(workers=1, queue=1, read_timeout_s=2.0) as url:  # at most 1 + 1 + 32 handler threads
        port = int(url.rsplit(":", 1)[1])
        stalled = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
        try:
            for sock in stalled:
                sock.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            time.sleep(1.0)
            busy = _threads_named("Thread-") - before
            print(f"80 clients stalling their bodies: {busy} server threads (bound 34 + the accept loop)")
            assert 2 <= busy <= 34 + 1
            for sock in stalled:  # each gets an answer: 408 (admitted, body too slow) or 429 (no place)
                sock.settimeout(30)
                assert sock.recv(64).split(b" ")[1] in (b"408", b"429")
        finally:
            for sock in stalled:
                sock.close()


def _open(sock: socket.socket) -> bool:
    sock.settimeout(0.01)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except OSError:
        return False


BAD_BODIES = [
    b"[" * 200_000,
    b'{"code": "1", "language": "python", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"code": "1", "language": "python", "x": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}",
    b"\xff\xfe\x00",
    b"{not json",
    b"",
    b"[]",
    b"null",
    b'"code"',
    b'{"code": 1, "language": "python"}',
    b'{"code": "1", "language": "klingon"}',
    b'{"code": "1", "language": ["python"]}',
    b'{"code": "1", "language": "python", "stdin": 5}',
    b'{"code": "1", "language": "python", "run_timeout": 1e999}',
    b'{"code": "1", "language": "python", "run_timeout": NaN}',
    b'{"code": "1", "language": "python", "run_timeout": "10"}',
    b'{"code": "1", "language": "python", "run_timeout": true}',
    b'{"code": "1", "language": "python", "run_timeout": 0}',
    b'{"code": "1", "language": "python", "memory_limit_MB": 1' + b"0" * 400 + b"}",
    b'{"code": "1", "language": "python", "output_limit_bytes": -Infinity}',
    b'{"code": "1", "language": "python", "output_limit_bytes": 0}',
    b'{"code": "1", "language": "python", "compile_timeout": {}}',
    b'{"code": "1", "language": "python", "files": []}',
    b'{"code": "1", "language": "python", "files": {"a": "not base64!"}}',
    b'{"code": "1", "language": "python", "files": {"a": 5}}',
    b'{"code": "1", "language": "python", "files": {"": "YQ=="}}',
    b'{"code": "1", "language": "python", "files": {"a\\u0000b": "YQ=="}}',
    b'{"code": "1", "language": "python", "fetch_files": "out.txt"}',
    b'{"code": "1", "language": "python", "fetch_files": [1]}',
]


def test_every_bad_body_gets_400_and_the_server_keeps_serving():
    with serving(workers=1, queue=2) as url:
        for body in BAD_BODIES:
            status, reply = post(url, body)
            assert status == 400 and reply["detail"], (body[:80], status, reply)
        assert post(url, {"code": "print(4)", "language": "python"})[0] == 200


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 6 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 1, 10, 2**63, -(10**400), 10**400])
    if kind == 2:
        return rng.choice([0.5, -1.0, 1e308, math.inf, -math.inf, math.nan, 300.0, 301.0])
    if kind in (3, 4, 5):
        return rng.choice(["", "python", "cpp", "x" * 5000, "\x00", "YQ==", "a/../b", "ü", "print(1)"])
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return _random_fields(rng, depth)


def _random_fields(rng: random.Random, depth: int = 0) -> dict:
    keys = ["code", "language", "stdin", "run_timeout", "memory_limit_MB", "output_limit_bytes", "files"]
    keys += ["fetch_files", "compile_timeout", "a", "\x00"]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(6))}


def test_the_body_decoder_is_total_on_generated_bodies():
    """Whatever the bytes, ``decode_body`` returns a request or raises BadRequest (the 400), nothing else."""
    rng = random.Random(20)
    base = {"code": "print(1)", "language": "python"}
    outcomes = {"ok": 0, "bad": 0}
    for i in range(3000):
        body = _random_value(rng) if i % 3 == 0 else {**base, **_random_fields(rng, 3)} if i % 3 == 1 else None
        data = json.dumps(body).encode() if body is not None else rng.randbytes(rng.randrange(64))
        if i % 7 == 0:
            data = data[: rng.randrange(len(data) + 1)]  # truncated
        if i % 11 == 0:
            depth = rng.randrange(1, 20_000)
            data = b'{"code": "1", "language": "python", "x": ' + b"[" * depth + b"]" * depth + b"}"
        try:
            assert isinstance(decode_body(data, 300.0, 8192), RunRequest)
            outcomes["ok"] += 1
        except BadRequest:
            outcomes["bad"] += 1
    assert outcomes["ok"] > 100 and outcomes["bad"] > 1000, outcomes


def test_admission_comes_before_the_body_and_oversized_bodies_get_413():
    with serving(workers=1, queue=1, max_request_bytes=50_000) as url:
        huge = {"code": "#" + "x" * 200_000, "language": "python"}
        assert post(url, huge)[0] == 413  # answered, not reset
        slow = {"code": "import time; time.sleep(1.5)", "language": "python"}
        codes: list = []
        barrier = threading.Barrier(4)
        threads = [threading.Thread(target=_client, args=(url, slow, codes, barrier)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(codes) == [200, 200, 429, 429]  # one running, one waiting, the rest refused before reading


def test_the_shared_secret_guards_run_code(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    code = {"mode": "script", "code": "print(5)"}
    with serving(workers=1, queue=2, secret="s3cret-value") as url:
        assert post(url, {"code": "print(5)", "language": "python"})[0] == 401
        assert post(url, {"code": "print(5)", "language": "python"}, {"Authorization": "Bearer wrong"})[0] == 401
        good = {"Authorization": "Bearer s3cret-value"}
        assert post(url, {"code": "print(5)", "language": "python"}, good)[0] == 200
        with urllib.request.urlopen(url + "/v1/ping", timeout=10) as reply:  # load balancers' probe stays open
            assert json.loads(reply.read()) == "pong"
        refused = RemoteBackend(url, retries=0, secret="wrong").launch(code, b"", Limits(timeout_s=5))
        assert refused.status == "infra_error" and "401" in refused.stderr and SECRET_ENV in refused.stderr
        monkeypatch.setenv(SECRET_ENV, "s3cret-value")
        accepted = RemoteBackend(url, retries=0).launch(code, b"", Limits(timeout_s=5))
        assert (accepted.status, accepted.stdout) == ("ok", "5\n")


def test_the_cli_reads_the_secret_from_the_environment(monkeypatch):
    monkeypatch.setenv("MY_SANDBOX_SECRET", "from-env")
    proc, url = start_server("--workers", "1", "--secret-env", "MY_SANDBOX_SECRET", "--read-timeout", "5")
    try:
        assert post(url, {"code": "print(6)", "language": "python"})[0] == 401
        status, reply = post(url, {"code": "print(6)", "language": "python"}, {"Authorization": "Bearer from-env"})
        assert (status, reply["run_result"]["stdout"]) == (200, "6\n")
    finally:
        stop_server(proc)
    assert "from-env" not in " ".join(proc.args)  # never on the command line


@pytest.mark.parametrize(
    ("host", "secret", "warns"),
    [
        ("0.0.0.0", None, True),
        ("", None, True),
        ("10.1.2.3", None, True),
        ("cpu-pool.internal", None, True),
        ("0.0.0.0", "set", False),
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
    ],
)
def test_a_loud_warning_when_listening_beyond_loopback_without_a_secret(host, secret, warns):
    warning = exposure_warning(host, secret)
    assert (warning is not None) == warns
    if warns:
        assert "WITHOUT A SECRET" in warning and SECRET_ENV in warning


def test_held_connections_leave_descriptors_for_the_runs(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1024, 4096))
    assert serve_http.held_connections(34) == (1024 - 256) // 2
    monkeypatch.setattr(resource, "getrlimit", lambda _: (300, 4096))
    assert serve_http.held_connections(34) == 34
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert serve_http.held_connections(34) == 1024


def _raw_answer(port: int, request: bytes) -> tuple[bytes, bytes]:
    """(status line, body) of the answer to ``request`` sent as is."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0], body


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"PUT /run_code HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", b"405"),
        (b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
        (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", b"405"),
        (b"GET /\r\n\r\n", b"404"),  # HTTP/0.9 (no version): answered with a status line all the same
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", b"505"),
    ],
)
def test_the_base_class_errors_are_json_with_a_status_line(request_bytes, status):
    with serving(workers=1, queue=1, read_timeout_s=5.0) as url:
        line, body = _raw_answer(int(url.rsplit(":", 1)[1]), request_bytes)
    assert line.startswith(b"HTTP/1.") and line.split()[1] == status, line
    assert isinstance(json.loads(body)["detail"], str)


def test_a_body_of_many_containers_is_refused_before_it_is_decoded():
    """15 MiB of ``{},`` decoded to ~400 MiB of objects before any field was checked: a body with more than
    ``MAX_CONTAINERS`` objects and arrays, or strings, is refused from its bytes, having allocated nothing of its
    size."""
    import tracemalloc

    from trl_ext.sandbox import run_code

    n = run_code.MAX_CONTAINERS + 1
    for filler in (b"{},", b"[],", b'"",', b'"a",'):
        data = b'{"code": "print(1)", "language": "python", "x": [' + filler * (n - 1) + filler[:2] + b"]}"
        tracemalloc.start()
        try:
            with pytest.raises(BadRequest, match="more than"):
                decode_body(data, 300.0, 8192)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < len(data) // 4, peak  # decoded, these were ~25 x len(data)
    fine = {"code": "print(1)", "language": "python", "x": [[i] for i in range(50_000)]}
    assert isinstance(decode_body(json.dumps(fine).encode(), 300.0, 8192), RunRequest)


def test_a_native_payload_waits_as_compact_bytes_and_runs_as_decoded():
    from trl_ext.sandbox import native_payload

    payload = {"mode": "calls", "code": "def f(x):\n    return len(x)\n", "calls": [{"fn": "f", "args": [[1] * 9]}]}
    field = native_payload.request_field(payload, Limits(), None, None)
    body = {"code": "", "language": "python", native_payload.FIELD: field}
    request = decode_body(json.dumps(body).encode(), 300.0, 8192)
    assert isinstance(request.native.payload, bytes)
    assert json.loads(request.native.payload) == field["payload"]
    assert native_payload.packed(request.native) is request.native
