"""Fork servers: one warm interpreter per backend (and per ``site_packages`` setting) inside the sandbox, forking a
confined child per run (``_forkserver_main.py`` runs inside; docs/sandbox.md, "Fork server", gives the isolation
argument). This module is the trainer's side: it starts and replaces the servers and runs one program through a
server with the same scratch, memory and clean-up duties as a per-run launch (``base.Backend.launch``).

They are the default on bwrap and landlock wherever the kernel's Landlock ABI is >= 6 and its bindings are
installed; ``TRL_EXT_SANDBOX_FORKSERVER=0`` selects the per-run launch (a fresh sandbox per program) instead.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from trl_ext.sandbox import memory, seccomp, userns
from trl_ext.sandbox._process import memfd_with, readable
from trl_ext.sandbox.base import (
    HARNESS_SOURCE,
    confined_source,
    harness_runtime_source,
    python_roots,
    sandbox_interpreter,
)
from trl_ext.sandbox.held_roots import HeldRoots
from trl_ext.sandbox.limits import ISOLATED, SAFE_ENV, Limits
from trl_ext.sandbox.reaper import kill_session, reap_run
from trl_ext.sandbox.scratch import remove_scratch

FORKSERVER_ENV = "TRL_EXT_SANDBOX_FORKSERVER"
RUNS_PER_SERVER = 1000  # a server is replaced after this many runs (and whenever it dies)
MIN_ABI = 6  # Landlock's signal and abstract-socket scoping: every child gets a domain of its own
_SOURCE = confined_source("_forkserver_main.py")

# Standard modules many programs import (typing alone costs a bare interpreter ~5 ms): imported once per server.
PRELOAD = ("typing", "collections", "re", "math", "itertools", "functools", "heapq", "bisect", "string", "random")
PRELOAD += ("fractions", "decimal", "copy", "operator", "json", "array", "statistics", "dataclasses", "enum")
SPARES = min(8, 2 * (os.cpu_count() or 1))  # children each server keeps forked ahead of the runs
_START_S = 60.0
# bubblewrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the THREAD that started it ends, not the process:
# servers are started from this one thread, which lives until the process exits (a reward's worker threads do not)
_SPAWNER = ThreadPoolExecutor(
    1, thread_name_prefix="trl-ext-fork-server-start"
)  # how long a server may take to come up
_STATUS_S = 30.0  # how long a killed child's wait status may take to arrive before the server counts as lost


_PREFIX = "trl-ext-forkserver-"


_OWNER = ".owner"  # locked (flock) by the process whose server uses the directory, for as long as it lives


@functools.cache
def _remove_stale() -> None:
    """Once per process: remove the directories of fork servers whose trainer died without stopping them (no
    process holds the lock of their ``.owner`` file any more: a lock, unlike a pid, means the same in every pid
    namespace)."""
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            if not entry.name.startswith(_PREFIX):
                continue
            try:
                fd = os.open(os.path.join(entry.path, _OWNER), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # alive
            finally:
                os.close(fd)
            remove_scratch(entry.path)


def _claim(root: str) -> int:
    """Lock ``root``'s owner file for this process's lifetime (released by the kernel when it dies)."""
    fd = os.open(os.path.join(root, _OWNER), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


class ServerLost(RuntimeError):
    """The fork server died (or stopped answering) before it reported a run's end: never the program's fault."""


@dataclasses.dataclass
class ServerCommand:
    """How a backend starts its fork server: ``argv`` (with ``pass_fds`` to hand over), what each child's Landlock
    domain may read, and whether the server first enters a domain of its own (``confine_self``)."""

    argv: list[str]
    read_only: list[str]
    pass_fds: tuple[int, ...] = ()
    hold_closed_roots: bool = False  # as root, reach read-only roots under closed directories by descriptor
    confine_self: bool = False
    info_fd: int | None = None  # bubblewrap's --info-fd: its namespace init, to reap
    private_scratch: bool = False  # each child mounts its own capped tmpfs at /tmp (a mount namespace of its own)
    label: str = "fork server"  # names the server in the log


_OFF = ("0", "false", "no", "off")
_ON = ("", "1", "true", "yes", "on")


def enabled() -> bool:
    """Whether runs go through fork servers (the default) rather than a fresh sandbox each
    (``TRL_EXT_SANDBOX_FORKSERVER=0``). Raises ``ValueError`` on any other value, naming the variable."""
    value = os.environ.get(FORKSERVER_ENV, "1").strip().lower()
    if value not in _ON + _OFF:
        raise ValueError(
            f"{FORKSERVER_ENV}={value!r}: set it to 1 (fork servers, the default) or 0 (a fresh sandbox per run)"
        )
    return value in _ON


@functools.cache
def _bindings() -> tuple[list[str], dict[str, str | None]] | None:
    """(import path of the Landlock bindings, where libc lives), or None where they or the kernel ABI are missing."""
    try:
        import ctypes.util

        import landlockpy
    except ImportError:
        return None
    if landlockpy.abi_version() < MIN_ABI:
        return None
    return [str(Path(landlockpy.__file__).parent.parent)], {"c": ctypes.util.find_library("c")}


def supported() -> bool:
    """Whether this machine can give every fork-server child a Landlock domain of its own (ABI >= 6)."""
    return _bindings() is not None


class Child:
    """A run forked by a server, seen from here like a ``subprocess.Popen``: its pid in this pid namespace, its
    stdout and stderr, and its wait status, which the server reports on the run's own socket."""

    args = ["fork-server child"]

    def __init__(self, pid: int, pidfd: int, sock: socket.socket, stdout: int, stderr: int) -> None:
        self.pid, self.pidfd, self.sock = pid, pidfd, sock
        self.stdout, self.stderr = os.fdopen(stdout, "rb", buffering=0), os.fdopen(stderr, "rb", buffering=0)
        self.returncode: int | None = None
        self.done = self.lost = False

    def _status(self, timeout: float) -> bool:
        if not readable(self.sock, timeout):
            return False
        try:
            data = self.sock.recv(64)
        except OSError:
            data = b""
        if data.startswith(b"s"):
            self.returncode = os.waitstatus_to_exitcode(int(data[1:]))
        else:
            self.lost = True  # the server closed the run's socket without a status: it died
        self.done = True
        return True

    def poll(self) -> int | None:
        if not self.done:
            self._status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self.done and not self._status(_STATUS_S if timeout is None else timeout):
            if timeout is not None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.lost = self.done = True
        return self.returncode

    def close(self) -> None:
        self.sock.close()
        os.close(self.pidfd)


def _host_pid(pidfd: int) -> int:
    """The pid, in this process's pid namespace, of the process ``pidfd`` refers to (it may live in another)."""
    fd = os.open(f"/proc/self/fdinfo/{pidfd}", os.O_RDONLY)  # one read: no Path or text layer (once per run)
    try:
        info = os.read(fd, 4096)
    finally:
        os.close(fd)
    for line in info.splitlines():
        if line.startswith(b"Pid:"):
            return int(line.split()[1])
    raise ServerLost("the fork server sent no pidfd")


@dataclasses.dataclass
class Spare:
    """A child forked ahead of its run, waiting on its socket for the run's header and descriptors."""

    pid: int
    pidfd: int
    sock: socket.socket
    cgroup: Path | None

    def discard(self) -> None:
        """Never started: closing its socket makes it exit."""
        self.sock.close()
        os.close(self.pidfd)
        if self.cgroup is not None:
            memory.release(self.cgroup)


class ForkServer:
    """One server process; ``fork`` starts a run in it. Thread-safe."""

    def __init__(self, command: Callable[[list[str], str], ServerCommand], site_packages: bool) -> None:
        _remove_stale()
        self.root = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")  # holds the runs' scratch directories
        self._owner = _claim(self.root)
        os.chmod(self.root, 0o711)  # each run's uid reaches its own directory, lists none
        self.runs = self.inflight = 0
        self.retired = self._closed = False
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._spares: list[Spare] = []
        self._filler: threading.Thread | None = None
        self.ctl, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config_fd = -1
        interpreter = [sandbox_interpreter(), ISOLATED if site_packages else ISOLATED + "S", "-c", _SOURCE]
        spec = command(interpreter, self.root)
        self._info_fd = spec.info_fd
        self.private_scratch = spec.private_scratch
        held = HeldRoots()
        try:
            import_paths, libraries = _bindings()
            if spec.hold_closed_roots:
                held = HeldRoots([*spec.read_only, *import_paths], python_roots())
            config = {
                "ctl_fd": server_end.fileno(),
                "import_paths": import_paths,
                "libraries": libraries,
                "preload": PRELOAD,
                "harness": HARNESS_SOURCE,
                "runtime": {"source": harness_runtime_source()},
                "seccomp": {
                    str(k): seccomp.bpf(seccomp.memfd_allowed(), bool(k), spec.private_scratch).hex() for k in (0, 1)
                },
                "read_only": held.paths([*spec.read_only, *import_paths]),
                "held_filter": held.filter().hex(),
                "min_abi": MIN_ABI,
                "confine_self": spec.confine_self,
                "scratch_root": self.root,
                "private_scratch": spec.private_scratch,
                "user_namespaces": userns.wanted(),  # the server tries whether its children can
            }
            config_fd = memfd_with(json.dumps(config).encode(), "fork-server-config")
            self.proc = _SPAWNER.submit(  # a thread that lives as long as this process: see ``_SPAWNER``
                subprocess.Popen,
                [*held.paths(spec.argv), str(config_fd)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**SAFE_ENV, "HOME": self.root, "TMPDIR": self.root, **held.env()},
                cwd=self.root,
                pass_fds=(config_fd, server_end.fileno(), *spec.pass_fds, *held.descriptors),
                start_new_session=True,
            ).result()
        except BaseException:
            self.ctl.close()
            remove_scratch(self.root)
            os.close(self._owner)
            raise
        finally:
            for fd in (config_fd, *spec.pass_fds):
                if fd >= 0:
                    os.close(fd)
            server_end.close()
            held.close()
        up = self.ctl.recv(16) if readable(self.ctl, _START_S) else b""
        if up not in (b"up", b"up+userns"):
            self.close()
            raise ServerLost("the fork server did not come up")
        # whether each child makes a user namespace of its own (non-root: a process budget of its own)
        self.user_namespaces = up == b"up+userns"
        if userns.wanted():
            userns.report(spec.label, self.user_namespaces)
        self._filler = threading.Thread(target=self._fill, name="trl-ext-fork-server-spares", daemon=True)
        self._filler.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _new_spare(self) -> Spare:
        """Have the server fork a child that waits for its run; moved into a memory cgroup of its own (where one
        can be had) here, ahead of the run: the kernel's attach can take a grace period (~10 ms on cgroup v1)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                socket.send_fds(self.ctl, [b"f"], [theirs.fileno()])
            theirs.close()
            if not readable(mine, _START_S):
                raise ServerLost("the fork server did not fork")
            message, pidfds, _, _ = socket.recv_fds(mine, 64, 1)
            if not message or not pidfds:
                raise ServerLost("the fork server did not fork")
        except OSError as exc:
            mine.close()
            raise ServerLost(f"the fork server is gone: {exc}") from exc
        except ServerLost:
            mine.close()
            raise
        spare = Spare(_host_pid(pidfds[0]), pidfds[0], mine, memory.create(Limits(), kind="fork"))
        if spare.cgroup is not None:
            try:
                memory.attach(spare.cgroup, spare.pid)
            except OSError:
                memory.release(spare.cgroup)
                spare.cgroup = None  # the run's watcher sums its memory instead
        return spare

    def _fill(self) -> None:
        """Keep ``SPARES`` children forked and in their cgroups ahead of the runs (a thread per server)."""
        while True:
            with self._cond:
                while not self._closed and len(self._spares) >= SPARES:
                    self._cond.wait()
                if self._closed:
                    return
            try:
                spare = self._new_spare()
            except ServerLost:
                return  # the server is gone: ``acquire`` replaces it
            with self._cond:
                if self._closed:
                    spare.discard()
                    return
                self._spares.append(spare)

    def take(self) -> Spare:
        """A child for the next run: a spare, or one forked now."""
        with self._cond:
            spare = self._spares.pop(0) if self._spares else None
            self._cond.notify_all()
        return spare if spare is not None else self._new_spare()

    @staticmethod
    def start(spare: Spare, header: dict, fds: list[int], read_ends: tuple[int, int]) -> Child:
        """Start the run in ``spare``: ``fds`` are its stdin, stdout and stderr write ends, readiness pipe and
        payload (closed by the caller); ``read_ends``: of its stdout and stderr, owned by the returned ``Child``.
        Raises ``ServerLost``."""
        try:
            socket.send_fds(spare.sock, [json.dumps(header).encode()], fds)
        except OSError as exc:
            raise ServerLost(f"the fork server's child is gone: {exc}") from exc
        return Child(spare.pid, spare.pidfd, spare.sock, *read_ends)

    def close(self) -> None:
        """Stop the server (no run may be in flight), kill what is left, remove its directory."""
        with self._cond:
            self._closed = True
            spares, self._spares = self._spares, []
            self._cond.notify_all()
        self.ctl.close()  # the server kills its children and exits
        if self._filler is not None:
            self._filler.join()
        for spare in spares:
            spare.discard()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        orphans = []
        if self._info_fd is not None:
            with contextlib.suppress(OSError, ValueError):
                os.set_blocking(self._info_fd, False)
                orphans.append(json.loads(os.read(self._info_fd, 4096))["child-pid"])
            os.close(self._info_fd)
            self._info_fd = None
        kill_session(self.proc.pid, timeout_s=1.0)
        reap_run(self.proc.pid, [*orphans, *(spare.pid for spare in spares)])  # a dead server's spares come here
        remove_scratch(self.root)
        os.close(self._owner)


_SERVERS: dict[tuple, ForkServer] = {}
_LOCK = threading.Lock()


def acquire(key: tuple, site_packages: bool, command: Callable[[list[str], str], ServerCommand]) -> ForkServer:
    """The live server for a backend's ``key`` and ``site_packages`` (started, or replaced after
    ``RUNS_PER_SERVER`` runs or its death), counted as serving one more run until ``release``."""
    retired = None
    with _LOCK:
        server = _SERVERS.get((*key, site_packages))
        if server is None or server.runs >= RUNS_PER_SERVER or not server.alive():
            if server is not None:
                server.retired, retired = True, server if server.inflight == 0 else None
            server = _SERVERS[(*key, site_packages)] = ForkServer(command, site_packages)
        server.runs += 1
        server.inflight += 1
    if retired is not None:
        retired.close()
    return server


def release(server: ForkServer, lost: bool = False) -> None:
    """One run of ``server`` ended; ``lost``: the server failed it (it is replaced on the next ``acquire``)."""
    with _LOCK:
        server.inflight -= 1
        if lost:
            server.runs = RUNS_PER_SERVER
        done = server.retired and server.inflight == 0
    if done:
        server.close()


@atexit.register
def close_all() -> None:
    """Stop every fork server of this process."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.close()


def _forget_in_child() -> None:
    """A fork of this process (``multiprocessing``, a test) owns none of its servers: at its exit it must not stop
    them or remove their directories."""
    global _LOCK
    _SERVERS.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
