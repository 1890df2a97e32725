"""Class 9: a value of a program's subclass of a builtin type (``class Money(int)``, an ``IntEnum`` member, a
``str`` subclass) crossed as its base value, so a wrong program passed ``type(f()) is str``, ``repr(f()) ==
"'abc'"`` or ``str(f()) == '[1]'`` where the program's class says otherwise (red team R8-5). It now crosses as an
instance of one judge class per class of the run, a subclass of the base named as the program's, whose
``repr``/``str``/``format(x, '')`` are the texts the program's own methods gave in the sandbox; what else the
program's class could answer differently (another attribute, ``isinstance`` against a class it is not, a format
spec of its own ``__format__``) makes the test ``unsupported_test``, never a pass (docs/sandbox.md)."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.program_sets import subclass_value

SUBCLASSES = """import enum
class S(str):
    pass
class Color(enum.IntEnum):
    RED = 1
class R(str):
    def __repr__(self):
        return 'nope'
class L(list):
    def __str__(self):
        return 'x'
class I(int):
    def __format__(self, spec):
        return 'x'
class Money(int):
    def __str__(self):
        return f'${int(self)}'
class B(bytes):
    pass
def s():
    return S('abc')
def color():
    return Color.RED
def r():
    return R('abc')
def l():
    return L([1])
def i():
    return I(5)
def money():
    return Money(5)
def b():
    return B(b'ab')
def both():
    return [S('a'), S('b')]
def shadow():
    x = S('abc')
    x.upper = lambda: 'nope'
    return x
def tagged():
    x = S('abc')
    x.tag = 1
    return x
class LR(list):
    def __repr__(self):
        return 'L' + list.__repr__(self)
def lr():
    return LR([1])
"""
WRONG = [  # CPython fails each; the judge crossing the base value passed the first six
    "assert type(s()) is str",
    "assert type(color()) == int",
    "assert repr(r()) == \"'abc'\"",
    "assert str(l()) == '[1]'",
    "assert f'{i()}' == '5'",
    "assert type(b()) is bytes",
    "assert not hasattr(color(), 'name')",  # refused: the program's member has attributes the judge's lacks
    "import enum\nassert not isinstance(color(), enum.Enum)",  # refused: isinstance against a class it is not
    "assert shadow().upper() == 'ABC'",  # the instance's own attribute answers in CPython (R8b-3): not plain data
    "x = lr()\nx.append(2)\nassert repr(x) == 'L[1]'",  # a text of the value before the test changed it (R8b-4)
]
RIGHT = [
    "assert s() == 'abc' and type(s()) is not str and isinstance(s(), str) and type(s()).__name__ == 'S'",
    "assert s().upper() == 'ABC' and hash(s()) == hash('abc') and type(s()) is type(s())",
    "assert repr(r()) == 'nope' and str(r()) == 'abc' and r() == 'abc' and repr([r()]) == '[nope]'",
    "assert l() == [1] and isinstance(l(), list) and lr() == [1] and tagged() == 'abc' and tagged().upper() == 'ABC'",
    "assert f'{i()}' == 'x' and i() + 1 == 6 and str(i()) == '5'",
    "assert str(money()) == '$5' and f'{money()}' == '$5' and f'{money():d}' == '5' and money() == 5",
    "assert type(both()[0]) is type(both()[1]) and both() == ['a', 'b']",
    "assert color() == 1 and repr(color()) == '<Color.RED: 1>' and type(color()).__name__ == 'Color'",
    "assert b() == b'ab' and type(b()) is not bytes and b().hex() == '6162'",
]
REFUSED = [  # CPython passes each; the judge cannot know the answer without the program's class
    "assert color().name == 'RED'",
    "import enum\nassert isinstance(color(), enum.Enum)",
    "assert f'{i():>3}' == 'x'",
    "assert str(l()) == 'x' and repr(l()) == '[1]'",  # a list the test could change: its texts are not kept
    "x = lr()\nx.append(2)\nassert repr(x) == 'L[1, 2]'",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(SUBCLASSES, test) for test in WRONG)
    assert all(cpython_passes(SUBCLASSES, test) for test in RIGHT + REFUSED)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_subclass_values_never_pass_what_cpython_fails(launch, monkeypatch, request):
    tests = WRONG + RIGHT
    scores, outcomes = grade_asserts(launch, [SUBCLASSES] * len(tests), tests, monkeypatch, request)
    assert scores == [0.0] * len(WRONG) + [1.0] * len(RIGHT), list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
    scores, outcomes = grade_asserts(launch, [SUBCLASSES] * len(REFUSED), REFUSED, monkeypatch, request)
    assert scores == [0.0] * len(REFUSED) and outcomes["code_tests/unsupported_test"] == 1.0, outcomes


def test_a_forged_subclass_record_is_malformed_and_classes_are_one_per_number():
    refused: list = []

    def refuse(why: str) -> None:
        refused.append(why)
        raise LookupError(why)

    classes: dict = {"refuse": refuse}
    one = subclass_value(classes, [0, "S", "S", True], ["'a'", "a", None], "a", 64)
    two = subclass_value(classes, [0, "S", "S", True], ["'b'", "b", None], "b", 64)
    assert type(one) is type(two) and type(one).__name__ == "S" and repr(one) == "'a'" and str(two) == "b"
    with pytest.raises(LookupError):
        one.anything  # noqa: B018
    assert refused and "anything" in refused[-1]
    kept = subclass_value(classes, [2, "T", "T", True], ["T", "T", None], (1, ("a", frozenset({2.5}))), 64)
    held = subclass_value(classes, [2, "T", "T", True], ["T", "T", None], (1, [2]), 64)  # the test can change [2]
    assert repr(kept) == "T" and str(kept) == "T"
    with pytest.raises(LookupError):
        repr(held)
    assert "repr()" in refused[-1]
    for shape, texts, value in (
        ([0, "S", "S", True], ["x", "y", None], 5),  # number 0 was a str subclass: a class changed its shape
        ([1, "S", "S"], ["x", "y", None], "a"),
        ([1, "", "S", True], ["x", "y", None], "a"),
        ([1, "S", "S", True], ["x", 3, None], "a"),
        ([1, "S", "S", True], ["x", "y", None], None),
        (["1", "S", "S", True], ["x", "y", None], "a"),
    ):
        with pytest.raises(ValueError):
            subclass_value(classes, shape, texts, value, 64)
    with pytest.raises(ValueError):  # past the cap of classes of one evaluation
        subclass_value(classes, [9, "T", "T", True], ["x", "y", None], "a", len(classes))
