"""Class 9 (red team round 13, R13J-5): an assert test's pass meets a result not known yet as a placeholder, and
``len``, ``int``, ``sum``, ``sorted``, ``str`` of it give made-up values. A later call built from one (``g(len(f()))``,
or a loop over a result, then a call) was shown to the program with the made-up argument, and the next run's real
call was refused by the binding rules: a right program scored 0 (``unsupported_test``). Such calls now wait for the
result (``pending.settled``), and tests whose conversions steer no call still run in as few runs as before."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
PROGRAM = """def f(n=3):
    return list(range(1, n + 1)){wrong}
def g(x):
    return x
def h():
    return 3
"""
STEERED = [
    "assert g(len(f())) == 3",
    "n = len(f())\nassert g(n) == 3",
    "assert g(sum(f())) == 6",
    "assert g(str(f())) == '[1, 2, 3]'",
    "assert g(f'{f()}') == '[1, 2, 3]'",
    "assert g(sorted(f())) == [1, 2, 3]",
    "assert g(int(h())) == 3",
    "assert g(float(h())) == 3.0",
    "assert f(len(f(2))) == [1, 2]",
    "for x in f():\n    assert g(x) == x\nassert g(10) == 10",
    "assert [g(x) for x in f()] == [1, 2, 3]\nassert f(2) == [1, 2]",
    "for x in f(3):\n    assert f(x) == list(range(1, x + 1))\nassert f(0) == []",
    "assert g(list(range(len(f())))) == [0, 1, 2]",
]


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_calls_built_from_a_converted_result_give_cpythons_verdicts(backend):
    for wrong in ("", "[::-1] if n == 3 else list(range(1, n + 1))"):  # right, then wrong for f() only
        program = PROGRAM.format(wrong=wrong)
        for test in STEERED:
            report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
            assert report.all_passed == cpython_passes(program, test), (wrong, test, report)
            assert "unsupported_test" not in report.statuses, (test, report)
    assert all(cpython_passes(PROGRAM.format(wrong=""), test) for test in STEERED)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_conversions_that_steer_no_call_keep_every_call_in_one_run(backend):
    """MBPP's ``assert set(f(x)) == ...``, forty times: the made-up values change no later call, so the first run
    holds all forty calls (a run per converted result would pass the bound on runs and refuse the test)."""
    test = "for x in range(40):\n    assert sorted(f(x)) == list(range(1, x + 1))\n    assert len(f(x)) == x"
    report = run_tests(PROGRAM.format(wrong=""), {"kind": "assert", "code": test}, limits=FAST)
    assert report.all_passed and len(report.statuses) <= 2, report
