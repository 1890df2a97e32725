"""Class 9/1: a test that changes a module by writing its namespace directly (``builtins.__dict__[...]``,
``vars(module)[...]``, ``mock.patch.dict``) or replaces a module in ``sys.modules`` changes what the program's own
code would see in one interpreter; the sandbox cannot see it, so such a test is ``unsupported_test`` unless it put
the module back before the call. Never a pass for a program plain CPython fails."""

from __future__ import annotations

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
PROGRAM = """import math
def biggest(xs):
    return max(xs)
def area(r):
    return math.pi * r * r
def root(x):
    return math.sqrt(x)
def smallest(xs):
    import heapq
    return heapq.nsmallest(1, xs)[0]
"""
PATCHED = [  # CPython fails each: the patch reaches the program's code
    "import builtins\nbuiltins.__dict__['max'] = None\nassert biggest([1, 3]) == 3",
    "import math\nvars(math)['sqrt'] = abs\nassert root(4) == 2",
    "import builtins\nbuiltins.__dict__.update(max=min)\nassert biggest([1, 3]) == 3",
    "import sys, types\nsys.modules['heapq'] = types.ModuleType('heapq')\nassert smallest([4, 2]) == 2",
    "import sys, types\nsys.modules['heapq'] = types.SimpleNamespace(nsmallest=lambda n, xs: [9])\n"
    "assert smallest([4, 2]) == 2",
]
PUT_BACK = [  # the module is as loaded again when the program runs: judged as usual
    "import builtins\nfrom unittest import mock\nwith mock.patch.dict(builtins.__dict__, {'max': None}):\n"
    "    pass\nassert biggest([1, 3]) == 3",
    "import mimetypes\nmimetypes.guess_type('a.txt')\nassert area(0) == 0",
]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(PROGRAM, test) for test in PATCHED)
    assert all(cpython_passes(PROGRAM, test) for test in PUT_BACK)


def test_a_module_patched_through_its_namespace_is_refused():
    for test in PATCHED:
        report = run_tests(PROGRAM, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses[-1] == "unsupported_test", (test, report)
        assert "the program may" in report.detail
    for test in PUT_BACK:
        assert run_tests(PROGRAM, {"kind": "assert", "code": test}, limits=FAST).all_passed, test
