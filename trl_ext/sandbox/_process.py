"""Launch one sandbox process, feed it, collect capped output, enforce the wall deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Literal

from trl_ext.sandbox.limits import Limits
from trl_ext.sandbox.reaper import in_flight

Status = Literal["ok", "runtime_error", "timeout", "memory", "output_limit", "infra_error"]

_EXIT_GRACE_S = 0.2  # how long to keep draining pipes after the main process exited
_STARTUP_S = 30.0  # how long the sandbox may take to come up before its run counts as an infrastructure fault


@dataclasses.dataclass
class RunResult:
    """Outcome of one sandboxed run.

    ``status`` is one of "ok" (exit code 0), "runtime_error", "timeout", "memory", "output_limit" (the program
    faults) or "infra_error" (the sandbox itself failed to start: not the program's fault). ``stdout`` and
    ``stderr`` are decoded as UTF-8 with replacement and truncated at the caps.
    """

    status: Status
    stdout: str
    stderr: str
    exit_code: int | None
    wall_s: float
    stdout_bytes: int | None = None  # what the run wrote to stdout, before decoding (None: only the text is known)


@dataclasses.dataclass(frozen=True)
class Progress:
    """A per-step deadline on top of the run's: the run is also killed (status "timeout") when ``step_s``
    seconds pass without a new ``marker`` on stdout (the harness writes one marker per test case). When
    ``stop(stdout)`` returns True the run is killed early and its output kept (a failed case in binary mode)."""

    marker: bytes
    step_s: float
    stop: Callable[[bytes], bool] | None = None


@dataclasses.dataclass
class _Collected:
    stdout: bytearray = dataclasses.field(default_factory=bytearray)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    timed_out: bool = False
    overflow: bool = False
    ready: bool = False
    stopped: bool = False
    deadline: float = 0.0
    pid: int = 0  # of the launcher: the run's session id


def memfd_with(data: bytes, name: str) -> int:
    """An in-memory file holding ``data``, rewound, inheritable; the caller closes it."""
    fd = os.memfd_create(name, 0)
    _write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _read_ready(fd: int) -> bool | None:
    """True/False once the harness's readiness byte string arrived (or the pipe closed), None if not yet."""
    try:
        data = os.read(fd, 16)
    except BlockingIOError:
        return None
    return data == b"ready"


def _drain(proc: subprocess.Popen, limits: Limits, ready_fd: int, progress: Progress | None) -> _Collected:
    """Collect capped output until the pipes close. The wall deadline (and the per-step one) start when the
    harness reports ready, so sandbox start-up on a busy machine does not eat the program's time."""
    got = _Collected()
    deadline = hard_deadline = time.monotonic() + _STARTUP_S
    caps = {proc.stdout.fileno(): limits.max_output_bytes, proc.stderr.fileno(): limits.max_stderr_bytes}
    bufs = {proc.stdout.fileno(): got.stdout, proc.stderr.fileno(): got.stderr}
    exited_at = None
    with selectors.DefaultSelector() as sel:
        for fd in (*caps, ready_fd):
            sel.register(fd, selectors.EVENT_READ)
        while any(fd in sel.get_map() for fd in caps):
            now = time.monotonic()
            if now >= deadline:
                got.timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                break  # a leftover child still holds the pipes
            for key, _ in sel.select(min(deadline - now, 0.05)):
                if key.fd == ready_fd:
                    sel.unregister(ready_fd)
                    got.ready = bool(_read_ready(ready_fd))
                    hard_deadline = time.monotonic() + limits.timeout_s
                    step = progress.step_s if progress is not None else limits.timeout_s
                    deadline = min(hard_deadline, time.monotonic() + step)
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd] += chunk
                if len(bufs[key.fd]) > caps[key.fd]:
                    del bufs[key.fd][caps[key.fd] :]
                    got.overflow = True
                    break
                if progress is not None and key.fd == proc.stdout.fileno():  # the new bytes only: linear in all
                    new_from = max(0, len(got.stdout) - len(chunk) - len(progress.marker))
                    if got.stdout.find(progress.marker, new_from) >= 0:
                        deadline = min(hard_deadline, time.monotonic() + progress.step_s)  # a case began or ended
                    if progress.stop is not None and b"\n" in chunk:  # a record is complete only at its line's end
                        got.stopped = progress.stop(got.stdout)
            if got.overflow or got.stopped:
                break
    got.ready = got.ready or bool(_read_ready(ready_fd))
    got.deadline = deadline
    return got


def execute(
    argv: list[str],
    *,
    env: dict[str, str],
    stdin: bytes,
    limits: Limits,
    pass_fds: tuple[int, ...],
    ready_fd: int,
    cwd: str | None = None,
    progress: Progress | None = None,
    spawn: Callable[[int], subprocess.Popen] | None = None,
) -> tuple[_Collected, int | None, float]:
    """Run ``argv`` in a new session; SIGKILL its process group at the deadline (or a missed ``progress``
    step) or when an output cap is hit. ``pass_fds`` are handed to the child and closed here; ``ready_fd``
    (non-blocking) receives the harness's readiness proof. ``spawn(stdin_fd)``, when given, starts the run
    instead of ``argv`` (a fork server's child, with ``Popen``'s ``pid``, ``stdout``, ``stderr``, ``poll`` and
    ``wait``).

    Returns the collected output, the exit code (negative: killed by that signal) and the wall time.
    """
    stdin_fd = memfd_with(stdin, "sandbox-stdin")
    start = time.monotonic()
    try:
        proc = (
            spawn(stdin_fd)
            if spawn is not None
            else subprocess.Popen(
                argv,
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                pass_fds=pass_fds,
                start_new_session=True,
            )
        )
    finally:
        for fd in (stdin_fd, *pass_fds):
            os.close(fd)
    try:
        with in_flight(proc.pid):  # the run's session: killed at this process's exit while the run is on
            got = _drain(proc, limits, ready_fd, progress)
            got.pid = proc.pid
            if not (got.timed_out or got.overflow or got.stopped):
                try:
                    _wait_exit(proc, max(got.deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    got.timed_out = True
        _kill_group(proc)
        returncode = proc.wait()
    finally:
        _kill_group(proc)
        proc.stdout.close()
        proc.stderr.close()
    return got, returncode, time.monotonic() - start


def readable(fd: object, timeout: float) -> bool:
    """Whether ``fd`` (a descriptor or an object with ``fileno``) is readable, or at its end, within ``timeout``
    seconds. poll(2), not select(2): select refuses descriptors past 1023, which a busy ``sandbox-serve`` with a
    raised RLIMIT_NOFILE reaches (its fork server's spare thread died of it under a connection flood)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(timeout, 0.0) * 1000))


def _wait_exit(proc: subprocess.Popen, timeout: float) -> None:
    """``proc.wait(timeout)`` without its polling sleeps (up to 50 ms each, which would add to every run's
    latency): block on a pidfd until the process exits. Raises ``subprocess.TimeoutExpired``."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel) or already reaped
        proc.wait(timeout=timeout)
        return
    try:
        if not readable(pidfd, timeout):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(pidfd)
    proc.wait()


def classify(got: _Collected, returncode: int | None) -> Status:
    """Map what was observed to a status. Only the parent's own observations decide "infra_error"."""
    if not got.ready:
        return "infra_error"
    if got.timed_out:
        return "timeout"
    if got.overflow:
        return "output_limit"
    if returncode == 0:
        return "ok"
    if returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "timeout"
    if b"MemoryError" in bytes(got.stderr[-4096:]):
        return "memory"
    return "runtime_error"
