"""Finding, killing and reaping every process a run created (the run is a session of its own, or several nested
ones under bubblewrap), also when this process is PID 1 or a child subreaper: a killed run's orphans are then
re-parented here and would stay zombies (counting against the sandbox uid's RLIMIT_NPROC) unless reaped."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def processes() -> list[tuple[int, int, str, int, int]]:
    """(pid, session id, state, threads, uid) of every process; vanished ones are skipped."""
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
        found.append((int(entry.name), int(fields[3]), fields[0].decode(), int(fields[17]), uid))
    return found


def kill_session(sid: int, timeout_s: float = 5.0) -> int:
    """SIGKILL every live process of session ``sid`` until none is left; returns how many were killed."""
    killed, deadline = 0, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [pid for pid, session, state, _, _ in processes() if session == sid and state not in "ZX"]
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
