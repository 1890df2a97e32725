"""The sandbox backends the containment and grading suites run against, shared without a conftest.

A test module imports the ``sandbox_backend`` and ``sandbox_server`` fixtures from here and decorates a test with
``EACH_BACKEND``: the test then runs once per isolated backend, with ``TRL_EXT_SANDBOX_BACKEND`` (and, for "remote",
``TRL_EXT_SANDBOX_URL``) pointing at it, so every ``run``/``run_tests``/``CodeTests`` call without an explicit
``backend=`` goes there. "remote" is ``trl-ext sandbox-serve`` started on 127.0.0.1 once per pytest process (each
xdist worker starts its own), on first use, with the environment the session started with; a module that needs a
server of its own (another environment or settings) overrides the ``sandbox_server`` fixture.
``TRL_EXT_TEST_BACKENDS`` (comma-separated) narrows the list, e.g. for the non-root landlock run.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trl_ext.sandbox import forkserver
from trl_ext.sandbox.backends import BACKEND_ENV, URL_ENV
from trl_ext.sandbox.limits import _UID_SLOTS, UID_BASE_ENV, UIDS, choose_uid_base

ISOLATED = tuple(os.environ.get("TRL_EXT_TEST_BACKENDS", "bwrap,landlock,remote").split(","))


def start_server(*args: str, timeout_s: float = 60.0, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """``trl-ext sandbox-serve`` on 127.0.0.1, any free port, with ``env`` (default: this process's environment now);
    returns the process and its URL."""
    cmd = [sys.executable, "-m", "trl_ext.cli", "sandbox-serve", "--host", "127.0.0.1", "--port", "0", *args]
    env = {k: v for k, v in (os.environ if env is None else env).items() if k not in (BACKEND_ENV, URL_ENV)}  # local
    env[UID_BASE_ENV] = str(choose_uid_base())  # its sandbox uids, so that tests can tell its runs' processes
    SERVER_UID_BASES.append(int(env[UID_BASE_ENV]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline, seen = time.monotonic() + timeout_s, ""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline and proc.poll() is None:
            if sel.select(0.2):
                line = proc.stdout.readline()
                seen += line
                found = re.search(r"http://127\.0\.0\.1:\d+", line)
                if found:
                    threading.Thread(target=proc.stdout.read, daemon=True).start()  # never let the pipe fill
                    return proc, found.group(0)
    proc.kill()
    raise RuntimeError(f"sandbox-serve did not start: {seen}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


SERVER_PIDS: list[int] = []
SERVER_UID_BASES: list[int] = []
EACH_BACKEND = pytest.mark.usefixtures("sandbox_backend")  # decorate a test: it runs once per isolated backend


@contextlib.contextmanager
def serving_subprocess(*args: str, env: dict | None = None) -> Iterator[str]:
    """The URL of a ``sandbox-serve`` started with ``args`` (see ``start_server``), its processes counted as this
    test process's sandboxes (``sandbox_pids``); stopped on exit."""
    proc, url = start_server(*args, env=env)
    SERVER_PIDS.append(proc.pid)
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def sandbox_server(session_sandbox_server: str) -> str:
    """URL of a ``sandbox-serve`` (auto backend, 2 workers): the session's (``tests/conftest.py``)."""
    return session_sandbox_server


def current_backend() -> str:
    """The backend the running test was given by ``sandbox_backend``."""
    return os.environ[BACKEND_ENV]


@pytest.fixture(params=ISOLATED)
def sandbox_backend(request, monkeypatch) -> str:
    """The backend name this test runs with (the default of every sandbox call in it)."""
    if request.param == "remote":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("sandbox_server"))
    monkeypatch.setenv(BACKEND_ENV, request.param)
    return request.param


def _uid_ranges() -> list[range]:
    bases = [UIDS._base, *SERVER_UID_BASES]
    return [range(base, base + _UID_SLOTS) for base in bases]


def sandbox_pids(since_ticks: int = 0) -> list[int]:
    """Live processes left by sandboxes of this test process (or its sandbox-serve): under a sandbox uid (root),
    bubblewrap children, or, as a non-root uid, processes of this uid in another session started after
    ``since_ticks`` (each landlock run is a session of its own). Idle evaluation workers (each started ahead of
    its task) and their descendants are not left-overs, nor are fork servers (``_fork_server_own``)."""
    pids, parents, uid = [], {os.getpid(), *SERVER_PIDS}, os.getuid()
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) <= 2:
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            owner = Path(entry.path, "status").read_text().split("\nUid:")[1].split()[0]
        except (OSError, IndexError):
            continue
        table[int(entry.name)] = (stat, int(owner))
    workers = _evaluation_workers()
    for pid, (stat, owner) in table.items():
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        state, ppid, _, sid, *rest = stat[stat.rfind(")") + 2 :].split()
        if state in "ZX" or _descends_from(pid, workers, table) or _fork_server_own(pid):
            continue
        started = int(rest[15])  # field 22
        as_root = owner in {u for r in _uid_ranges() for u in r} or (int(ppid) in parents and name == "bwrap")
        as_user = uid != 0 and owner == uid and int(sid) != os.getsid(0) and started >= since_ticks
        if as_root or as_user:
            pids.append(pid)
    return pids


_SERVER_MARK = Path(forkserver.__file__).with_name("_forkserver_main.py").read_bytes()[:120]


def _fork_server_own(pid: int) -> bool:
    """A fork server's own process (its bubblewrap, the server, a spare child waiting for a run): it runs the
    server's source and has no seccomp filter. Every process of a run has one (installed before its first
    instruction, inherited by all it starts), so a process a run left behind is never taken for one."""
    try:
        if _SERVER_MARK not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        return "\nSeccomp:\t0\n" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _descends_from(pid: int, ancestors: set[int], table: dict) -> bool:
    for _ in range(16):
        if pid in ancestors:
            return True
        if pid not in table:
            return False
        stat = table[pid][0]
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
    return False


def _evaluation_workers() -> set[int]:
    """Session ids (= pids) of this process's live evaluation workers (each a session of its own)."""
    from trl_ext.sandbox import judge  # noqa: PLC0415 - only where the judge is in use

    pool = judge.EVALUATORS._pool
    return set(pool.pids()) if pool is not None else set()


def now_ticks() -> int:
    """Clock ticks since boot (the unit of a process's start time in /proc/<pid>/stat)."""
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def wait_no_strays(since_ticks: int = 0, timeout_s: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := sandbox_pids(since_ticks)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
