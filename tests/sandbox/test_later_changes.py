"""Class 9 (red team R9-1, R9-1b, R9-10, R9-12): a value of a program's builtin subclass (``class Tag(str)``) or a
library value the judge rebuilds (a namedtuple, a Counter) crossed once, at its record; a LATER program call that
changes it (its own attribute, its class's method, ``__class__``, a global its ``repr`` reads, a list subclass the
program appends to, the namedtuple class, ``Counter.most_common``) must never let a wrong program pass. A subclass
value is answered only until the program's next call (a later read refuses the test); a later change of a crossed
library class fails the call that made it; the judge's class never answers ``__slots__``/``__module__`` of its
own. Through ``CodeTests`` on the assert path, the per-run bwrap launch and landlock's fork server, one batch each."""

from __future__ import annotations

import operator

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.program_sets import subclass_value

TAG = "class Tag(str):\n    pass\n_last = []\ndef make(s):\n    t = Tag(s)\n    _last.append(t)\n    return t\n"
TAG += "def noop():\n    return 0\n"
LABELLED = "class Tag(str):\n    def __repr__(self):\n        return LABEL[0] + str.__str__(self)\nLABEL = ['x']\n"
LABELLED += "def make(s):\n    return Tag(s)\ndef relabel(k):\n    global LABEL\n    LABEL = [k]\n"
MONEY = "class Money(int):\n    pass\ndef price(n):\n    return Money(n)\n"
BAG = "class Bag(list):\n    pass\n_bag = Bag()\ndef bag():\n    return _bag\ndef put(v):\n    _bag.append(v)\n"
POINT = "import collections\nP = collections.namedtuple('P', 'x y')\ndef mk():\n    return P(1, 2)\n"
COUNTS = "import collections\ndef counts(s):\n    return collections.Counter(s)\n"
MODULE = "class Tag(str):\n    __module__ = 'lib'\ndef make(s):\n    return Tag(s)\n"
DICT = "class D(dict):\n    pass\ndef mkd():\n    return D(a=1)\n"
OWN_MODULE = "class Tag(str):\n    pass\ndef make(s):\n    t = Tag(s)\n    t.__module__ = 'lib'\n    return t\n"


def _with(program: str, body: str) -> str:
    return program + "def hack():\n" + "".join(f"    {line}\n" for line in body.split(";")) + "    return 0\n"


SWAP = _with(TAG, "class Evil(str):;    def upper(self):;        return 'no';_last[0].__class__ = Evil")
CASES = [  # (program, test, CPython's verdict): the wrong ones must score 0, the right ones 1
    (
        _with(TAG, "_last[0].upper = lambda: 'no'"),
        "ts = [make('abc')]\nhack()\nassert ts[0].upper() == 'ABC'\n",
        False,
    ),
    (
        _with(TAG, "Tag.upper = lambda self: 'no'"),
        "ts = {1: make('abc')}\nhack()\nassert ts[1].upper() == 'ABC'\n",
        False,
    ),
    (_with(TAG, "Tag.__len__ = lambda self: 0"), "ts = [make('abc')]\nhack()\nassert len(ts[0]) == 3\n", False),
    (_with(TAG, "Tag.__eq__ = lambda self, o: False"), "ts = [make('a')]\nhack()\nassert 'a' in ts\n", False),
    (_with(MONEY, "Money.__radd__ = lambda self, o: 0"), "ms = [price(5)]\nhack()\nassert 1 + ms[0] == 6\n", False),
    (
        SWAP,
        "ts = [make('abc')]\nhack()\nassert ts[0].upper() == 'ABC'\n",
        False,
    ),
    (LABELLED, "ts = [make('a')]\nrelabel('y')\nassert repr(ts[0]) == 'xa'\n", False),
    (SWAP, "ts = [make('abc')]\nhack()\nassert type(ts[0]).__name__ == 'Tag'\n", False),  # type() is not guarded
    (
        _with(TAG, "Tag.upper = lambda self: 'no'"),
        "t = [make('a')]\nhack()\nassert type(t[0]).upper(t[0]) == 'A'\n",
        False,
    ),
    (_with(TAG, "Tag.upper = lambda self: 'no'"), "assert (make('abc'), hack())[0].upper() == 'ABC'\n", False),
    (BAG, "xs = [bag()]\nput(3)\nassert xs[0] == []\n", False),
    (_with(POINT, "P.__repr__ = lambda self: 'no'"), "p = mk()\nhack()\nassert repr(p) == 'P(x=1, y=2)'\n", False),
    (_with(POINT, "P.x = property(lambda self: 9)"), "p = mk()\nhack()\nassert p.x == 1\n", False),
    (
        _with(COUNTS, "collections.Counter.most_common = lambda self, n=None: []"),
        "c = counts('aab')\nhack()\nassert c.most_common(1) == [('a', 2)]\n",
        False,
    ),
    (TAG, "assert hasattr(make('a'), '__slots__')\n", False),
    (MODULE, "assert type(make('a')).__module__ == '__main__'\n", False),
    (OWN_MODULE, "assert make('a').__module__ == '__main__'\n", False),
    # read before the program's next call, or a value derived from it, or a library class nobody changed
    (_with(TAG, "Tag.upper = lambda self: 'no'"), "t = [make('abc')]\nassert t[0].upper() == 'ABC'\nhack()\n", True),
    (_with(TAG, "Tag.upper = lambda self: 'no'"), "u = make('abc').upper()\nhack()\nassert u == 'ABC'\n", True),
    (TAG, "ts = [make('abc')]\nassert ts[0] == 'abc' and repr(ts[0]) == \"'abc'\"\nassert make('x') == 'x'\n", True),
    (_with(POINT, "Q = 1"), "p = mk()\nhack()\nassert repr(p) == 'P(x=1, y=2)' and p.x == 1\n", True),
    (_with(COUNTS, "Q = 1"), "c = counts('aab')\nhack()\nassert c.most_common(1) == [('a', 2)]\n", True),
    (
        DICT,
        "d = mkd()\nassert d['a'] == 1 and d == {'a': 1} and d.get('b') is None and type(d).__name__ == 'D'\n",
        True,
    ),
]
REFUSED = [  # CPython passes each; the judge cannot know the answer after the program's next call: refused
    (TAG, "ts = [make('abc')]\nnoop()\nassert ts[0].upper() == 'ABC'\n"),
    (BAG, "xs = [bag()]\nput(3)\nassert xs[0] == [3]\n"),
    (LABELLED, "ts = [make('a')]\nrelabel('y')\nassert repr(ts[0]) == 'ya'\n"),
    (TAG, "assert not hasattr(make('a'), '__slots__')\n"),
    (
        "class It:\n    __class__ = property(lambda self: list)\n    def __iter__(self):\n        return self\n"
        "    def __next__(self):\n        raise StopIteration\ndef f():\n    return It()\n",
        "assert isinstance(f(), list)\n",
    ),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test, _ in CASES] == [passes for _, _, passes in CASES]
    assert all(cpython_passes(program, test) for program, test in REFUSED)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_a_later_change_of_a_crossed_value_never_passes(launch, monkeypatch):
    sources, tests = [program for program, _, _ in CASES], [test for _, test, _ in CASES]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    assert scores == [float(passes) for _, _, passes in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
    sources, tests = [program for program, _ in REFUSED], [test for _, test in REFUSED]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    assert scores == [0.0] * len(REFUSED) and outcomes["code_tests/unsupported_test"] == 1.0, outcomes


def test_a_subclass_value_is_answered_until_the_next_call_only():
    calls, refused = [1], []

    def refuse(why: str) -> None:
        refused.append(why)
        raise LookupError(why)

    classes: dict = {"refuse": refuse, "now": lambda: calls[0]}
    tag = subclass_value(classes, [0, "Tag", "Tag", True], ["'abc'", "abc", None], "abc", 64)
    bag = subclass_value(classes, [1, "D", "D", True], ["{}", "{}", None], {"a": 1}, 64)
    assert tag.upper() == type(tag).upper(tag) == "ABC" and tag == "abc" and operator.eq("abc", tag) and len(tag) == 3
    assert bag == {"a": 1} and bag["a"] == 1 and list(bag) == ["a"] and repr(tag) == "'abc'"
    for read in ("__slots__", "__module__", "__dict__", "__doc__"):
        with pytest.raises(LookupError):
            getattr(tag, read)
    calls[0] += 1  # the program's next call
    reads = [
        lambda: tag.upper(),
        lambda: type(tag).upper(tag),
        lambda: tag == "abc",
        lambda: operator.eq("abc", tag),
        lambda: hash(tag),
    ]
    reads += [lambda: len(tag), lambda: repr(tag), lambda: f"{tag}", lambda: "x" + tag, lambda: "abc" in [tag]]
    reads += [lambda: bag["a"], lambda: list(bag), lambda: operator.eq({"a": 1}, bag), lambda: dict(bag)]
    for read in reads:
        with pytest.raises(LookupError):
            read()
    assert all("after a later call" in why for why in refused[-len(reads) :])
    assert str.upper(tag) == "ABC"  # the storage, read without the class: CPython's answer too
    fresh = subclass_value(classes, [0, "Tag", "Tag", True], ["'abc'", "abc", None], "abc", 64)
    assert type(fresh) is type(tag) and fresh.upper() == "ABC"  # a value of this call's record is answered
