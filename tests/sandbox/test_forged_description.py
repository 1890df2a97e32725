"""Class 1: what the harness says of the test's names (its description record) is written after the program's
module ran, in the same process, so the program can rewrite it (and any harness function it reaches through
its frames). Every kind a forged description gives must be harmless: a function described as an exception class
is still called in the sandbox when the test calls it (the instance must come back from the program), and a
builtin the test reads is refused unless the description lists it as kept (red team R8-11). Same verdicts as
plain CPython for honest programs; 0 for the forgers; through ``CodeTests`` on the per-run bwrap launch and
landlock's fork server (docs/sandbox.md, class 1)."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

# rebinds harness globals (reached from the program's module code through its frames): {name: replacement}
FORGE = """
import sys
def _forge(**replacements):
    frame = sys._getframe()
    while frame is not None:
        if '_describe' in frame.f_globals and frame.f_globals is not globals():
            frame.f_globals.update(replacements)
            return
        frame = frame.f_back
"""
AS_CLASS = '{"names": [["is_prime", ["exc", [["is_prime", false, 1, ["Exception"]]], "Exception", null]]]}'
WRONG = "def is_prime(n):\n    return False\n" + FORGE
FORGERS = [  # (program, test): CPython fails each; each forged pass before R8-11's fix or would with a gap
    (WRONG + f"_forge(_describe=lambda namespace, names: {AS_CLASS!r})\n", "assert is_prime(7)\nassert is_prime(13)"),
    (WRONG + f"_forge(_describe=lambda namespace, names: {AS_CLASS!r})\n", "assert is_prime(7) != is_prime(8)"),
    (WRONG + f"_forge(_describe=lambda namespace, names: {AS_CLASS!r})\n", "raise is_prime(7)"),
    (  # the "shadow" entry of a builtin the test reads, dropped
        "Exception = KeyError\ndef f():\n    raise TypeError('t')\n"
        + FORGE
        + '_forge(_describe=lambda namespace, names: \'{"names": [["f", ["fn", "f", null]]]}\')\n',
        "try:\n    f()\nexcept Exception:\n    pass",
    ),
    (WRONG + "_forge(_describe=lambda namespace, names: 1 / 0)\n", "assert is_prime(7)"),
    (WRONG + '_forge(_live_call=lambda *a: \'{"ok": true, "value": [\')\n', "assert is_prime(7)"),
    (WRONG + "_forge(_encode=lambda *a: 1 / 0)\n", "assert is_prime(7)"),
    (
        WRONG + '_forge(_live_call=lambda *a: \'{"ok": false, "made": 1, "raised": "Exception"}\')\n',
        "assert is_prime(7)",
    ),
]
# honest programs: the test makes instances of their exception classes (a call of the program now)
ERRORS = """class MyErr(ValueError):
    pass
class Coded(Exception):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code
def check(x):
    if x < 0:
        raise MyErr("negative")
    return x
"""
RIGHT = [
    "e = MyErr('negative')\nassert isinstance(e, ValueError) and str(e) == 'negative' and type(e) is MyErr",
    "try:\n    raise MyErr('x')\nexcept MyErr as e:\n    assert e.args == ('x',)",
    "try:\n    check(-1)\nexcept MyErr as e:\n    assert type(e) is type(MyErr('y'))",
    "assert Coded(3).code == 3 and str(Coded(3)) == 'code 3'",
    "try:\n    raise Coded(5)\nexcept Coded as e:\n    assert e.code == 5",
]
# a program whose classes differ from what the tests expect: CPython fails each of these tests on it
ERRORS_WRONG = ERRORS.replace("MyErr(ValueError)", "MyErr(KeyError)").replace("code = code", "code = code + 1")
WRONG_ERRORS = [RIGHT[0], RIGHT[3], RIGHT[4]]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(program, test) for program, test in FORGERS)
    assert all(cpython_passes(ERRORS, test) for test in RIGHT)
    assert not any(cpython_passes(ERRORS_WRONG, test) for test in WRONG_ERRORS)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_a_forged_description_fails_the_program_and_honest_classes_are_made_by_the_program(launch, monkeypatch):
    sources = [program for program, _ in FORGERS] + [ERRORS] * len(RIGHT) + [ERRORS_WRONG] * len(WRONG_ERRORS)
    tests = [test for _, test in FORGERS] + RIGHT + WRONG_ERRORS
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    expected = [0.0] * len(FORGERS) + [1.0] * len(RIGHT) + [0.0] * len(WRONG_ERRORS)
    assert scores == expected, list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
