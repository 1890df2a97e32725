"""Class 9/1: a test that changes a module by writing its namespace directly (``builtins.__dict__[...]``,
``vars(module)[...]``, ``mock.patch.dict``) or replaces a module in ``sys.modules`` changes what the program's own
code would see in one interpreter; the sandbox cannot see it, so such a test is ``unsupported_test`` unless it put
the module back before the call. Never a pass for a program plain CPython fails."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
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
# a loaded module the test's globals never name, patched by a write that bypasses attribute assignment (red team
# R8-10: a test forbidding heapq passed a program using it); CPython fails each
HEAPQ = "import heapq\ndef f(xs):\n    h = []\n    for x in xs:\n        heapq.heappush(h, x)\n    return h\n"
BOOM = "def boom(*a):\n    raise AssertionError('heapq is not allowed')\n"
UNNAMED = [
    BOOM + "vars(__import__('heapq'))['heappush'] = boom\nassert f([3, 1, 2]) == [1, 3, 2]",
    BOOM
    + "import types\ntypes.ModuleType.__setattr__(__import__('heapq'), 'heappush', boom)\nassert f([2, 1]) == [1, 2]",
    BOOM + "import sys\nsys.modules['heapq'].__dict__.update(heappush=boom)\nassert f([2, 1]) == [1, 2]",
    BOOM + "def g():\n    vars(__import__('heapq'))['heappush'] = boom\ng()\nassert f([2, 1]) == [1, 2]",
]
UNNAMED_PUT_BACK = [  # the same writes undone before the call: judged as usual, both ways
    "h = vars(__import__('heapq'))\nold = h['heappush']\nh['heappush'] = None\nh['heappush'] = old\n"
    "assert f([2, 1]) == [1, 2]",
    "h = vars(__import__('heapq'))\nold = h['heappush']\nh['heappush'] = None\nh['heappush'] = old\n"
    "assert f([2, 1]) == [2, 1]",
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


@pytest.mark.parametrize("launch", [("bwrap", "0"), ("landlock", "1")], ids=["bwrap-0", "landlock-1"])
def test_an_unnamed_loaded_module_patched_past_attribute_assignment_is_refused(launch, monkeypatch):
    assert not any(cpython_passes(HEAPQ, test) for test in UNNAMED)
    assert [cpython_passes(HEAPQ, test) for test in UNNAMED_PUT_BACK] == [True, False]
    tests = UNNAMED + UNNAMED_PUT_BACK
    scores, outcomes = grade_asserts(launch, [HEAPQ] * len(tests), tests, monkeypatch)
    assert scores == [0.0] * len(UNNAMED) + [1.0, 0.0], list(zip(tests, scores))
    assert outcomes["code_tests/unsupported_test"] == len(UNNAMED) / len(tests)


XML = "import xml.etree.ElementTree as ET\ndef tag(s):\n    return ET.fromstring(s).tag\n"


def test_submodules_an_extension_registers_are_not_the_tests_own():
    """Red team round 10b, R10bJ-4: ``import xml.etree.ElementTree`` in the test loads pyexpat, which registers its
    own spec-less submodules ``pyexpat.errors`` and ``pyexpat.model``; they were taken for modules the test made,
    and a right program scored 0. A spec-less module of the test's own, held by no parent, is still refused."""
    right = (
        "import xml.etree.ElementTree as ET\nassert tag('<a><b/></a>') == 'a'\nassert ET.fromstring('<c/>').tag == 'c'"
    )
    own = "import sys, types\nm = types.ModuleType('planted')\nm.__spec__ = None\nsys.modules['planted'] = m\n"
    own += "assert tag('<a/>') == 'a'"
    assert cpython_passes(XML, right) and cpython_passes(XML, own)
    assert run_tests(XML, {"kind": "assert", "code": right}, limits=FAST).all_passed
    report = run_tests(XML, {"kind": "assert", "code": own}, limits=FAST)
    assert report.statuses[-1] == "unsupported_test" and "put its own sys.modules['planted']" in report.detail
