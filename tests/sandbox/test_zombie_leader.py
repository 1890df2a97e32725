"""Class 6 (outside red team, round 10): a run process whose main thread exits alone (``SYS_exit``) while another
thread lives on is a zombie LEADER: /proc shows it ``Z``, yet its thread runs. The clean-up skipped every ``Z``
process, so such a process that also left the run's process group (``setpgid``; the launcher's ``killpg`` missed
it) outlived the run, unwatched, on every non-root backend without a pid namespace. The clean-up now kills every
process of the run that still runs a thread (``reaper.running``). The launches run as a real non-root uid in
``test_real_uid_suite.py`` (as root a memory cgroup kills the run whole)."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

import pytest

from trl_ext.sandbox import Limits, run
from trl_ext.sandbox.reaper import kill_session, processes, running

_SYS_EXIT = 60  # x86_64: the calling thread only (exit_group is 231)
LEADER = r"""
import ctypes, os, threading, time
if os.fork() == 0:
    os.setpgid(0, 0)  # out of the run's process group, still in its session
    def linger():
        ctypes.CDLL(None).prctl(15, b"NAME", 0, 0, 0)  # PR_SET_NAME: found by this name after the run
        time.sleep(20)
    threading.Thread(target=linger).start()
    time.sleep(0.3)
    ctypes.CDLL(None).syscall(60, 0)
time.sleep(1)
print("done")
"""


def _threads_named(name: str) -> list[str]:
    found = []
    for task in Path("/proc").glob("[0-9]*/task/[0-9]*/comm"):
        try:
            if task.read_text().strip() == name:
                found.append(str(task.parent))
        except OSError:
            pass
    return found


pytestmark = pytest.mark.skipif(os.uname().machine != "x86_64", reason="SYS_exit's number is x86_64's")


def test_a_zombie_leader_with_a_live_thread_is_running_and_killed():
    read_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a session of its own, as a run; its main thread exits alone
        os.setsid()
        threading.Thread(target=time.sleep, args=(20,)).start()
        os.write(read_w[1], b"x")
        ctypes.CDLL(None).syscall(_SYS_EXIT, 0)
    os.read(read_w[0], 1)
    time.sleep(0.3)
    leader = next(p for p in processes() if p.pid == pid)
    assert leader.state == "Z" and leader.threads > 1 and running(leader)
    assert kill_session(pid) >= 1
    os.waitpid(pid, 0)  # reaped only once the whole thread group is dead
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("backend", ["landlock", "bwrap"])
def test_no_thread_of_a_run_outlives_it(backend):
    name = f"trlzl{os.getpid() % 10000}{backend[:2]}"
    result = run(LEADER.replace("NAME", name), backend=backend, limits=Limits(timeout_s=10))
    assert result.status == "ok" and result.stdout == "done\n", result
    time.sleep(0.5)
    assert _threads_named(name) == []
