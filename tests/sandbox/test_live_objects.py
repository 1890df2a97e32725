"""Class 8/9, live objects (red team round 5): in one interpreter the test and the program share their objects for
the whole test. A container the program keeps (an argument it stored, a list, dict or view it returned) and
changes in a later call, a change the test makes to an object the program keeps (also one made and then
dropped), and generators (which read lazily, raise after an item, run their ``finally`` when dropped) must give the
verdict plain CPython gives: a differential test on every isolated backend."""

from __future__ import annotations

import pytest

from tests._backends import ISOLATED
from tests.sandbox.test_rich_values import plain_cpython_verdicts
from trl_ext.rewards import CodeTests

# live objects (red team round 5): what the program keeps and changes in a later call, what the test changes in
# an object the program keeps, and iterators the program returns, which run when the test asks for an item
PROGRAM = """
import array
def gen(n):
    yield from range(n)
def arr():
    return array.array("i", [1, 2])
KEPT = []
def keep(a):
    KEPT.append(a)
def grow_kept():
    KEPT[-1].append(1)
def kept_size():
    return len(KEPT[-1])
def last_kept():
    return KEPT[-1]
def kept_twice():
    return KEPT[0] is KEPT[1]
def drop_kept():
    KEPT.pop().append("last")
SHELF, INDEX = [], {}
def shelf():
    return SHELF
def stow(v):
    SHELF.append(v)
def shelf_size():
    return len(SHELF)
def index():
    return INDEX
def enter(k, v):
    INDEX[k] = v
class Table(dict):
    pass
KEPT_TABLE = Table(a=1)
def table():
    return [KEPT_TABLE, KEPT_TABLE, [1]]
def index_keys():
    return INDEX.keys()
def index_items():
    return INDEX.items()
def each(a):
    for v in a:
        yield v
LEVEL = [0]
def level():
    yield LEVEL[0]
def raise_level():
    LEVEL[0] += 1
def one_then_fail():
    yield 1
    raise ValueError("after one")
def guarded(x):
    try:
        yield 1
        yield 2
    finally:
        x.append("closed")
TRAIL = []
def trail():
    return TRAIL
def traced():
    TRAIL.append("started")
    yield 1
def first_of(it):
    return next(it)
def counted(n):
    return iter(range(n))
SCORES = {"a": 0, "b": 0, "c": 0}
def scores():
    return SCORES
def bump(k):
    SCORES[k] += 1
from collections import deque
LINE = deque([1, 2, 3])
def line():
    return LINE
def double(i):
    LINE[i] *= 2
"""
TESTS = [
    "x = []\nkeep(x)\ngrow_kept()\nassert x == [1]",
    "x = []\nkeep(x)\ngrow_kept()\nassert x == []",
    "a = shelf()\nstow(5)\nassert a == [5]",
    "a = shelf()\nstow(5)\nassert a == []",
    "d = index()\nenter('k', 1)\nassert d == {'k': 1}",
    "d = index()\nenter('k', 1)\nassert d == {}",
    "x = [1]\ng = each(x)\nx.append(2)\nassert list(g) == [1, 2]",
    "x = [1]\ng = each(x)\nx.append(2)\nassert list(g) == [1]",
    "g = level()\nraise_level()\nassert next(g) == 1",
    "g = level()\nraise_level()\nassert next(g) == 0",
    "assert next(one_then_fail()) == 1",
    "g = one_then_fail()\nnext(g)\ntry:\n    next(g)\nexcept ValueError as e:\n    assert str(e) == 'after one'\nelse:\n    assert False",
    "g = one_then_fail()\nnext(g)\ntry:\n    next(g)\nexcept ValueError:\n    assert False\nexcept StopIteration:\n    pass",
    "x = []\nkeep(x)\nx.append(7)\nassert kept_size() == 1",
    "x = []\nkeep(x)\nx.append(7)\nassert kept_size() == 0",
    "x = []\nkeep(x)\nassert last_kept() is x",
    "x = []\nkeep(x)\nassert last_kept() is not x",
    "x = []\nkeep(x)\nkeep(x)\nassert kept_twice()",
    "a = shelf()\na.append(3)\nstow(4)\nassert shelf() is a and a == [3, 4]",
    "a = shelf()\na.append(3)\nstow(4)\nassert a == [4]",
    "x = []\nnext(guarded(x))\nassert x == ['closed']",
    "x = []\nnext(guarded(x))\nassert x == []",
    "x = []\ng = guarded(x)\nnext(g)\nassert x == []",
    "x = []\ng = guarded(x)\nassert list(g) == [1, 2] and x == ['closed']",
    "g = traced()\nassert trail() == []",
    "g = traced()\nassert trail() == ['started']",
    "g = traced()\nnext(g)\nassert trail() == ['started']",
    "g = each([1, 2])\nassert first_of(g) == 1 and next(g) == 2",
    "g = each([1, 2])\nassert first_of(g) == 1 and list(g) == [1, 2]",
    "assert sum(counted(100)) == 4950 and max(counted(40)) == 39",
    "r = [0]\nkeep([r])\nr.append(1)\ngrow_kept()\nassert last_kept() == [[0, 1], 1]",
    "k = index_keys()\nenter('a', 1)\nassert list(k) == ['a'] and k == {'a'}",
    "k = index_keys()\nenter('a', 1)\nassert len(k) == 0",
    "v = index_items()\nd = index()\nd['b'] = 2\nassert v == {('b', 2)} and index_items() == v",
    "t = table()\nassert t[0] == {'a': 1} and t[2] == [1] and stow(t[2]) is None and shelf()[0] is t[2]",
    "x = []\ng = guarded(x)\nnext(g)\ng.close()\nassert x == ['closed']",
    "a = arr()\na.append(3)\nkeep(a)\nassert last_kept() is a and kept_size() == 3",
    "for i in range(12):\n    assert list(gen(i)) == list(range(i))",
    "for i in range(12):\n    assert list(gen(i)) == list(range(i + 1))",
    "g = each([1, 2, 3])\nassert next(g) == 1 and shelf() == [] and list(g) == [2, 3]",
    "g = each([1, 2, 3])\nassert next(g) == 1 and shelf() == [] and list(g) == [1, 2, 3]",
    "x = []\nkeep(x)\ndrop_kept()\nassert x == ['last']",
    "x = []\nkeep(x)\ndrop_kept()\nassert x == []",
    "a = shelf()\na.append(1)\ndel a\nassert shelf_size() == 1",
    "a = shelf()\na.append(1)\ndel a\nassert shelf_size() == 0",
    # a value changed in place while the test iterates: no rebuild under the test's iterator (a dict with a hole)
    "d = scores()\ndel d['a']\nseen = []\nfor k in d:\n    seen.append(k)\n    bump(k)\nassert seen == ['b', 'c']",
    "d = scores()\ndel d['a']\nseen = []\nfor k in d:\n    seen.append(k)\n    bump(k)\nassert seen == ['b']",
    "q = line()\nout = []\nfor i, v in enumerate(q):\n    out.append(v)\n    double(i)\nassert list(q) == [2, 4, 6]",
    "d = scores()\nd['z'] = 0\nbump('z')\nassert list(d.items()) == [('a', 0), ('b', 0), ('c', 0), ('z', 1)]",
]


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = plain_cpython_verdicts(PROGRAM, TESTS)
    assert 0 < sum(verdicts) < len(verdicts)  # the differential test below compares both outcomes


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_the_judge_gives_the_verdicts_of_plain_cpython_on_live_objects(backend):
    expected = plain_cpython_verdicts(PROGRAM, TESTS)
    specs = [{"kind": "assert", "code": t} for t in TESTS]
    judged = CodeTests(timeout_s=5.0)([f"```python\n{PROGRAM}\n```"] * len(specs), tests=specs)
    assert dict(zip(TESTS, judged)) == dict(zip(TESTS, expected))
