"""Run by tests/sandbox/test_hop_kill.py: a session of processes that keep changing pid (fork, the parent exits),
then ``reaper.kill_session`` (or ``memory.release`` of a cgroup holding them, with "cgroup"); prints how many of
them are still alive afterwards. This process is a child subreaper, so the hoppers' exited parents come here and
are reaped, and the hoppers stop themselves after HOP_S seconds whatever happens."""

import ctypes
import os
import subprocess
import sys
import threading
import time

from trl_ext.sandbox import memory, reaper
from trl_ext.sandbox.limits import Limits

HOP_S = 8.0
HOPPER = """
import os, time
deadline = time.time() + HOP_S
for _ in range(3):
    if os.fork() == 0:
        break
while time.time() < deadline:
    if os.fork():
        os._exit(0)
    if LEAVE_GROUP:
        os.setpgid(0, 0)
os._exit(0)
"""


def _alive(sid: int) -> int:
    return sum(1 for p in reaper.processes() if p.sid == sid and p.state not in "ZX")


def trial(how: str) -> tuple[int, int]:
    """(processes of the session alive before the kill, alive after it)."""
    cgroup = memory.create(Limits(memory_mb=256)) if how.startswith("cgroup") else None
    argv = [sys.executable, "-c", f"HOP_S, LEAVE_GROUP = {HOP_S}, {how.endswith('-groups')}\n" + HOPPER]
    if cgroup is not None:
        argv = memory.enter_argv(cgroup, argv)
    leader = subprocess.Popen(argv, start_new_session=True)
    time.sleep(0.4)
    before = _alive(leader.pid)
    if cgroup is not None:
        memory.release(cgroup)
    else:
        reaper.kill_session(leader.pid)
    leader.wait()
    time.sleep(0.3)
    return before, _alive(leader.pid)


def _reap_forever() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            time.sleep(0.01)


def main(how: str, trials: int) -> None:
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    threading.Thread(target=_reap_forever, daemon=True).start()  # the hoppers' exited parents come here
    print("ALIVE", *[trial(how)[1] for _ in range(trials)], flush=True)
    while any(p.ppid == os.getpid() for p in reaper.processes()):  # the survivors', once they stop at HOP_S
        time.sleep(0.1)


main(sys.argv[1], int(sys.argv[2]))
