"""Class 9/8: an OrderedDict crosses in its own order (the one ``move_to_end`` changes and ``==`` between two
OrderedDicts compares), not in the order its keys were first stored: as a result, and as a kept object a later
call reorders (an LRU cache). Same verdicts as plain CPython."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
LRU = """from collections import OrderedDict
CACHE = OrderedDict()
def put(k, v):
    CACHE[k] = v
    CACHE.move_to_end(k)
def use(k):
    CACHE.move_to_end(k)
    return CACHE
def fresh():
    d = OrderedDict(x=1, y=2, z=3)
    d.move_to_end('x')
    return d
"""
SAME = [
    "assert list(fresh()) == ['y', 'z', 'x']",
    "from collections import OrderedDict\nassert fresh() == OrderedDict(y=2, z=3, x=1)",
    "from collections import OrderedDict\nassert fresh() == OrderedDict(x=1, y=2, z=3)",  # CPython fails
    "put('a', 1)\nput('b', 2)\nc = use('a')\nassert list(c) == ['b', 'a']",
    "put('a', 1)\nput('b', 2)\nc = use('b')\nuse('a')\nassert list(c) == ['a', 'b']",  # CPython fails
    "put('a', 1)\nput('b', 2)\nc = use('b')\nuse('a')\nassert list(c) == ['b', 'a']",
]


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = [cpython_passes(LRU, test) for test in SAME]
    assert 0 < sum(verdicts) < len(verdicts)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_an_ordered_dict_crosses_in_its_own_order(backend):
    for test in SAME:
        report = run_tests(LRU, {"kind": "assert", "code": test}, limits=FAST)
        assert report.all_passed == cpython_passes(LRU, test), (test, report)
