"""Launch one sandbox process, feed it, collect capped output, enforce the wall deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import signal
import subprocess
import time
from typing import Literal

from trl_ext.sandbox.limits import Limits

Status = Literal["ok", "runtime_error", "timeout", "memory", "output_limit", "infra_error"]

_EXIT_GRACE_S = 0.2  # how long to keep draining pipes after the main process exited


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


@dataclasses.dataclass(frozen=True)
class Progress:
    """A per-step deadline on top of the run's: the run is also killed (status "timeout") when ``step_s``
    seconds pass without a new ``marker`` on stdout. The call-mode harness writes one marker per case."""

    marker: bytes
    step_s: float


@dataclasses.dataclass
class _Collected:
    stdout: bytearray = dataclasses.field(default_factory=bytearray)
    stderr: bytearray = dataclasses.field(default_factory=bytearray)
    timed_out: bool = False
    overflow: bool = False


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


def _drain(proc: subprocess.Popen, limits: Limits, deadline: float, progress: Progress | None) -> _Collected:
    got = _Collected()
    hard_deadline, steps_seen = deadline, 0
    if progress is not None:
        deadline = min(hard_deadline, time.monotonic() + progress.step_s)
    caps = {proc.stdout.fileno(): limits.max_output_bytes, proc.stderr.fileno(): limits.max_stderr_bytes}
    bufs = {proc.stdout.fileno(): got.stdout, proc.stderr.fileno(): got.stderr}
    exited_at = None
    with selectors.DefaultSelector() as sel:
        for fd in caps:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                got.timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                break  # a leftover child still holds the pipes
            for key, _ in sel.select(min(deadline - now, 0.05)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                bufs[key.fd] += chunk
                if len(bufs[key.fd]) > caps[key.fd]:
                    del bufs[key.fd][caps[key.fd] :]
                    got.overflow = True
                    return got
                if progress is not None and key.fd == proc.stdout.fileno():
                    steps = got.stdout.count(progress.marker)
                    if steps > steps_seen:
                        steps_seen = steps
                        deadline = min(hard_deadline, time.monotonic() + progress.step_s)
    return got


def execute(
    argv: list[str],
    *,
    env: dict[str, str],
    stdin: bytes,
    limits: Limits,
    pass_fds: tuple[int, ...],
    cwd: str | None = None,
    progress: Progress | None = None,
) -> tuple[_Collected, int | None, float]:
    """Run ``argv`` in a new session; SIGKILL its process group at the deadline (or a missed ``progress``
    step) or when an output cap is hit.

    Returns the collected output, the exit code (negative: killed by that signal) and the wall time.
    """
    stdin_fd = memfd_with(stdin, "sandbox-stdin")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            pass_fds=pass_fds,
            start_new_session=True,
        )
    finally:
        os.close(stdin_fd)
    try:
        deadline = start + limits.timeout_s
        got = _drain(proc, limits, deadline, progress)
        if not (got.timed_out or got.overflow):
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                got.timed_out = True
        _kill_group(proc)
        returncode = proc.wait()
    finally:
        _kill_group(proc)
        proc.stdout.close()
        proc.stderr.close()
    return got, returncode, time.monotonic() - start


def classify(got: _Collected, returncode: int | None, ready: bool) -> Status:
    """Map what was observed to a status. Only the parent's own observations decide "infra_error"."""
    if not ready:
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
