"""The HTTP layer of ``trl-ext sandbox-serve``: the standard library's ThreadingHTTPServer, bounded.

- A connection costs a thread only once its request line and headers have arrived: until then it waits in one
  selector thread (``_HeaderGate``), so clients that connect and send nothing, or trickle their headers, hold a
  socket and at most ``_HEADER_BYTES`` of memory each, never a thread, and are dropped at their header deadline
  (``header_timeout_s``, shorter than the whole request's). Headers that do not end within ``_HEADER_BYTES`` are
  answered 431 by that thread, and ``screen`` (the shared secret) answers as soon as the headers are in: an
  unfinished header block, or a request without the secret, never reaches a handler thread.
- At most ``threads`` connections are served by threads at once; at most ``held_connections`` (1024, fewer under a
  low RLIMIT_NOFILE) are held in all, and at most ``per_peer`` (default: half of them) from one address. A new connection past either
  bound evicts the oldest connection (of that address, for ``per_peer``) still waiting for its headers, so idle
  connections can never starve a client that sends its headers at once (red team round 8: 2200 idle connections
  without the secret made the trainer's requests time out). Only when every held connection has sent its headers
  does the accept loop stop accepting; further clients then wait in the kernel's listen backlog
  (``request_queue_size``), never reset.
- The gate polls with ``poll(2)`` (``selectors.PollSelector``), never epoll: epoll watches are counted per uid
  (``fs.epoll.max_user_watches``), and behind a non-root service the runs share its uid (class 10).
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
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from json.encoder import encode_basestring_ascii

_HEADER_BYTES = 32 << 10  # buffered per connection while its headers arrive; longer headers are answered 431
_HELD = 1024  # connections held at once (waiting for headers, waiting for a thread, or served)
HEADER_TIMEOUT_S = 5.0  # a client has this long after connecting to send its request line and headers
_LINGER_S, _LINGER_BYTES = 1.0, 1 << 20  # after a refusal, what the client sent is read and dropped: no reset
_LOGGER = logging.getLogger("trl_ext.sandbox.server")


_PIECE = 1 << 16  # characters of a long string escaped at a time


def json_pieces(value: object) -> Iterator[str]:
    """``json.dumps(value)``'s text (ASCII, default separators), in pieces: a string longer than ``_PIECE`` is
    escaped a piece at a time, so an answer's output (up to 64 MiB, six characters for a control byte once escaped)
    is never held whole as JSON, and the answer can be measured, then written, a piece at a time. The standard
    library encodes a string only whole (red team round 12: the escaped copies held 8.7x the output asked)."""
    if isinstance(value, str) and len(value) > _PIECE:
        yield '"'
        for start in range(0, len(value), _PIECE):  # code points: no escape is split (non-BMP: a pair each)
            yield encode_basestring_ascii(value[start : start + _PIECE])[1:-1]
        yield '"'
    elif isinstance(value, dict):
        for index, (key, item) in enumerate(value.items()):
            yield ("{" if index == 0 else ", ") + json.dumps(str(key)) + ": "
            yield from json_pieces(item)
        yield "}" if value else "{}"
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield "[" if index == 0 else ", "
            yield from json_pieces(item)
        yield "]" if value else "[]"
    else:
        yield json.dumps(value)


def http_answer(status: int, reason: str, detail: str) -> bytes:
    """A complete HTTP answer with a JSON body, as the handler's errors have."""
    body = json.dumps({"detail": detail}).encode()
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


_HEADERS_TOO_LONG = http_answer(
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
    """One thread holding connections until their headers are in (or their header deadline passed), then handing
    each, with the bytes read so far, to ``dispatch`` once ``slots`` has room (or answering it ``screen``'s
    refusal). ``timeouts``: (headers, whole request) in seconds from the connection."""

    def __init__(self, server: BoundedHTTPServer, timeouts: tuple[float, float], slots: threading.BoundedSemaphore,
                 screen: Callable[[bytes], bytes | None] | None) -> None:  # fmt: skip
        self._server, self._slots, self._screen = server, slots, screen
        self._header_s, self._timeout = min(timeouts), timeouts[1]
        self._selector = selectors.PollSelector()  # no epoll watch: the uid's may all be taken (module docstring)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, object]] = []
        # sock -> [address, buffer (None: refused, lingering), header (or linger) deadline, deadline (or bytes left)]
        self._waiting: dict[socket.socket, list] = {}
        self._room_wanted = False  # the accept loop waits for a place: evict the oldest waiting connection
        self._ready: collections.deque = collections.deque()  # (sock, address, buffer, deadline)
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="sandbox-serve-headers", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, address: object) -> None:
        with self._lock:
            self._incoming.append((sock, address))
        self.wake()

    def make_room(self) -> None:
        """From the accept loop, every held place taken: drop the oldest connection still waiting for headers."""
        self._room_wanted = True
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
                elif key.fileobj in self._waiting:  # not evicted by an earlier event of this batch
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
        if self._room_wanted:
            self._room_wanted = False
            self._evict_oldest(None)
        for sock, address in incoming:
            if self._server.over_peer_cap(address) and not self._evict_oldest(_peer(address)):
                self._server.release(sock)  # every connection of this address has sent its headers: refuse it
                continue
            now = time.monotonic()
            self._waiting[sock] = [address, bytearray(), now + self._header_s, now + self._timeout]
            try:
                sock.setblocking(False)
                self._selector.register(sock, selectors.EVENT_READ)
            except (OSError, ValueError):  # closed meanwhile
                del self._waiting[sock]
                self._server.release(sock)

    def _evict_oldest(self, peer: str | None) -> bool:
        """Drop the oldest connection still waiting for its headers (of address ``peer``, or any); False if none."""
        for sock, entry in self._waiting.items():  # insertion order: the oldest first
            if peer is None or _peer(entry[0]) == peer:
                self._drop(sock)
                return True
        return False

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
        if entry[1] is None:  # answered already: what the client still sends is dropped, up to a bound
            entry[3] -= len(data)
            return self._drop(sock) if entry[3] <= 0 else None
        buffer = entry[1]
        buffer += data
        tail = buffer[max(0, len(buffer) - len(data) - 3) :]  # only where the end of the headers can newly be
        if b"\n\r\n" not in tail and b"\n\n" not in tail:
            if len(buffer) >= _HEADER_BYTES:
                self._refuse(sock, _HEADERS_TOO_LONG)
            return
        refusal = self._screen(bytes(buffer)) if self._screen is not None else None
        if refusal is not None:
            return self._refuse(sock, refusal)
        self._selector.unregister(sock)
        del self._waiting[sock]
        self._ready.append((sock, entry[0], bytes(buffer), entry[3]))

    def _refuse(self, sock: socket.socket, answer: bytes) -> None:
        """Answer and stop writing; keep reading (and dropping) what the client sends for up to ``_LINGER_S``:
        closing a socket with unread bytes resets it, and the client would lose the answer."""
        try:
            sock.send(answer)  # best effort: the answer fits any socket buffer
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return self._drop(sock)
        self._waiting[sock][1:] = [None, time.monotonic() + _LINGER_S, _LINGER_BYTES]

    def _drop(self, sock: socket.socket) -> None:
        if self._waiting.pop(sock, None) is not None:
            self._selector.unregister(sock)
        self._server.release(sock)


def _peer(address: object) -> str:
    """The client's address without its port (a tuple from ``accept``; anything else as text)."""
    return str(address[0]) if isinstance(address, tuple) and address else str(address)


def held_connections(threads: int) -> int:
    """How many connections may be held at once: ``_HELD``, fewer where RLIMIT_NOFILE would run out first (each
    connection is a descriptor; runs and the process itself need some), never fewer than the handler threads."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return _HELD
    return max(threads, min(_HELD, (soft - 256) // 2))


class BoundedHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer whose connections wait for their headers without a thread, with at most ``threads``
    handler threads, at most ``per_peer`` connections held per client address, a real listen backlog, and handlers
    given ``(prefix, deadline)`` by ``request_start``. ``screen(head)``: an answer to a request's head (request
    line and headers) that refuses it before any thread serves it, or None to serve it."""

    daemon_threads = True
    request_queue_size = 1024  # the kernel caps it at net.core.somaxconn

    def __init__(
        self,
        address: tuple[str, int],
        handler: type,
        threads: int,
        read_timeout_s: float,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        per_peer: int | None = None,
        screen: Callable[[bytes], bytes | None] | None = None,
    ) -> None:
        self._held = threading.BoundedSemaphore(held_connections(threads))
        self._slots = threading.BoundedSemaphore(threads)
        self._starts: dict[socket.socket, tuple[bytes, float]] = {}
        self._peers: collections.Counter = collections.Counter()
        self._peer_of: dict[socket.socket, str] = {}
        self._peers_lock = threading.Lock()
        self._per_peer = per_peer or max(threads, held_connections(threads) // 2)
        self._closing = False
        super().__init__(address, handler)
        self._gate = _HeaderGate(self, (header_timeout_s, read_timeout_s), self._slots, screen)

    def process_request(self, request, client_address) -> None:
        # every place taken: the gate evicts the oldest connection still waiting for its headers; waiting here
        # (every held connection has sent its headers) stops accepting, so further clients queue in the backlog
        # instead of being reset
        while not self._held.acquire(blocking=False):
            if self._closing:
                return self.shutdown_request(request)
            self._gate.make_room()
            if self._held.acquire(timeout=0.2):
                break
        with self._peers_lock:
            self._peer_of[request] = peer = _peer(client_address)
            self._peers[peer] += 1
        self._gate.add(request, client_address)

    def over_peer_cap(self, client_address: object) -> bool:
        """Whether the client's address holds more than ``per_peer`` connections (the newest one included)."""
        with self._peers_lock:
            return self._peers[_peer(client_address)] > self._per_peer

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
        with self._peers_lock:
            peer = self._peer_of.pop(request, None)
            if peer is not None:
                self._peers[peer] -= 1
                if not self._peers[peer]:
                    del self._peers[peer]
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
