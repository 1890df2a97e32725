"""Class 9/1: a replayed call takes no time and allocates nothing in the evaluation, so a test that bounds a call
with what only the real call trips (an armed timer, a wait with a timeout in a thread of its own, tracemalloc) is
``unsupported_test``; the clocks a test reads (``time.clock_gettime``, ``os.times``, ``resource.getrusage`` too) advance by the call's
measured duration. Never a pass for a program plain CPython fails."""

from __future__ import annotations

from tests.sandbox.test_test_environment import cpython_verdicts
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
SLOW = "import time\ndef double(n):\n    time.sleep(1.5)\n    return 2 * n\n"
BURN = "import time\ndef double(n):\n    t = time.process_time()\n    while time.process_time() - t < 1.5:\n        pass\n    return 2 * n\n"
HUGE = "def double(n):\n    block = bytearray(50 << 20)\n    return 2 * n\n"
REFUSED = [  # (program, test): CPython fails each
    (SLOW, "import signal\ndef stop(*a):\n    raise TimeoutError\nsignal.signal(signal.SIGALRM, stop)\n"
     "signal.setitimer(signal.ITIMER_REAL, 0.5)\nassert double(2) == 4\nsignal.setitimer(signal.ITIMER_REAL, 0)"),
    (SLOW, "import threading\ngot = []\nworker = threading.Thread(target=lambda: got.append(double(2)), daemon=True)\n"
     "worker.start()\nworker.join(0.5)\nassert got == [4]"),
    (HUGE, "import tracemalloc\ntracemalloc.start()\nassert double(2) == 4\n"
     "assert tracemalloc.get_traced_memory()[1] < 1 << 20"),
]  # fmt: skip
TIMED = [
    (SLOW, "import time\nt = time.clock_gettime(time.CLOCK_MONOTONIC)\nassert double(2) == 4\n"
     "assert time.clock_gettime(time.CLOCK_MONOTONIC) - t < 1"),
    (SLOW, "import os\nt = os.times().elapsed\nassert double(2) == 4\nassert os.times().elapsed - t < 1"),
    (BURN, "import resource\ncpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])\nt = cpu()\n"
     "assert double(2) == 4\nassert cpu() - t < 1"),
]  # fmt: skip


def test_the_plain_cpython_verdicts():
    cases = [*REFUSED, *TIMED, (SLOW, "assert double(2) == 4")]  # run side by side: their 1.5 s calls overlap
    assert cpython_verdicts(cases) == [False] * (len(REFUSED) + len(TIMED)) + [True]


def test_a_test_bounding_a_call_never_passes_a_slow_or_huge_program():
    for program, test in REFUSED:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses[-1] == "unsupported_test", (test, report)
    for program, test in TIMED:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and "AssertionError" in report.detail, (test, report)
    fast = "def double(n):\n    return 2 * n\n"
    for _, test in TIMED:
        assert run_tests(fast, {"kind": "assert", "code": test}, limits=FAST).all_passed, test
