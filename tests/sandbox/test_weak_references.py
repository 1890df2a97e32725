"""Class 8: a program that keeps only a weak reference to an object of the test (weakref.ref, a WeakSet, a
finalizer) and changes it in a later call changes the test's object, as in one interpreter: every numbered object
something refers to weakly is compared after a call, like one held strongly."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
REF = "import weakref\nKEPT = []\ndef hold(x):\n    KEPT.append(weakref.ref(x))\ndef bump():\n    KEPT[0]().{op}\n"
WEAK_SET = (
    "import weakref\nKEPT = weakref.WeakSet()\ndef hold(x):\n    KEPT.add(x)\ndef bump():\n    next(iter(KEPT)).{op}\n"
)
SAME = [
    (REF.format(op="add(5)"), "s = {2}\nhold(s)\nbump()\nassert s == {2}"),  # changed: CPython fails
    (REF.format(op="add(5)"), "s = {2}\nhold(s)\nbump()\nassert s == {2, 5}"),
    (
        REF.format(op="appendleft(0)"),
        "from collections import deque\nq = deque([1])\nhold(q)\nbump()\nassert list(q) == [0, 1]",
    ),
    (
        WEAK_SET.format(op="update(a=3)"),
        "from collections import Counter\nc = Counter()\nhold(c)\nbump()\nassert c == Counter()",
    ),
    (
        WEAK_SET.format(op="update(a=3)"),
        "from collections import Counter\nc = Counter()\nhold(c)\nbump()\nassert c['a'] == 3",
    ),
]


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = [cpython_passes(program, test) for program, test in SAME]
    assert 0 < sum(verdicts) < len(verdicts)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_a_weakly_held_object_changed_later_is_seen(backend):
    for program, test in SAME:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.all_passed == cpython_passes(program, test), (program, test, report)
