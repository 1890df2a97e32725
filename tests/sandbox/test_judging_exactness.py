"""Class 8: judging leniency. Ints and floats compare by exact value as Python's ``==`` does (unless a tolerance
is asked for); ``StopIteration`` leaving a program's function is one, as in CPython (it ends the test's ``map()``; PEP 479
makes it an error in the test's generators only); a stateful function gives the
results one interpreter would, also when its calls fall in different replay rounds."""

from __future__ import annotations

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import run_tests, values_equal


def test_ints_and_floats_compare_exactly():
    assert values_equal(10**18 + 1, 1e18) is False and (10**18 + 1 == 1e18) is False
    assert values_equal(10**18, 1e18) is True
    assert values_equal(2**53 + 1, float(2**53)) is False
    assert values_equal(1e18, 10**18 + 1, float_tol=1e-9) is True  # a tolerance was asked for
    assert values_equal(0.1 + 0.2, 0.3) is False and values_equal(0.1 + 0.2, 0.3, float_tol=1e-9) is True
    assert values_equal(True, 1) is False and values_equal(1, 1.0) is True


STATEFUL = "n = 0\ndef tick(step=1):\n    global n\n    n += step\n    return n\n"
CASES = {
    # (program, assert test, verdict)
    "big int vs float": ("def f():\n    return 10**18 + 1\n", "assert f() == 1e18\n", 0.0),
    "big int vs equal float": ("def f():\n    return 10**18\n", "assert f() == 1e18\n", 1.0),
    "stop iteration in map": (  # CPython: map() ends at ok(2)'s StopIteration, all([True]) (red team R7-5)
        "def ok(x):\n    if x > 1:\n        raise StopIteration\n    return True\n",
        "assert all(map(ok, [1, 2, 3]))\n",
        1.0,
    ),
    "stop iteration is not caught as another error": (
        "def ok(x):\n    raise StopIteration\n",
        "try:\n    ok(1)\nexcept StopIteration:\n    raise AssertionError\nexcept BaseException:\n    pass\n",
        0.0,
    ),
    "stop iteration in a generator expression": (
        "def ok(x):\n    raise StopIteration\n",
        "assert all(ok(x) for x in [1, 2])\n",
        0.0,
    ),
    "stateful calls": (STATEFUL, "assert tick() == 1\nassert tick() == 2\nassert tick() == 3\n", 1.0),
    "stateful calls across rounds": (
        STATEFUL,
        "assert tick() == 1\nassert tick(tick()) == 4\nassert tick() == 5\nassert tick(tick(tick())) == 24\n",
        1.0,
    ),
    "stateful calls in a loop with a dependent argument": (
        STATEFUL,
        "x = 0\nfor _ in range(3):\n    x = tick(x + 1)\nassert x == 7, x\n",  # n: 1, 1 + 2, 3 + 4
        1.0,
    ),
    "a state that a wrong program does not keep": (
        "def tick(step=1):\n    return step\n",
        "assert tick() == 1\nassert tick() == 2\n",
        0.0,
    ),
}


def test_exactness_stop_iteration_and_state_in_assert_tests(backend):
    names = list(CASES)
    programs = [f"```python\n{CASES[n][0]}\n```" for n in names]
    specs = [{"kind": "assert", "code": CASES[n][1]} for n in names]
    scores = CodeTests(timeout_s=3.0)(programs, tests=specs)
    assert dict(zip(names, scores)) == {n: CASES[n][2] for n in names}


def test_exactness_and_state_in_call_tests(backend):
    big = {"kind": "call", "fn_name": "f", "cases": [{"args": [], "expected": 1e18}]}
    ticks = {"kind": "call", "fn_name": "tick", "cases": [{"args": [], "expected": k} for k in (1, 2, 3)]}
    programs = ["def f():\n    return 10**18 + 1\n", "def f():\n    return 10**18\n", STATEFUL]
    scores = CodeTests(timeout_s=3.0)([f"```python\n{p}\n```" for p in programs], tests=[big, big, ticks])
    assert scores == [0.0, 1.0, 1.0]
    tolerant = CodeTests(timeout_s=3.0, float_tol=1e-9)([f"```python\n{programs[0]}\n```"], tests=[big])
    assert tolerant == [1.0]


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "SystemExit"])
def test_a_base_exception_from_the_program_is_not_caught_by_except_exception(backend, raised):
    """CPython fails this test (``except Exception`` does not catch them): so must the judge."""
    program = f"def g(x):\n    raise {raised}\n"
    test = "try:\n    r = g(1)\nexcept Exception:\n    r = 2\nassert r == 2\n"
    report = run_tests(program, {"kind": "assert", "code": test})
    assert report.passed == 0 and not report.infra_error and raised in report.detail
