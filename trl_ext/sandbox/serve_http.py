"""The HTTP layer of ``trl-ext sandbox-serve``: the standard library's ThreadingHTTPServer, bounded.

- A connection costs a thread only once its request line and headers have arrived: until then it waits in one
  selector thread (``_HeaderGate``), so clients that connect and send nothing, or trickle their headers, hold a
  socket and at most ``_HEADER_BYTES`` of memory each, never a thread, and are dropped at their deadline. Headers
  that do not end within ``_HEADER_BYTES`` are answered 431 by that thread: an unfinished header block never
  reaches a handler thread.
- At most ``threads`` connections are served by threads at once; at most ``held_connections`` (1024, fewer under a
  low RLIMIT_NOFILE) are held in all. Beyond that the accept loop stops accepting and further clients wait in the
  kernel's listen backlog (``request_queue_size``), never reset.
- Every read of a request happens before one deadline counted from the connection (``DeadlineReader``),
  however slowly the client sends.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import logging
import resource
import selectors
import socket
import threading
import time
from http.server import ThreadingHTTPServer

_HEADER_BYTES = 32 << 10  # buffered per connection while its headers arrive; longer headers are answered 431
_HELD = 1024  # connections held at once (waiting for headers, waiting for a thread, or served)
_LOGGER = logging.getLogger("trl_ext.sandbox.server")


def _answer(status: int, reason: str, detail: str) -> bytes:
    """A complete HTTP answer with a JSON body, as the handler's errors have."""
    body = json.dumps({"detail": detail}).encode()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


_HEADERS_TOO_LONG = _answer(
    431, "Request Header Fields Too Large", f"the request line and headers must fit in {_HEADER_BYTES} bytes"
)


class DeadlineReader(io.RawIOBase):
    """A socket's reading side, starting with ``prefix`` (bytes already received), that fails with TimeoutError
    once ``deadline`` (monotonic) has passed, however slowly the client trickles its bytes (a plain socket
    timeout restarts with every byte). With ``drain`` set, past the deadline it only returns what has arrived."""

    def __init__(self, sock: socket.socket, deadline: float, prefix: bytes = b"") -> None:
        self._sock, self.deadline, self._prefix, self.drain = sock, deadline, prefix, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            size = min(len(buffer), len(self._prefix))
            buffer[:size], self._prefix = self._prefix[:size], self._prefix[size:]
            return size
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 and not self.drain:
            raise TimeoutError("the client did not send its request in time")
        self._sock.settimeout(max(remaining, 0.0))  # 0: non-blocking (BlockingIOError when nothing is there)
        return self._sock.recv_into(buffer)


class _HeaderGate:
    """One thread holding connections until their headers are in (or their deadline passed), then handing each,
    with the bytes read so far, to ``dispatch`` once ``slots`` has room."""

    def __init__(self, server: BoundedHTTPServer, read_timeout_s: float, slots: threading.BoundedSemaphore) -> None:
        self._server, self._timeout, self._slots = server, read_timeout_s, slots
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, object]] = []
        self._waiting: dict[socket.socket, list] = {}  # sock -> [address, buffer, deadline]
        self._ready: collections.deque = collections.deque()  # (sock, address, buffer, deadline)
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="sandbox-serve-headers", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, address: object) -> None:
        with self._lock:
            self._incoming.append((sock, address))
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed
            self._wake_w.send(b"\0")

    def close(self) -> None:
        self._closing = True
        self.wake()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._closing:
            deadlines = [entry[2] for entry in self._waiting.values()]
            wait = min([0.5] + [max(d - time.monotonic(), 0.0) for d in deadlines])
            for key, _ in self._selector.select(wait):
                if key.fileobj is self._wake_r:
                    self._take_incoming()
                else:
                    self._receive(key.fileobj)
            now = time.monotonic()
            for sock in [s for s, entry in self._waiting.items() if entry[2] <= now]:
                self._drop(sock)  # too slow with its headers: dropped without an answer, as a timeout
            while self._ready and self._slots.acquire(blocking=False):
                self._server.dispatch(*self._ready.popleft())
        for sock in list(self._waiting) + [entry[0] for entry in self._ready]:
            self._drop(sock)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _take_incoming(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        with self._lock:
            incoming, self._incoming = self._incoming, []
        for sock, address in incoming:
            self._waiting[sock] = [address, bytearray(), time.monotonic() + self._timeout]
            try:
                sock.setblocking(False)
                self._selector.register(sock, selectors.EVENT_READ)
            except (OSError, ValueError):  # closed meanwhile
                del self._waiting[sock]
                self._server.release(sock)

    def _receive(self, sock: socket.socket) -> None:
        entry = self._waiting[sock]
        try:
            data = sock.recv(_HEADER_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            return self._drop(sock)
        buffer = entry[1]
        buffer += data
        tail = buffer[max(0, len(buffer) - len(data) - 3) :]  # only where the end of the headers can newly be
        if b"\n\r\n" not in tail and b"\n\n" not in tail:
            if len(buffer) >= _HEADER_BYTES:
                with contextlib.suppress(OSError):  # best effort: the answer fits any socket buffer
                    sock.send(_HEADERS_TOO_LONG)
                    sock.recv(_HEADER_BYTES)  # what is already queued: closing on unread bytes would reset
                self._drop(sock)
            return
        self._selector.unregister(sock)
        del self._waiting[sock]
        self._ready.append((sock, entry[0], bytes(buffer), entry[2]))

    def _drop(self, sock: socket.socket) -> None:
        if self._waiting.pop(sock, None) is not None:
            self._selector.unregister(sock)
        self._server.release(sock)


def held_connections(threads: int) -> int:
    """How many connections may be held at once: ``_HELD``, fewer where RLIMIT_NOFILE would run out first (each
    connection is a descriptor; runs and the process itself need some), never fewer than the handler threads."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return _HELD
    return max(threads, min(_HELD, (soft - 256) // 2))


class BoundedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer whose connections wait for their headers without a thread, with at most ``threads``
    handler threads, a real listen backlog, and handlers given ``(prefix, deadline)`` by ``request_start``."""

    daemon_threads = True
    request_queue_size = 1024  # the kernel caps it at net.core.somaxconn

    def __init__(self, address: tuple[str, int], handler: type, threads: int, read_timeout_s: float) -> None:
        self._held = threading.BoundedSemaphore(held_connections(threads))
        self._slots = threading.BoundedSemaphore(threads)
        self._starts: dict[socket.socket, tuple[bytes, float]] = {}
        self._closing = False
        super().__init__(address, handler)
        self._gate = _HeaderGate(self, read_timeout_s, self._slots)

    def process_request(self, request, client_address) -> None:
        # waiting here stops accepting: further clients queue in the backlog instead of being reset
        while not self._held.acquire(timeout=0.2):
            if self._closing:
                return self.shutdown_request(request)
        self._gate.add(request, client_address)

    def dispatch(self, request, client_address, prefix: bytes, deadline: float) -> None:
        """From the gate, with a thread slot taken: serve ``request`` in a thread of its own."""
        self._starts[request] = (prefix, deadline)
        try:
            super().process_request(request, client_address)
        except Exception:  # no thread could be started: this connection is dropped, the gate goes on
            _LOGGER.exception("sandbox-serve: could not start a thread for %s", client_address)
            self._slots.release()
            self.release(request)

    def request_start(self, request) -> tuple[bytes, float]:
        """(bytes already received, deadline of the whole request) of a dispatched connection."""
        return self._starts.pop(request)

    def process_request_thread(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self._slots.release()
            self.release(request)
            self._gate.wake()  # a thread slot is free: connections ready for one may go on

    def release(self, request) -> None:
        """Close ``request`` and free its place."""
        self._starts.pop(request, None)
        self.shutdown_request(request)
        self._held.release()

    def handle_error(self, request, client_address) -> None:
        _LOGGER.debug("sandbox-serve: connection from %s ended with an error", client_address, exc_info=True)

    def shutdown(self) -> None:
        self._closing = True
        super().shutdown()

    def server_close(self) -> None:
        self._closing = True
        self._gate.close()
        super().server_close()
