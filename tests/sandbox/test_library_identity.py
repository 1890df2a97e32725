"""Class 9's library values cross by class identity: the harness captures the real Counter, OrderedDict, deque,
Fraction, Decimal, array and ``collections.namedtuple``'s methods when it loads, before the program runs. A
program class that only claims a library name (``__module__ = 'collections'``), or a program that replaces
``sys.modules['collections']``, crossed as the real library type, so the judge compared with the library's ``==``
instead of the program's own and a wrong program scored 1; so did a real library class the program patched
(``Counter.__eq__ = ...``) or a real OrderedDict holding its own ``keys``. Through ``CodeTests`` on the assert path with the
per-run bwrap launch and landlock through its fork server (docs/sandbox.md, "Plain data")."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

CLAIMS = """import collections, sys, types
def claiming(module, name, base=object):
    class Claim(base):
        def __eq__(self, other):
            return False
        __hash__ = None
    Claim.__module__, Claim.__qualname__, Claim.__name__ = module, name, name
    return Claim
Counter = claiming('collections', 'Counter', dict)
OrderedDict = claiming('collections', 'OrderedDict', dict)
class Fraction(claiming('fractions', 'Fraction')):
    numerator, denominator = 1, 2
Fraction.__module__, Fraction.__qualname__ = 'fractions', 'Fraction'
fake = types.ModuleType('collections')
fake.Counter = claiming('collections', 'Counter', dict)
sys.modules['collections'] = fake
def counter():
    return Counter(a=1)
def ordered():
    return OrderedDict(a=1)
def fraction():
    return Fraction()
def swapped():
    return fake.Counter(a=1)
"""
CLAIMS_WRONG = [
    "assert counter() == {'a': 1}",
    "assert ordered() == {'a': 1}",
    "from fractions import Fraction\nassert fraction() == Fraction(1, 2)",
    "assert swapped() == {'a': 1}",
]
# collections.namedtuple replaced in sys.modules before the harness first looked for it: the harness took its
# reference methods from the program's module, so a namedtuple with the program's own __eq__ matched them
NAMEDTUPLE = """import collections as real, sys, types
def namedtuple(*args, **kwargs):
    made = real.namedtuple(*args, **kwargs)
    made.__eq__ = lambda self, other: False
    return made
fake = types.ModuleType('collections')
fake.namedtuple = namedtuple
sys.modules['collections'] = fake
Point = namedtuple('Point', 'x y')
def point():
    return Point(1, 2)
"""
NAMEDTUPLE_WRONG = ["assert point() == (1, 2)"]
# the real classes changed by the program: the judge would answer with the library's methods
PATCHED = """import collections, fractions
collections.Counter.__eq__ = lambda self, other: False
fractions.Fraction.__eq__ = lambda self, other: False
def counter():
    return collections.Counter(a=1)
def fraction():
    return fractions.Fraction(1, 2)
def ordered():
    made = collections.OrderedDict(a=1)
    made.keys = lambda: ['z']
    return made
"""
PATCHED_WRONG = [
    "assert counter() == {'a': 1}",
    "from fractions import Fraction\nassert fraction() == Fraction(1, 2)",
    "assert list(ordered().keys()) == ['a']",
]
GENUINE = """import collections, decimal, fractions, sys, types
Point = collections.namedtuple('Point', 'x y')
real = (collections.Counter, collections.OrderedDict, collections.deque, collections.defaultdict)
sys.modules['collections'] = types.ModuleType('collections')
def values():
    counts, ordered, queue, default = real
    made = default(int)
    made['a'] += 1
    return counts('aab'), ordered(a=1), queue([1, 2]), made, fractions.Fraction(1, 2), decimal.Decimal('1.5')
def point():
    return Point(1, 2)
"""
GENUINE_RIGHT = [
    "c, o, q, d, f, m = values()\nassert c == {'a': 2, 'b': 1} and type(c).__name__ == 'Counter' and c['z'] == 0\n"
    "assert o == {'a': 1} and list(q) == [1, 2] and d['zz'] == 0 and f == 0.5 and m * 2 == 3",
    "p = point()\nassert p == (1, 2) and p.x == 1 and p._asdict() == {'x': 1, 'y': 2} and repr(p) == 'Point(x=1, y=2)'",
]
# replacing sys.modules entries: the program's source no longer tells what its module and the builtins hold
# (red team R8b-1), so a test reading a builtin is refused; the same program without that line is judged
GENUINE_PLAIN = GENUINE.replace("sys.modules['collections'] = types.ModuleType('collections')\n", "")
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(CLAIMS, test) for test in CLAIMS_WRONG)
    assert not any(cpython_passes(NAMEDTUPLE, test) for test in NAMEDTUPLE_WRONG)
    assert not any(cpython_passes(PATCHED, test) for test in PATCHED_WRONG)
    assert all(cpython_passes(GENUINE, test) and cpython_passes(GENUINE_PLAIN, test) for test in GENUINE_RIGHT)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_a_claimed_library_name_crosses_as_the_program_class(launch, monkeypatch):
    tests = CLAIMS_WRONG + NAMEDTUPLE_WRONG + PATCHED_WRONG + GENUINE_RIGHT
    sources = [CLAIMS] * len(CLAIMS_WRONG) + [NAMEDTUPLE] * len(NAMEDTUPLE_WRONG) + [PATCHED] * len(PATCHED_WRONG)
    sources += [GENUINE] * len(GENUINE_RIGHT) + [GENUINE_PLAIN] * len(GENUINE_RIGHT)
    scores, outcomes = grade_asserts(launch, sources, tests + GENUINE_RIGHT, monkeypatch)
    zeros = len(CLAIMS_WRONG + NAMEDTUPLE_WRONG + PATCHED_WRONG) + len(GENUINE_RIGHT)  # wrong, or refused
    assert GENUINE_PLAIN != GENUINE and scores == [0.0] * zeros + [1.0] * len(GENUINE_RIGHT), list(zip(tests, scores))
    refused = outcomes["code_tests/unsupported_test"] * len(scores)
    assert outcomes["code_tests/infra_error"] == 0.0 and refused >= len(GENUINE_RIGHT)
