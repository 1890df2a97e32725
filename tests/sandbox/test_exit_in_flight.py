"""Class 7: a trainer that exits while a run is in flight (the training script ends or raises, Ctrl-C) leaves no
process of the run behind (red team round 12: a program and the daemon it double-forked outlived a trainer that
exited 0, per-run landlock, and a ``sandbox-serve`` stopped by SIGTERM, landlock's fork server). Every local
backend, per run and through its fork server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from trl_ext.sandbox import forkserver
from trl_ext.sandbox.server import ending_signals

from .._backends import start_server, stop_server
from ._serve import post

PROGRAM = """
import ctypes, os, time
name = {name!r}.encode()
libc = ctypes.CDLL(None)
if os.fork() == 0:
    os.setpgid(0, 0)
    if os.fork() == 0:
        libc.prctl(15, name, 0, 0, 0)
        time.sleep(30)
    os._exit(0)
libc.prctl(15, name, 0, 0, 0)
time.sleep(30)
"""
# the daemon's main thread alone ends (SYS_exit) and the process lives on in a sleeping thread: its /proc stat reads
# Z (red team round 16, R16-1: the fork server's sweep took it for a zombie)
THREADED = PROGRAM.replace(
    "        time.sleep(30)\n",
    "        import platform, threading\n"
    "        threading.Thread(target=time.sleep, args=(30,)).start()\n"
    "        libc.syscall(93 if platform.machine() == 'aarch64' else 60, 0)\n",
)
TRAINER = """
import sys, threading, time
from trl_ext.sandbox import run
threading.Thread(target=run, args=({program!r},), kwargs={{"backend": {backend!r}, "timeout_s": 40}}, daemon=True).start()
time.sleep(float(sys.argv[1]))
raise SystemExit(0)  # the training script ends while the reward call is in flight
"""


def _named(name: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                found += [int(pid)] if comm.read().strip() == name else []
        except OSError:
            pass
    return found


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
@pytest.mark.parametrize("fork_server", ["1", "0"])
def test_a_trainer_that_exits_leaves_no_process_of_its_runs(backend, fork_server):
    name = "inflight" + uuid.uuid4().hex[:6]
    trainer = TRAINER.format(program=PROGRAM.format(name=name), backend=backend)
    env = {**os.environ, forkserver.FORKSERVER_ENV: fork_server}
    proc = subprocess.Popen([sys.executable, "-c", trainer, "4"], env=env)
    deadline = time.monotonic() + 20
    while len(_named(name)) < 2 and time.monotonic() < deadline:  # the program and its daemon are up
        time.sleep(0.1)
    assert len(_named(name)) == 2
    assert proc.wait(30) == 0
    deadline = time.monotonic() + 5
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _named(name) == []


_DEFAULT_SLEEP = (  # every disposition the default and nothing blocked, then ``sleep``
    "import os, signal\n"
    "for number in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:\n"
    "    signal.signal(number, signal.SIG_DFL)\n"
    "signal.pthread_sigmask(signal.SIG_SETMASK, [])\n"
    "os.write(1, b'r')\n"
    "os.execvp('sleep', ['sleep', '5'])\n"
)


def _ends_a_process(number: int) -> bool:
    """Whether ``number``'s default action ends a process: ``sleep`` with every default disposition is sent it."""
    child = subprocess.Popen([sys.executable, "-c", _DEFAULT_SLEEP], stdout=subprocess.PIPE)
    child.stdout.read(1)
    time.sleep(0.05)  # past its exec
    child.send_signal(number)
    child.send_signal(signal.SIGCONT)  # a stop signal: let it go on
    child.kill() if child.poll() is None and not _dies(child) else None
    child.stdout.close()
    return child.wait() == -number


def _dies(child: subprocess.Popen) -> bool:
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(0.5)
    return child.poll() is not None


def test_every_signal_that_ends_the_service_by_default_ends_it_cleanly():
    """Red team round 14: a hand-made list missed SIGPWR and SIGPROF (a run's daemon outlived the service). The
    service's list must hold every signal whose default action ends a process, found here by sending each to a
    child, but those it leaves as they are on purpose (SIGINT ends it cleanly as KeyboardInterrupt)."""
    on_purpose = {signal.SIGKILL, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ}  # SIGPIPE, SIGXFSZ: python ignores
    on_purpose |= {signal.SIGILL, signal.SIGTRAP, signal.SIGBUS, signal.SIGFPE, signal.SIGSEGV}  # its own faults
    ending = {number for number in signal.valid_signals() if number not in on_purpose and _ends_a_process(number)}
    assert ending <= set(ending_signals()) and {signal.SIGPWR, signal.SIGPROF, signal.SIGRTMIN + 1} <= ending


@pytest.mark.parametrize(
    "number",
    [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGPWR, signal.SIGRTMIN + 1],
    ids=["TERM", "HUP", "QUIT", "USR1", "PWR", "RTMIN+1"],
)
def test_a_service_stopped_by_a_signal_leaves_no_process_of_its_runs(number):
    """Red team rounds 12 and 13: a run's daemon outlived ``sandbox-serve`` stopped by SIGTERM, then by SIGHUP or
    SIGQUIT (their default actions run no exit hook): each is a clean exit now."""
    name = "served" + uuid.uuid4().hex[:6]
    proc, url = start_server("--workers", "1", "--backend", "landlock")
    try:
        client = threading.Thread(target=_post_quietly, args=(url, PROGRAM.format(name=name)), daemon=True)
        client.start()
        deadline = time.monotonic() + 20
        while len(_named(name)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_named(name)) == 2
        proc.send_signal(number)
        proc.wait(30)
    finally:
        stop_server(proc)
    deadline = time.monotonic() + 5
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _named(name) == []


def _post_quietly(url: str, code: str) -> None:
    with contextlib.suppress(Exception):  # the service goes away mid-request
        post(url, {"code": code, "language": "python", "run_timeout": 40})


KILLED = """
import os, signal, sys, threading, time
from trl_ext.sandbox import run
threading.Thread(target=run, args=({program!r},), kwargs={{"backend": "landlock", "timeout_s": 40}}, daemon=True).start()
time.sleep(float(sys.argv[1]))
if sys.argv[2] == "helper" and os.fork() == 0:  # a forked helper (a DataLoader worker) holds the control socket too
    time.sleep(20)
    os._exit(0)
os.kill(os.getpid(), signal.SIGKILL)  # no hook runs: the fork server sees its trainer gone
"""


@pytest.mark.parametrize("helper", ["alone", "helper", "thread"])
def test_a_killed_trainer_leaves_no_process_behind_landlocks_fork_server(helper):
    """Red team rounds 12, 13 and 14: when its trainer is killed, landlock's fork server killed each run's first
    process only; a daemon the program double-forked into a process group of its own lived on. The server now ends
    every process of its runs' sessions (the run's own Landlock domain still refuses /proc), also while a child the
    trainer forked holds the control socket (the server watches the trainer's process), and a daemon living on in a
    thread after its main thread ended (round 16)."""
    name = "killed" + uuid.uuid4().hex[:6]
    env = {**os.environ, forkserver.FORKSERVER_ENV: "1"}
    script = KILLED.format(program=(THREADED if helper == "thread" else PROGRAM).format(name=name))
    proc = subprocess.Popen([sys.executable, "-c", script, "4", helper], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while len(_named(name)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_named(name)) == 2
        assert proc.wait(30) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while _named(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _named(name) == []
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)  # the helper


ENDED = """
import ctypes, os, time
libc = ctypes.CDLL(None)
if os.fork() == 0:
    os.setpgid(0, 0)
    libc.prctl(15, {name!r}.encode(), 0, 0, 0)
    time.sleep(30)
"""
KILLED_BEFORE_SWEEP = """
import os, signal
from trl_ext.sandbox import forked_run, memory, run
forked_run.kill_session = lambda sid, timeout_s=5.0: 0  # killed before its own sweep of the run's session
memory.release = lambda cgroup, timeout_s=5.0: print("cgroup", cgroup, flush=True)  # (its cgroup's kill too)
print(run({program!r}, backend="landlock", timeout_s=40).status, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_trainer_killed_after_a_run_ended_leaves_nothing_of_it_behind_landlocks_fork_server():
    """Red team round 16 (R16-4): a trainer killed between the fork server's report that a run's first process
    ended and its own sweep of that run's session left the run's daemon alive (the server swept only the sessions
    of runs still going). The trainer's sweep is left out here, so the server's is the only one."""
    name = "ended" + uuid.uuid4().hex[:6]
    env = {**os.environ, forkserver.FORKSERVER_ENV: "1"}
    script = KILLED_BEFORE_SWEEP.format(program=ENDED.format(name=name))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    lines = done.stdout.splitlines()
    deadline = time.monotonic() + 5
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftovers = _named(name)
    for pid in leftovers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    for line in lines:  # the run's memory cgroup, where there was one: the killed trainer left it
        if line.startswith("cgroup "):
            with contextlib.suppress(OSError):
                os.rmdir(line.split(" ", 1)[1])
    assert done.returncode == -signal.SIGKILL and lines[-1:] == ["ok"], done.stderr[-2000:]
    assert leftovers == []
