"""Classes 8/9: interpreter state a test changes does not reach the sandboxed program (red team R8b-2): a test's
``random.seed(0)``, ``sys.setrecursionlimit(60)`` or ``collections.Counter.most_common = boom`` passed programs
CPython fails. Such a test is ``unsupported_test`` before any run (``test_state.state_change``), never judged.
Through ``CodeTests`` on the per-run bwrap launch and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.assert_plan import parse_python
from trl_ext.sandbox.test_state import state_change

COUNTER = "from collections import Counter\ndef mode(xs):\n    return Counter(xs).most_common(1)[0][0]\n"
REC = "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
ROLL = "import random\ndef roll():\n    return random.random()\n"
SEEDED = "import random\nrandom.seed(0)\nx = random.random()\nrandom.seed(0)\nassert roll() {} x\n"
BOOM = "def _boom(self, n=None):\n    raise RuntimeError('use no Counter')\n"
CASES = [  # (program, test, CPython passes, judged score)
    (
        COUNTER,
        "import collections\n" + BOOM + "collections.Counter.most_common = _boom\nassert mode([1, 2, 2]) == 2",
        False,
        0.0,
    ),
    (
        COUNTER,
        "from collections import Counter as C\n" + BOOM + "K = C\nK.most_common = _boom\nassert mode([2]) == 2",
        False,
        0.0,
    ),
    (REC, "import sys\nsys.setrecursionlimit(60)\nassert fact(200) > 0", False, 0.0),
    (ROLL, SEEDED.format("!="), False, 0.0),
    (ROLL, SEEDED.format("=="), True, 0.0),  # refused: a right program scores 0 here
    (ROLL, "import random\nassert getattr(random, 'getstate')() is not None and roll() < 1", True, 0.0),
    (
        COUNTER,
        "import math\nclass Box:\n    def __init__(self, v):\n        self.v = v\nb = Box(math.pi)\n"
        "assert mode([2, 2, 1]) == 2 and b.v > 3",
        True,
        1.0,
    ),  # judged: the test's own object, a module read
    (REC, "def check(candidate):\n    assert candidate(5) == 120\ncheck(fact)", True, 1.0),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_state_changes_are_found_in_the_test():
    assert [bool(state_change(parse_python(test))) for _, test, _, score in CASES] == [not s for *_, s in CASES]
    assert state_change(parse_python("import heapq\nheapq.nlargest.__code__ = None"))  # a library function's
    assert state_change(parse_python("for k in [__import__('collections').deque]:\n    k.x = 1"))
    assert not state_change(parse_python("x = [1]\nassert f(x) == 1 and f.__name__ == 'f'"))
    assert not state_change(parse_python("import io, sys\nsys.stdout = io.StringIO()\nf()"))  # a module's own
    assert state_change(parse_python("import io, sys\nsys = io.StringIO\nsys.x = 1"))  # not only a module


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_state_changing_tests_are_refused(launch, monkeypatch, request):
    assert [cpython_passes(program, test) for program, test, *_ in CASES] == [passes for _, _, passes, _ in CASES]
    programs, tests = [c[0] for c in CASES], [c[1] for c in CASES]
    scores, outcomes = grade_asserts(launch, programs, tests, monkeypatch, request)
    assert scores == [c[3] for c in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/unsupported_test"] == 6 / 8 and outcomes["code_tests/infra_error"] == 0.0, outcomes
