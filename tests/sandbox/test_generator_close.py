"""Class 8: ``close()`` on the program's generator closes it in the sandbox, as a call of the run, and raises in the
test what its clean-up raised (a drop swallows it, an explicit close does not; RuntimeError when it ignores
GeneratorExit); the test still holds the closed generator (``next(g, default)`` gives the default). Same verdicts
as plain CPython."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
GENS = """LOG = []
def loud():
    try:
        yield 1
        yield 2
    finally:
        raise KeyError("cleanup")
def stubborn():
    while True:
        try:
            yield 0
        except GeneratorExit:
            pass
def tidy():
    try:
        yield 1
        yield 2
    finally:
        LOG.append("tidied")
def log():
    return LOG
"""
SAME = [
    "g = loud()\nnext(g)\ng.close()",  # CPython fails: KeyError out of close()
    "g = loud()\nnext(g)\ntry:\n    g.close()\nexcept KeyError:\n    pass\nelse:\n    raise AssertionError",
    "g = stubborn()\nnext(g)\ntry:\n    g.close()\nexcept RuntimeError:\n    pass\nelse:\n    raise AssertionError",
    "g = tidy()\nnext(g)\ng.close()\nassert next(g, 'end') == 'end' and log() == ['tidied']",
    "g = tidy()\nnext(g)\ng.close()\nassert log() == []",  # CPython fails
]


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = [cpython_passes(GENS, test) for test in SAME]
    assert 0 < sum(verdicts) < len(verdicts)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_closing_the_programs_generator_gives_cpythons_verdicts(backend):
    for test in SAME:
        report = run_tests(GENS, {"kind": "assert", "code": test}, limits=FAST)
        assert report.all_passed == cpython_passes(GENS, test), (test, report)
