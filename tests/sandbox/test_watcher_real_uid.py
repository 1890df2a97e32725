"""Class 6 as a REAL non-root uid (no uid mapping: the uid-1000 container maps to host root and cannot show this):
the kernel makes an exiting or zombie task's ``/proc/<pid>/fd`` root's, so the watcher of a non-root trainer is
refused it. Such a task hides nothing (it runs no program code and its descriptors are closed in the same exit),
so it must not count as hiding (a right program scored ``runtime_error``), while a live non-dumpable process
still does. The watcher's readers are called from a child that drops to an unprivileged uid (needs root)."""

import ctypes
import json
import os
import stat
import time

import pytest

from trl_ext.sandbox import memory, scratch

UID = 4242  # no process of the suite runs as it
PR_SET_DUMPABLE = 4


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _child(kind: str, ready_w: int) -> None:
    """The watched process: ``zombie`` exits at once, ``leader`` exits its main thread alone while a thread holding
    a pipe lives on, ``hidden`` makes itself non-dumpable and sleeps."""
    libc = ctypes.CDLL(None, use_errno=True)
    if kind == "zombie":
        os._exit(0)
    if kind == "hidden":
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        os.write(ready_w, b"x")
        time.sleep(30)
        os._exit(0)
    import threading

    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    os.write(ready_w, b"x")
    libc.syscall(ctypes.c_long(60), ctypes.c_long(0))  # SYS_exit: the main thread only


def _read_as(uid: int, kind: str) -> dict:
    report_r, report_w = os.pipe()
    watcher = os.fork()
    if watcher == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # a uid change made this process non-dumpable
            ready_r, ready_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                _child(kind, ready_w)
            if kind != "zombie":
                os.read(ready_r, 1)
            while kind != "hidden" and _state(pid) != "Z":
                time.sleep(0.01)
            out = {"state": _state(pid)}
            try:
                out["fifos"] = sum(stat.S_ISFIFO(i.st_mode) for i in memory.descriptors(pid))
                out["maps"] = len(scratch._mappings(pid, 1 << 20))
            except memory.Unreadable:
                out["unreadable"] = True
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.write(report_w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    os.waitpid(watcher, 0)
    with os.fdopen(report_r) as report:
        return json.loads(report.read())


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops to an unprivileged uid: needs root")


@needs_root
def test_a_zombie_is_not_taken_for_a_hiding_process():
    got = _read_as(UID, "zombie")
    assert got == {"state": "Z", "fifos": 0, "maps": 0}


@needs_root
def test_a_zombie_leaders_live_thread_is_still_read():
    got = _read_as(UID, "leader")
    assert got["state"] == "Z" and "unreadable" not in got
    assert got["fifos"] >= 2 and got["maps"] > 0  # the pipes and mappings its live thread holds


@needs_root
def test_a_live_non_dumpable_process_still_counts_as_hiding():
    got = _read_as(UID, "hidden")
    assert got.pop("state") in "RS" and got == {"unreadable": True}  # a guard: the fix must not skip these
