"""Finding, killing and reaping every process a run created (the run is a session of its own, or several nested
ones under bubblewrap), also when this process is PID 1 or a child subreaper: a killed run's orphans are then
re-parented here and would stay zombies (counting against the sandbox uid's RLIMIT_NPROC) unless reaped."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

_PR_GET_CHILD_SUBREAPER = 37


class Proc(NamedTuple):
    pid: int
    sid: int
    state: str
    threads: int
    uid: int
    ppid: int


def processes() -> list[Proc]:
    """Every process (pid, session id, state, threads, uid, parent); vanished ones are skipped."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
            uid = entry.stat().st_uid
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        found.append(Proc(int(entry.name), int(fields[3]), fields[0].decode(), int(fields[17]), uid, int(fields[1])))
    return found


def running(proc: Proc) -> bool:
    """Whether ``proc`` still runs code: not a zombie, or a zombie LEADER whose other threads live on (its main
    thread exited alone, ``SYS_exit``: /proc shows it ``Z`` with its thread count still over 1). Red team round 10:
    a run process that left the run's process group and made itself a zombie leader was skipped by the clean-up
    and its thread outlived the run, unwatched. ``kill`` of a zombie leader reaches its live threads."""
    return proc.state not in "ZX" or proc.threads > 1


def adopts_orphans() -> bool:
    """Whether orphans are re-parented to this process: it is PID 1 (a container's init) or a child subreaper."""
    if os.getpid() == 1:
        return True
    flag = ctypes.c_int(0)
    return _LIBC.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value != 0


def reap_run(sid: int, orphans: tuple[int, ...] | list[int] = (), timeout_s: float = 2.0) -> int:
    """Kill what is left of the run whose processes are in session ``sid`` (plus ``orphans``: processes of the run
    in sessions of their own, e.g. bubblewrap's namespace init) and reap those re-parented here (only they: another
    zombie child may belong to a ``Popen`` that will wait for it). A no-op unless this process adopts orphans.
    Returns how many were reaped."""
    if not adopts_orphans():
        return 0
    reaped, me, deadline = 0, os.getpid(), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        # the leader itself was waited for already
        left = [p for p in processes() if (p.sid == sid and p.pid != sid) or p.pid in orphans]
        if not left:
            break
        for proc in left:
            if running(proc):
                _kill(proc.pid)
            elif proc.ppid == me:
                reaped += _reap(proc.pid)
        time.sleep(0.001)
    return reaped


def _reap(pid: int) -> int:
    try:
        return int(os.waitpid(pid, os.WNOHANG)[0] == pid)
    except ChildProcessError:
        return 0


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


_LIBC = ctypes.CDLL(None, use_errno=True)


def kill_session(sid: int, timeout_s: float = 5.0) -> int:
    """SIGKILL every live process of session ``sid`` until none is left; returns how many were killed."""
    killed, deadline = 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p.pid for p in processes() if p.sid == sid and running(p)]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)
    return killed
