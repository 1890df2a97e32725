"""Class 7: a run's clean-up kills a process that keeps changing its pid (fork, the parent exits, the child goes
on; red team round 10). Killing by a list of pids misses it: by the time the kill comes it has a new pid that was
in no list. ``reaper.stop_then_kill`` stops the run's processes until a scan finds none running (a stopped process
cannot fork), then kills them; a memory cgroup is emptied the same way (``memory.release``)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, memory, run

from .._backends import EACH_BACKEND, sandbox_backend, sandbox_server  # noqa: F401

PROBE = Path(__file__).with_name("_hop_probe.py")
ROOT = Path(__file__).resolve().parents[2]
TRIALS = 6


def _survivors(how: str) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(PROBE), how, str(TRIALS)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [int(after) for after in done.stdout.split()[1:]]


@pytest.mark.parametrize("how", ["session", "session-groups"])
def test_killing_a_session_leaves_no_pid_hopper(how):
    # four hoppers per trial; "-groups": each generation also makes a process group of its own, so no group kill
    # reaches it
    assert _survivors(how) == [0] * TRIALS


@pytest.mark.skipif(not memory.available(), reason="no memory cgroup here (needs root)")
def test_releasing_a_cgroup_leaves_no_pid_hopper():
    assert _survivors("cgroup-groups") == [0] * TRIALS


_HOPPER = """
import ctypes, os, time
deadline = time.time() + 8
if os.fork() == 0:
    os.closerange(0, 3)
    ctypes.CDLL(None).prctl(15, MARKER.encode(), 0, 0, 0)  # PR_SET_NAME: what this test finds it by
    while time.time() < deadline:
        if os.fork():
            os._exit(0)
        os.setpgid(0, 0)
    os._exit(0)
print("started", flush=True)
"""


def _live_threads_named(marker: str) -> list[str]:
    """Every live task (a hopper's process, a zombie leader's thread) named ``marker``, as "pid/tid"."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            tids = os.listdir(f"/proc/{entry}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = Path(f"/proc/{entry}/task/{tid}/stat").read_text()
            except OSError:
                continue
            if f"({marker})" in stat and stat.rsplit(")", 1)[1].split()[0] not in "ZX":
                found.append(f"{entry}/{tid}")
    return found


def _run_leaves_no_marked_thread(program: str, tag: str) -> None:
    """Run ``program`` (which names its lingering threads ``MARKER``) and check that none outlived the run."""
    marker = f"{tag}{os.getpid() % 10**6}x{time.monotonic_ns() % 10**5}"
    result = run(f"MARKER = {marker!r}\n" + program, limits=Limits(timeout_s=5.0))
    assert result.status == "ok" and result.stdout.strip() == "started", result.stderr
    time.sleep(0.3)
    assert _live_threads_named(marker) == []


@EACH_BACKEND
def test_a_run_that_hops_pids_ends_with_the_run():
    _run_leaves_no_marked_thread(_HOPPER, "hop")


_ZOMBIE_LEADER = """
import ctypes, os, threading, time
libc = ctypes.CDLL(None, use_errno=True)
deadline = time.time() + 8
if os.fork() == 0:
    os.closerange(0, 3)
    os.setpgid(0, 0)  # out of the run's process group: no group kill reaches it
    def linger():
        libc.prctl(15, MARKER.encode(), 0, 0, 0)
        while time.time() < deadline:
            time.sleep(0.05)
        os._exit(0)
    threading.Thread(target=linger).start()
    time.sleep(0.2)
    libc.syscall(60, 0)  # SYS_exit: the main thread alone; /proc shows the process as a zombie
time.sleep(0.5)
print("started", flush=True)
"""


def test_killing_a_session_kills_a_zombie_leaders_live_threads():
    # red team round 10: a process whose main thread exited alone shows 'Z' while its other threads run; the
    # clean-up skipped zombies, so its thread outlived the run (every non-root landlock path, bwrap's fork server)
    marker = f"zl{os.getpid() % 10**6}x{time.monotonic_ns() % 10**5}"
    leader = subprocess.Popen(
        [sys.executable, "-c", f"MARKER = {marker!r}\n" + _ZOMBIE_LEADER], start_new_session=True
    )
    try:
        assert leader.wait(timeout=30) == 0
        assert _live_threads_named(marker) != []  # the control: it is there, behind a zombie
        from trl_ext.sandbox import reaper

        reaper.kill_session(leader.pid)
        time.sleep(0.3)
        assert _live_threads_named(marker) == []
    finally:
        for found in _live_threads_named(marker):
            os.kill(int(found.split("/")[0]), 9)


@EACH_BACKEND
def test_a_run_whose_process_leader_exited_alone_ends_with_the_run():
    _run_leaves_no_marked_thread(_ZOMBIE_LEADER, "zlr")


_ANCHOR = """
import os, sys
os.chdir(sys.argv[1])
os.mkfifo("anchor.fifo")
os.setsid()
print(os.getpid(), flush=True)
# the vfork parent waits in the kernel (state D) while its child blocks opening a FIFO nobody writes
os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 3, "anchor.fifo", os.O_RDONLY, 0)])
"""


def test_a_process_waiting_in_the_kernel_is_killed_without_waiting_for_the_deadline(tmp_path, monkeypatch):
    """Red team round 11b: a vfork parent never shows as stopped, so the stop-then-kill clean-up scanned until its
    deadline (5 s for every reward call, whatever timeout_s). Counted in scans, not timed: a handful, not thousands."""
    from trl_ext.sandbox import reaper

    anchor = subprocess.Popen([sys.executable, "-c", _ANCHOR, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    sid = int(anchor.stdout.readline())
    while [proc.state for proc in reaper.processes([sid])] != ["D"]:
        time.sleep(0.01)
    scans = []
    real_sleep = reaper.time.sleep
    monkeypatch.setattr(reaper.time, "sleep", lambda s: (scans.append(s), real_sleep(s))[1])
    reaper.stop_then_kill(lambda proc: proc.sid == sid, timeout_s=3.0)
    anchor.wait(timeout=10)
    assert anchor.returncode == -9 and len(scans) < 20, (anchor.returncode, len(scans))
