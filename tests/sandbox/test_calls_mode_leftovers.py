"""Class 6 (time, red team round 11): what a judged program leaves running is killed by the harness itself, at once,
where kill(-1) reaches only the run (a private pid namespace or Landlock's signal scope), as between stdio cases.
Before, after the last call the trainer's stop-then-kill clean-up found it, and a process that never shows as
stopped (a vfork parent waiting in the kernel for a child blocked on a FIFO) held every reward call to the
clean-up's 5 s deadline, whatever timeout_s."""

import signal

import pytest

from trl_ext.sandbox import reaper, run_tests
from trl_ext.sandbox.landlock import LandlockBackend, unavailable_reason

LEAVES_A_CHILD = """
import os, time
if os.fork() == 0:
    os.setpgid(0, 0)  # out of the group the trainer kills first
    time.sleep(60)
    os._exit(0)

def double(x):
    return 2 * x
"""


@pytest.mark.parametrize("fork_server", ["0", "1"])
def test_a_judged_landlock_run_leaves_nothing_for_the_trainers_clean_up(fork_server, monkeypatch):
    if unavailable_reason() is not None or not LandlockBackend().kill_all_safe:
        pytest.skip("needs Landlock's signal scope (ABI >= 6)")
    monkeypatch.setenv("TRL_EXT_SANDBOX_FORKSERVER", fork_server)
    stopped = []
    real_signal = reaper._signal
    monkeypatch.setattr(
        reaper,
        "_signal",
        lambda pid, n: (stopped.append(pid) if n == signal.SIGSTOP else None, real_signal(pid, n))[1],
    )
    # a call spec: no evaluation worker, whose own clean-up would show here too
    spec = {"kind": "call", "fn_name": "double", "cases": [{"args": [2], "expected": 4}, {"args": [3], "expected": 6}]}
    report = run_tests(LEAVES_A_CHILD, spec, backend="landlock")
    assert report.all_passed, report
    assert stopped == []  # the clean-up found no process of the run still running
