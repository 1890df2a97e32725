"""Class 8: an object of the program's own iterator class crosses as an iterator the judge steps with next() only
when that is all a test can ask of it: its ``__iter__`` gives itself and it defines no truth value, length,
``in``, indexing or send/throw of its own (the judge would answer those itself, not the program). Any other such
object is no plain data: the call fails, so a wrong answer never passes."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
COUNTER = """class Count:
    def __init__(self, n):
        self.i, self.n = 0, n
    def __iter__(self):
        return {iter_result}
    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i
{extra}
def f():
    return Count(3)
"""
WRONG = [  # CPython fails each: the program's own method answers, not next()
    (COUNTER.format(iter_result="iter([9])", extra=""), "assert list(f()) == [1, 2, 3]"),
    (COUNTER.format(iter_result="iter([9])", extra=""), "assert [v for v in f()] == [1, 2, 3]"),
    (COUNTER.format(iter_result="self", extra="    def __bool__(self):\n        return False"), "assert f()"),
    (
        COUNTER.format(iter_result="self", extra="    def __contains__(self, x):\n        return False"),
        "assert 2 in f()",
    ),
]
RIGHT = (COUNTER.format(iter_result="self", extra=""), "it = f()\nassert next(it) == 1 and list(it) == [2, 3]")


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(program, test) for program, test in WRONG)
    assert cpython_passes(*RIGHT)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_an_iterator_class_with_its_own_protocol_never_passes_wrongly(backend):
    for program, test in WRONG:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and not report.infra_error, (program, test, report)
    program, test = RIGHT
    assert run_tests(program, {"kind": "assert", "code": test}, limits=FAST).all_passed


AVERAGER = """def averager():
    total = count = 0
    average = None
    while True:
        value = yield average
        total += value
        count += 1
        average = total / {count}
def f():
    return map(abs, [1])
"""
SENDS = [
    "g = averager()\nnext(g)\nassert g.send(10) == 10.0\nassert g.send(20) == 15.0\nassert g.send(30) == 20.0",
    "g = averager()\nassert g.send(None) is None\nassert g.send(4) == 4.0",
    "g = averager()\nnext(g)\nassert g.send(10) == 11.0",
    "m = f()\ntry:\n    m.send(1)\nexcept AttributeError:\n    pass\nelse:\n    raise AssertionError",
    "assert not hasattr(f(), 'send') and hasattr(averager(), 'send')",
]


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_a_generators_send_gives_cpythons_verdicts(backend):
    """Red team round 12 (R12J-7): the test's handle on a program's generator had no ``send``, so a right
    coroutine-style generator scored 0. A sent value crosses as a call's argument; only generators have ``send``."""
    for program in (AVERAGER.format(count="count"), AVERAGER.format(count="(count + 1)")):  # right, then wrong
        for test in SENDS:
            report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
            assert report.all_passed == cpython_passes(program, test), (program, test, report)
    assert cpython_passes(AVERAGER.format(count="count"), SENDS[0])  # the right one passes somewhere


RESETTER = """def counter():
    n = 0
    while True:
        try:
            yield n
            n += 1
        except ValueError as exc:
            n = {reset}
def f():
    return map(abs, [1])
"""
THROWS = [
    "g = counter()\nnext(g); next(g)\nassert g.throw(ValueError) == 0\nassert next(g) == 1",
    "g = counter()\nnext(g)\nassert g.throw(ValueError('again', 3)) == 0",
    "g = counter()\nnext(g)\ntry:\n    g.throw(KeyError('k'))\nexcept KeyError as exc:\n    assert exc.args == ('k',)\n"
    "else:\n    raise AssertionError\nassert list(g) == []",  # an exception it does not catch ends it
    "g = counter()\ntry:\n    g.throw(ValueError)\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
    "g = counter()\nnext(g)\ntry:\n    g.throw(3)\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError",
    "m = f()\ntry:\n    m.throw(ValueError)\nexcept AttributeError:\n    pass\nelse:\n    raise AssertionError",
]


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_a_generators_throw_gives_cpythons_verdicts(backend):
    """Red team round 12 (R12J-7): a test that threw an exception into a program's generator got AttributeError,
    so a right program scored 0. A builtin exception crosses as its class's name and args."""
    for program in (RESETTER.format(reset="0"), RESETTER.format(reset="n")):  # right, then wrong
        for test in THROWS:
            report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
            assert report.all_passed == cpython_passes(program, test), (program, test, report)
    assert cpython_passes(RESETTER.format(reset="0"), THROWS[0])  # the right one passes somewhere


NOT_REBUILT = [  # what the sandbox cannot rebuild from the class's name and args (red team round 14b, R14bJ-1)
    "class Reset(ValueError):\n    pass\nthrown = Reset",
    "thrown = OSError(2, 'missing', 'data.txt')",  # its filename is no arg
    "thrown = ImportError('no', name='mod')",
    "thrown = ValueError('noted')\nthrown.add_note('why')",
    "try:\n    raise ValueError('caught')\nexcept ValueError as caught:\n    thrown = caught",  # its traceback
]


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_throwing_an_exception_the_sandbox_cannot_rebuild_is_refused(backend):
    for made in NOT_REBUILT:
        test = made + "\ng = counter()\nnext(g)\ntry:\n    g.throw(thrown)\nexcept BaseException:\n    pass"
        report = run_tests(RESETTER.format(reset="0"), {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and "unsupported_test" in report.statuses and "of its own" in report.detail, made


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_what_a_builtin_iterator_holds_beyond_its_items_is_refused(backend):
    """Red team round 14 (R14J-8): the test's handle on a program's generator or list iterator lacked the real
    type's other attributes, so a test reading one judged the program on an AttributeError, a False or a made-up
    ``repr`` (a right program 0; a program CPython fails 1 on ``not hasattr(g, 'gi_frame')``). Such a read refuses
    the test; an attribute the real type lacks raises AttributeError, as in CPython."""
    program = "def gen(n):\n    yield from range(n)\ndef items(n):\n    return iter(list(range(n)))\n"
    for read in (
        "gen(3).__name__",
        "gen(3).gi_running",
        "hasattr(gen(3), 'gi_frame')",
        "repr(gen(3))",
        "items(3).__setstate__",
    ):
        report = run_tests(program, {"kind": "assert", "code": f"assert {read} or True"}, limits=FAST)
        assert report.passed == 0 and "unsupported_test" in report.statuses, (read, report)
    absent = "assert not hasattr(items(3), 'send') and not hasattr(map(abs, [1]), 'x') and list(gen(2)) == [0, 1]"
    assert run_tests(program, {"kind": "assert", "code": absent}, limits=FAST).all_passed
