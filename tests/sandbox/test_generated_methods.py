"""Class 1 leniency (red team R10bJ-5): a library class's Python function is the genuine one only if everything that
decides what it does is: its code, closure cells' contents, defaults, kw-only defaults, globals and what they hold
for the names it reads. A program that keeps a namedtuple's generated methods (or Counter's, Fraction's) as the
same objects but re-points what they read (``cell.cell_contents = ...``, ``f.__defaults__ = ...``,
``f.__code__ = ...``, ``P.__new__.__globals__[...] = ...``) changed what CPython answers, while the judge answered
with its own library class: a wrong program scored 1. Through ``CodeTests`` on the assert path with the per-run
bwrap launch and landlock through its fork server (docs/sandbox.md, "Plain data")."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

HEAD = "import collections, fractions\nP = collections.namedtuple('P', 'x y')\n"
TAIL = "def f(a, b):\n    return P(a, b)\n"
# a function's closure cells, reached by a class pattern as a program may (``__closure__`` is no dynamic name)
CELLS = (
    "def cells(function):\n    match function:\n        case object(__closure__=found):\n            return found\n"
)
WRONG = [  # (the program's change, a test CPython fails with it)
    (
        "match P:\n    case type(__repr__=object(__closure__=(fmt,))):\n        fmt.cell_contents = '(x=%r, y=%r) [not P]'",
        "assert repr(f(1, 2)) == 'P(x=1, y=2)'",
    ),
    (
        "cells(P._asdict)[1].cell_contents = lambda names, values: zip(names, reversed(values))",  # _dict, _zip
        "assert f(1, 2)._asdict() == {'x': 1, 'y': 2}",
    ),
    ("cells(P._replace)[1].cell_contents = ('y', 'x')", "assert f(1, 2)._replace(x=9) == (9, 2)"),  # field_names
    ("cells(P._make.__func__)[1].cell_contents = 3", "assert f(1, 2)._make([3, 4]) == (3, 4)"),  # num_fields
    (  # a program naming __globals__ is dynamic: a test reading no builtin is still judged
        "match P:\n    case type(__new__=object(__globals__=space)):\n"
        "        space['_tuple_new'] = lambda cls, items: tuple.__new__(cls, tuple(items)[::-1])",
        "import copy\np = f(1, 2)\nassert copy.copy(p) == p",
    ),
    (
        "match P:\n    case type(__new__=function):\n        function.__defaults__ = (0,)",
        "p = f(1, 2)\ntry:\n    type(p)(1)\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError",
    ),
    ("P.__getnewargs__ = lambda self: (9, 9)", "import copy\nassert copy.copy(f(1, 2)) == (1, 2)"),
    ("del P.__repr__", "assert repr(f(1, 2)) == 'P(x=1, y=2)'"),
    (
        "match P:\n    case type(__repr__=function, __getnewargs__=other):\n        function.__code__ = other.__code__",
        "assert '%r' % (f(1, 2),) == 'P(x=1, y=2)'",
    ),
    (
        "collections.Counter.most_common.__defaults__ = (1,)\ndef f(a, b):\n    return collections.Counter(a * 'a' + b * 'b')",
        "assert f(1, 2).most_common() == [('b', 2), ('a', 1)]",
    ),
    (
        "collections.Counter.__eq__.__code__ = (lambda self, other: False).__code__\n"
        "def f(a, b):\n    return collections.Counter(a * 'a')",
        "from collections import Counter\nassert f(2, 0) == Counter(a=2)",
    ),
    (  # Fraction's operator fallbacks: (fallback_operator, monomorphic_operator)
        "cells(fractions.Fraction.__add__)[1].cell_contents = lambda a, b: a\n"
        "def f(a, b):\n    return fractions.Fraction(a, b)",
        "from fractions import Fraction\nassert f(1, 2) + Fraction(1, 2) == 1",
    ),
]
WRONG_PROGRAMS = [
    HEAD + CELLS + change + "\n" + TAIL if "def f" not in change else HEAD + CELLS + change + "\n"
    for change, _ in WRONG
]
WRONG_TESTS = [test for _, test in WRONG]
# the same change in a later call, after the value crossed (R9-1b's rule, now for a function's state too)
WRONG_PROGRAMS.append(HEAD + CELLS + TAIL + "def spoil():\n    cells(P._asdict)[1].cell_contents = lambda n, v: []\n")
WRONG_TESTS.append("p = f(1, 2)\nspoil()\nassert p._asdict() == {'x': 1, 'y': 2}")
# namedtuples as programs use them: defaults, _replace, _make, typing.NamedTuple, one field, none; Counter, Fraction
# (a renamed field, ``_1``, does not cross: the judge takes namedtuple's rules without ``rename``)
RIGHT_PROGRAM = """import collections, fractions, typing
P = collections.namedtuple('P', 'x y')
D = collections.namedtuple('D', 'x y z', defaults=[0, 'z'])
One = collections.namedtuple('One', 'v')
Empty = collections.namedtuple('Empty', '')
class Q(typing.NamedTuple):
    a: int
    b: str = 'q'
def values():
    return P(1, 2), D(1), One(5), Empty(), Q(3), collections.Counter('aab'), fractions.Fraction(1, 3)
"""
RIGHT_TESTS = [
    "p, d, o, e, q, c, f = values()\nassert repr(p) == 'P(x=1, y=2)' and p._asdict() == {'x': 1, 'y': 2}\n"
    "assert p._replace(y=5) == (1, 5) and p._make([3, 4]) == (3, 4) and type(p)(7, 8).y == 8",
    "p, d, o, e, q, c, f = values()\nassert d == (1, 0, 'z') and repr(d) == \"D(x=1, y=0, z='z')\"\n"
    "assert d._replace(z=2) == (1, 0, 2) and o == (5,) and repr(o) == 'One(v=5)' and e == () and repr(e) == 'Empty()'",
    "p, d, o, e, q, c, f = values()\nassert q == (3, 'q') and q._replace(b='r') == (3, 'r')\n"
    "assert repr(q) == \"Q(a=3, b='q')\" and q._asdict() == {'a': 3, 'b': 'q'}",
    "p, d, o, e, q, c, f = values()\nassert c.most_common() == [('a', 2), ('b', 1)] and f + f == fractions_2_3\n".replace(
        "fractions_2_3", "type(f)(2, 3)"
    ),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(program, test) for program, test in zip(WRONG_PROGRAMS, WRONG_TESTS))
    assert all(cpython_passes(RIGHT_PROGRAM, test) for test in RIGHT_TESTS)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_a_library_function_with_re_pointed_state_is_not_the_genuine_one(launch, monkeypatch):
    sources = WRONG_PROGRAMS + [RIGHT_PROGRAM] * len(RIGHT_TESTS)
    scores, outcomes = grade_asserts(launch, sources, WRONG_TESTS + RIGHT_TESTS, monkeypatch)
    expected = [0.0] * len(WRONG_TESTS) + [1.0] * len(RIGHT_TESTS)
    assert scores == expected, list(zip(WRONG_TESTS + RIGHT_TESTS, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
