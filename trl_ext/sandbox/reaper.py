"""Finding, killing and reaping every process a run created (the run is a session of its own, or several nested
ones under bubblewrap), also when this process is PID 1 or a child subreaper: a killed run's orphans are then
re-parented here and would stay zombies (counting against the sandbox uid's RLIMIT_NPROC) unless reaped."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable, Iterator
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


def processes(pids: list[int] | None = None) -> list[Proc]:
    """Every process (or those of ``pids``): pid, session id, state, threads, uid, parent; vanished ones are
    skipped."""
    return list(each_process(pids))


def each_process(pids: list[int] | None = None) -> Iterator[Proc]:
    """``processes``, each read as the listing reaches it (a caller acting on one acts while it is fresh)."""
    names = (e.name for e in os.scandir("/proc") if e.name.isdigit()) if pids is None else map(str, pids)
    for name in names:
        try:
            stat = Path("/proc", name, "stat").read_bytes()
            uid = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        state, threads = fields[0].decode(), int(fields[17])
        if state == "Z" and threads > 1:
            state = _live_thread_state(name)
        yield Proc(int(name), int(fields[3]), state, threads, uid, int(fields[1]))


def _live_thread_state(pid: str) -> str:
    """The state of a live thread of ``pid``, whose main thread exited alone (``SYS_exit``): /proc shows the
    process as a zombie while its other threads run on, and a clean-up that skips zombies left them running past
    the run (red team round 10). "Z" where none is left."""
    try:
        tids = [tid for tid in os.listdir(f"/proc/{pid}/task") if tid != pid]
    except OSError:
        return "Z"
    for tid in tids:
        try:
            stat = Path("/proc", pid, "task", tid, "stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0].decode()
        if state not in "ZX":
            return state
    return "Z"


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

    def of_the_run(proc: Proc) -> bool:  # the leader itself was waited for already
        return (proc.sid == sid and proc.pid != sid) or proc.pid in orphans

    while time.monotonic() < deadline:
        left = [proc for proc in processes() if of_the_run(proc)]
        if not left:
            break
        if any(proc.state not in "ZX" for proc in left):
            stop_then_kill(of_the_run, deadline - time.monotonic())
        for proc in left:
            if proc.state in "ZX" and proc.ppid == me:
                reaped += _reap(proc.pid)
        time.sleep(0.001)
    return reaped


def _reap(pid: int) -> int:
    try:
        return int(os.waitpid(pid, os.WNOHANG)[0] == pid)
    except ChildProcessError:
        return 0


def _signal(pid: int, number: int) -> int:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        return 0
    return 1


_LIBC = ctypes.CDLL(None, use_errno=True)


_IN_FLIGHT: set[int] = set()  # the sessions of this process's runs in flight


@contextlib.contextmanager
def in_flight(sid: int) -> Iterator[None]:
    """Register the session ``sid`` of a run while it is in flight: if this process exits meanwhile (the training
    script ends or raises, Ctrl-C, a service's SIGTERM), the run is killed at exit rather than left to run on
    (red team round 12: a program and its daemon outlived a trainer that exited 0). SIGKILL, or SIGTERM's default
    action, runs no exit hook (docs/sandbox.md, class 7)."""
    _IN_FLIGHT.add(sid)
    try:
        yield
    finally:
        _IN_FLIGHT.discard(sid)


@atexit.register
def _end_runs_in_flight() -> None:
    for sid in list(_IN_FLIGHT):
        kill_session(sid, timeout_s=1.0)


def kill_session(sid: int, timeout_s: float = 5.0) -> int:
    """SIGKILL every live process of session ``sid`` until none is left; returns how many were killed. The
    leader's process group first, in one kill: the kernel's fork hands a group signal to a child forked meanwhile."""
    killed = _signal(-sid, signal.SIGKILL)
    return killed + stop_then_kill(lambda proc: proc.sid == sid, timeout_s)


def stop_then_kill(
    member: Callable[[Proc], bool], timeout_s: float = 5.0, listed: Callable[[], list[int]] | None = None
) -> int:
    """SIGKILL every live process for which ``member`` holds, until none is left; returns how many SIGKILLs were
    sent. A list-then-kill sweep misses a process that forks and exits over and over (its next pid was in no list,
    red team round 10), but a stopped process cannot fork: each scan SIGSTOPs every member still running as it
    reads it, and only a scan that finds all of them stopped SIGKILLs them. A scan reads /proc, then every pid
    made since it began (``_scan``), so a hopper's next pid is read too; one scan finding none alive ends it
    (two in a row once any was found). A process that continues another (SIGCONT) is running at the next scan
    and stopped again. A member waiting in the kernel (state D: a vfork parent whose child is blocked on a FIFO)
    never shows as stopped: it is SIGKILLed at once, as it can fork nothing before it dies (red team round 11b: it
    held every clean-up to the deadline). Past ``timeout_s`` every member is SIGKILLed anyway: none is left stopped. ``listed``: where the run's processes can be listed whole (a memory
    cgroup's ``cgroup.procs``, which a child joins as it is forked), each scan reads those instead of all of /proc."""
    killed, clean, found, deadline = 0, 0, False, time.monotonic() + timeout_s
    while clean < (2 if found else 1):  # once any was found, a second clean scan confirms none got away
        alive, running = [], False
        for proc in each_process(listed()) if listed else _scan(deadline):
            if not member(proc) or proc.state in "ZX":
                continue
            alive.append(proc.pid)
            if proc.state == "D":  # waiting in the kernel (a vfork parent): never shows as stopped, so SIGKILL it now;
                _signal(proc.pid, signal.SIGKILL)  # it dies before it runs user code again, so it forks nothing more
            elif proc.state not in "Tt":
                running = True
                _signal(proc.pid, signal.SIGSTOP)
        if running and time.monotonic() > deadline:
            break
        if not running:
            killed += sum(_signal(pid, signal.SIGKILL) for pid in alive)
        clean, found = (0 if alive else clean + 1), found or bool(alive)
        time.sleep(0.001 if running else 0)
    return killed + sum(_signal(pid, signal.SIGKILL) for pid in alive)


def _scan(deadline: float) -> Iterator[Proc]:
    """Every process, then each pid allocated since the listing of /proc began (``ns_last_pid`` before it, and
    wrapping around at ``pid_max``), until none was made between two reads of it (or past ``deadline``)."""
    seen = _last_pid()
    yield from each_process()
    while seen is not None and time.monotonic() < deadline:
        last = _last_pid()
        if last is None or last == seen:
            return
        if last < seen:  # wrapped during the scan: a hopper's next pid is low again
            yield from each_process([*range(seen + 1, _pid_max() + 1), *range(1, last + 1)])
        else:
            yield from each_process(list(range(seen + 1, last + 1)))
        seen = last


def _last_pid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/ns_last_pid").read_text())
    except (OSError, ValueError):
        return None


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 1 << 22
