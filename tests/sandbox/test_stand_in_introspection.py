"""Class 9/1: in an assert test's evaluation the program's functions are the judge's stand-ins. A test that reads
what only the program's function object holds (its code, defaults, closure, globals; the inspect or dis modules),
or whether a result is a generator (the judge's iterator of one is not), would read the judge's, so it is
``unsupported_test``: never a pass for a program plain CPython fails."""

from __future__ import annotations

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests
from trl_ext.sandbox.assert_plan import introspection

FAST = Limits(timeout_s=10.0)
USES_MAX = "def top(xs):\n    return max(xs)\n"
READS = [  # CPython fails each with USES_MAX: the test forbids what the program does
    "assert top([1, 4]) == 4\nassert 'max' not in top.__code__.co_names",
    "assert top([1, 4]) == 4\nassert 'max' not in getattr(top, '__code__').co_names",
    "import dis\nassert top([2]) == 2\nassert all(i.argval != 'max' for i in dis.get_instructions(top))",
    "from inspect import getsource\nassert top([2]) == 2\nassert 'max(' not in getsource(top)",
]


GENERATES = "def ones():\n    yield 1\n"
NOT_A_GENERATOR = [  # CPython fails each: the program's result is a generator
    "import types\nassert not isinstance(ones(), types.GeneratorType)",
    "from collections.abc import Generator\nassert not isinstance(ones(), Generator)",
]


def test_a_test_asking_whether_a_result_is_a_generator_is_refused():
    for test in NOT_A_GENERATOR:
        assert not cpython_passes(GENERATES, test)
        report = run_tests(GENERATES, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses == ["unsupported_test"], (test, report)


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(USES_MAX, test) for test in READS)


def test_a_test_reading_the_function_object_is_refused():
    for test in READS:
        assert introspection(test)
        report = run_tests(USES_MAX, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses == ["unsupported_test"], (test, report)
    assert not introspection("assert top([1, 4]) == 4\nassert top.__name__ == 'top'")
    assert run_tests(USES_MAX, {"kind": "assert", "code": "assert top([1, 4]) == 4"}, limits=FAST).all_passed
