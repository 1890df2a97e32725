"""Class 8/9: a program's change to a kept deque or dict reaches the test's object in place, as small as the
program made it: an item assigned in a deque is no change of its shape (the test's iterator over it goes on), a
value changed in a dict keeps its table. Same verdicts as plain CPython."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
PROGRAM = """from collections import deque
Q = deque([1, 2, 3])
D = {"x": 1, "y": 2}
def line():
    return Q
def triple(i):
    Q[i] *= 3
def table():
    return D
def inc(k):
    D[k] += 1
"""
SAME = [
    "q = line()\nout = []\nfor i, v in enumerate(q):\n    out.append(v)\n    triple(i)\nassert list(q) == [3, 6, 9]",
    "q = line()\nfor i, v in enumerate(q):\n    triple(i)\nassert list(q) == [1, 2, 3]",  # CPython fails
    "d = table()\nseen = []\nfor k in d:\n    seen.append(k)\n    inc(k)\nassert seen == ['x', 'y'] and d == {'x': 2, 'y': 3}",
]


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = [cpython_passes(PROGRAM, test) for test in SAME]
    assert 0 < sum(verdicts) < len(verdicts)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_a_change_in_place_keeps_the_tests_iterator_going(backend):
    for test in SAME:
        report = run_tests(PROGRAM, {"kind": "assert", "code": test}, limits=FAST)
        assert report.all_passed == cpython_passes(PROGRAM, test), (test, report)
