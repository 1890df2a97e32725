"""Class 8: the value a program's iterator ends with (a generator's ``return``, ``StopIteration(v)`` from a
``__next__``) reaches the test as in CPython: ``e.value`` after ``next()``, ``r = yield from f()`` (red team R8-4:
it was dropped, so ``e.value is None`` passed a generator returning 5). Same verdicts as plain CPython, both ways,
through ``CodeTests`` on the per-run bwrap launch and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

PROGRAM = """def f():
    yield 1
    return 5
def total(xs):
    s = 0
    for x in xs:
        s += x
        yield x
    return [s, "sum"]
class It:
    def __iter__(self):
        return self
    def __next__(self):
        raise StopIteration(7)
def it():
    return It()
"""
# the same program with other return values: a test that pins them fails here
OTHER = (
    PROGRAM.replace("return 5", "return None").replace('[s, "sum"]', "s").replace("StopIteration(7)", "StopIteration")
)
TESTS = [
    "g = f()\nassert next(g) == 1\ntry:\n    next(g)\nexcept StopIteration as e:\n    assert e.value == 5",
    "def w():\n    r = yield from f()\n    yield r\nassert list(w()) == [1, 5]",
    "def w():\n    t = yield from total([1, 2, 3])\n    yield t\nassert list(w()) == [1, 2, 3, [6, 'sum']]",
    "try:\n    next(it())\nexcept StopIteration as e:\n    assert e.value == 7 and e.args == (7,)",
    "g = f()\nassert list(g) == [1]\ntry:\n    next(g)\nexcept StopIteration as e:\n    assert e.value is None",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert all(cpython_passes(PROGRAM, test) for test in TESTS)
    assert not any(cpython_passes(OTHER, test) for test in TESTS[:4])
    assert cpython_passes(OTHER, TESTS[4])


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_an_iterators_return_value_crosses(launch, monkeypatch):
    sources = [PROGRAM] * len(TESTS) + [OTHER] * len(TESTS)
    scores, outcomes = grade_asserts(launch, sources, TESTS + TESTS, monkeypatch)
    assert scores == [1.0] * len(TESTS) + [0.0] * 4 + [1.0], list(zip(sources, TESTS + TESTS, scores))
    assert outcomes["code_tests/infra_error"] == 0.0 and outcomes["code_tests/unsupported_test"] == 0.0
