"""Class 8: the judge's stand-in of a program exception class has the program class's ``__qualname__``
(``Errors.B`` for a class in a class, ``make.<locals>.Made`` for one a function makes) and ``__module__``
``'__main__'``. Stand-ins took the bare name as their qualname, so a test asserting ``E.__qualname__ == 'B'`` passed
where CPython gives ``'Errors.B'``. Through ``CodeTests`` on the assert path with the per-run bwrap launch and
landlock through its fork server (docs/sandbox.md, "The program's names, described")."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import assert_wrong_fail_right_pass
from tests.sandbox.test_test_environment import cpython_passes

PROGRAM = """class Errors:
    class B(Exception):
        pass
class Top(ValueError):
    pass
def make():
    class Made(Errors.B):
        pass
    return Made
E, Made = Errors.B, make()
def f():
    raise Errors.B('x')
def g():
    raise Made('y')
def h():
    raise Top('z')
"""
CATCH = "try:\n    {call}\nexcept Exception as e:\n    caught = e\nassert {check}\n"
WRONG = [  # CPython fails each; with the bare name as every stand-in's qualname, each passed
    "assert E.__qualname__ == 'B'",
    CATCH.format(call="f()", check="type(caught).__qualname__ == 'B'"),
    CATCH.format(call="g()", check="type(caught).__qualname__ == 'Made'"),
]
RIGHT = [
    "assert E.__qualname__ == 'Errors.B' and E.__name__ == 'B' and E.__module__ == '__main__'",
    CATCH.format(call="f()", check="type(caught).__qualname__ == 'Errors.B' and type(caught) is E"),
    CATCH.format(call="g()", check="type(caught).__qualname__ == 'make.<locals>.Made' and isinstance(caught, E)"),
    CATCH.format(call="h()", check="type(caught).__qualname__ == 'Top' == type(caught).__name__"),
    "assert Made.__qualname__ == 'make.<locals>.Made' and Made.__module__ == '__main__' and issubclass(Made, E)",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(PROGRAM, test) for test in WRONG)
    assert all(cpython_passes(PROGRAM, test) for test in RIGHT)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_stand_ins_keep_the_program_classes_qualname(launch, monkeypatch):
    assert_wrong_fail_right_pass(launch, PROGRAM, WRONG, RIGHT, monkeypatch)
