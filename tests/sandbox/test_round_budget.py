"""Class 2/6: all sandbox runs of one assert test share one time budget (1.5 x ``timeout_s`` of sandbox runs): a
test whose steps each need another run cannot multiply the time a program takes by its number of rounds (before:
up to 32 x ``timeout_s`` per program). Out of budget, the test reports "timeout"."""

from __future__ import annotations

from trl_ext.sandbox import Limits, run_tests

LIMITS = Limits(timeout_s=1.0)
# every run loads the program again: 0.7 s each (within one run's timeout), and each step needs a run of its own
PROGRAM = "import time\ntime.sleep(0.7)\ndef step(x):\n    return x + 1\n"
TEST = "x = 0\nfor _ in range(8):\n    x = step(x)\nassert x == 8\n"


def test_the_rounds_of_one_test_share_one_time_budget():
    report = run_tests(PROGRAM, {"kind": "assert", "code": TEST}, limits=LIMITS)
    assert report.passed == 0 and not report.infra_error
    assert report.statuses[-1] == "timeout" and len(report.statuses) <= 6, report


def test_a_test_within_the_budget_still_passes():
    quick = PROGRAM.replace("time.sleep(0.7)", "time.sleep(0.01)")
    assert run_tests(quick, {"kind": "assert", "code": TEST}, limits=Limits(timeout_s=5.0)).all_passed
