"""Class 9: right answers are not scored 0. Counter, defaultdict, OrderedDict, deque, namedtuples, Fraction,
range and generators cross the sandbox boundary as tagged plain data (converted inside the sandbox) and are
rebuilt as the same standard types, so assert tests judge them exactly as CPython would: a differential test
runs the same assert tests in plain CPython and through the judge and requires identical verdicts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests._backends import ISOLATED
from trl_ext.rewards import CodeTests

PROGRAM = """
from collections import Counter, OrderedDict, defaultdict, deque, namedtuple
from fractions import Fraction
P = namedtuple("P", "x y")
def counts(s):
    return Counter(s)
def groups():
    d = defaultdict(list)
    d[1].append(2)
    return d
def ordered():
    return OrderedDict([(1, 2), (3, 4)])
def recent():
    d = OrderedDict(a=1, b=2)
    d.move_to_end("a")  # the order is the linked list's, not the dict's storage order
    return d
CACHE = OrderedDict(a=1, b=2)
def cache():
    return CACHE
def touch(key):
    CACHE.move_to_end(key)
def point():
    return P(1, 2)
def third():
    return Fraction(1, 3)
def upto(n):
    return range(n)
def gen(n):
    yield from range(n)
def strs():
    return map(str, [1, 2])
def window():
    return deque([1, 2], maxlen=3)
def int_keys():
    return {1: "a", 2: "b"}
def pair_set():
    return {1, 2}
def big():
    return 10**18 + 1
def negative_zero():
    return -0.0
def nan():
    return float("nan")
def yes():
    return True
def nested():
    return {"k": [Counter("ab"), (P(0, 1), range(2))]}
"""
# types recognised by category (iterators by protocol, views, subclasses keeping the base's ==), identity where
# == depends on it (NaN objects, the test's own argument containers), exception arguments, placeholder rounds
PROGRAM += """
import array, decimal, enum
class Color(enum.IntEnum):
    RED = 1
class Tag(str, enum.Enum):
    A = "a"
class Name(str):
    pass
class Loud(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
NAN = float("nan")
def rev(x):
    return reversed(x)
def chars(s):
    return iter(s)
def huge_range(n):
    return iter(range(n, n + 2))
def keys(d):
    return d.keys()
def values(d):
    return d.values()
def items(d):
    return d.items()
def dec():
    return decimal.Decimal("0.5")
def color():
    return Color.RED
def tag():
    return Tag.A
def name():
    return Name("ab")
def loud():
    return Loud("ab")
def buf():
    return bytearray(b"ab")
def arr():
    return array.array("i", [1, 2])
def view():
    return memoryview(b"ab")
def tally(s):
    d = defaultdict(lambda: 0)
    for c in s:
        d[c] += 1
    return d
def fail(x):
    raise ValueError("bad " + str(x))
def missing(d):
    return d["nope"]
def sort_inner(l):
    l[0].sort()
def swap_inner(l):
    l[0] = sorted(l[0])
def fill(t):
    t[0].append(1)
def same(l):
    return l
def same_nan():
    return NAN
def new_nan():
    return float("nan")
def dots():
    return ...
def pair(i):
    return i, i + 1
LOG = []
def tick():
    LOG.append(len(LOG))
    return LOG
"""
# the identity of the test's own arguments: aliases (one object passed twice, shared rows), a call that changes
# its argument and then raises (the change stays; the exception may carry the argument), cycles
PROGRAM += """
def push_first(a, b):
    a.append(1)
def set_first_row(g):
    g[0][0] = 1
def spoil(a):
    a.append(9)
    raise ValueError("bad input")
def spoil_with(a):
    a.append(2)
    raise ValueError(a)
def wrap_self(a):
    a.append(a)
def self_ref():
    a = []
    a.append(a)
    return a
def count_into(a, b):
    b.append(len(a))
def pop_row(g):
    g.pop()[0] = 5
def push(q):
    q.append(1)
def bump(c):
    c["a"] += 1
def add_to(d):
    d["k"].append(1)
"""
# values that cross as what they are, beyond ==: a set's order (a table that grew, then shrank), namedtuple classes
# (repr, type identity, attribute access), a subclass overriding what item access does (refused: the call fails)
PROGRAM += """
import typing
def shrunk():
    s = set(range(100))
    for i in range(100):
        if i not in (2, 9):
            s.discard(i)
    return s
def shrunk_frozen():
    return frozenset(shrunk())
def words():
    return {"pear", "fig", "kiwi", "plum", "lime", "date"}
def drop_fig(s):
    s.discard("fig")
    return len(s)
def grid():
    return [P(0, 1), P(2, 3)]
class Q(typing.NamedTuple):
    a: int
    b: str = "z"
    def both(self):
        return self.b * self.a
def q():
    return Q(2)
class Zero(dict):
    def __missing__(self, key):
        return 0
def zero():
    return Zero(a=1)
class Getter(dict):
    def get(self, key, default=None):
        return 7
def getter():
    return Getter(a=1)
class Shout(str):
    def upper(self):
        return "!"
def shout():
    return Shout("ab")
"""
# the program's exception classes (stand-in classes: `except MyErr`, subclasses, its own __str__), the attributes
# CPython's exceptions hold beyond their args, and a function's __name__ and __doc__
PROGRAM += """
class AppError(Exception):
    \"\"\"app failure\"\"\"
class NotFound(AppError):
    pass
class Coded(ValueError):
    def __str__(self):
        return "code " + str(self.args[0])
def lookup(k):
    raise NotFound(k)
def coded():
    raise Coded(7)
def plain_fail():
    raise ValueError("v")
def attr_fail():
    return None.x
def name_fail():
    return undefined_name_zz
def import_fail():
    import no_such_module_zz
def open_fail():
    return open("no_such_file_zz.txt")
def documented(a):
    \"\"\"adds one\"\"\"
    return a + 1
class WithCode(Exception):
    def __init__(self, code):
        super().__init__("boom")
        self.code = code
        self.where = [code]
def coded_fail():
    raise WithCode(7)
def caused():
    try:
        1 / 0
    except ZeroDivisionError as z:
        raise AppError("v") from z
def in_handler():
    try:
        {}["k"]
    except KeyError:
        raise ValueError("w")
"""
EXCEPTION_TESTS = [
    "try:\n    lookup(1)\nexcept AppError as e:\n    assert type(e) is NotFound and e.args == (1,) and str(e) == '1'",
    "try:\n    lookup(1)\nexcept NotFound:\n    pass\nelse:\n    assert False",
    "try:\n    plain_fail()\nexcept AppError:\n    pass\nexcept ValueError:\n    assert False",
    "try:\n    plain_fail()\nexcept (AppError, ValueError) as e:\n    assert not isinstance(e, AppError)",
    "assert issubclass(NotFound, AppError) and AppError.__doc__ == 'app failure' and NotFound.__name__ == 'NotFound'",
    "assert issubclass(AppError, ValueError)",
    "assert AppError('x').args == ('x',) and str(NotFound('y')) == 'y' and isinstance(NotFound(), AppError)",
    "try:\n    coded()\nexcept Coded as e:\n    assert str(e) == 'code 7' and e.args == (7,)",
    "try:\n    coded()\nexcept ValueError as e:\n    assert str(e) == '7'",
    "try:\n    attr_fail()\nexcept AttributeError as e:\n    assert e.name == 'x' and e.obj is None",
    "try:\n    attr_fail()\nexcept AttributeError as e:\n    assert e.name == 'y'",
    "try:\n    name_fail()\nexcept NameError as e:\n    assert e.name == 'undefined_name_zz'",
    "try:\n    import_fail()\nexcept ImportError as e:\n    assert e.name == 'no_such_module_zz' and e.path is None",
    "try:\n    open_fail()\nexcept FileNotFoundError as e:\n    assert e.filename == 'no_such_file_zz.txt' and e.errno == 2",
    "try:\n    open_fail()\nexcept OSError as e:\n    assert str(e).endswith(\"'no_such_file_zz.txt'\")",
    "assert documented.__doc__ == 'adds one' and documented.__name__ == 'documented' and documented(1) == 2",
    "assert documented.__doc__ is None",
    "try:\n    caused()\nexcept AppError as e:\n    c = e.__cause__\n"
    "    assert type(c) is ZeroDivisionError and c is e.__context__ and e.__suppress_context__",
    "try:\n    in_handler()\nexcept ValueError as e:\n    c = e.__context__\n"
    "    assert e.__cause__ is None and type(c) is KeyError and c.args == ('k',) and not e.__suppress_context__",
    "try:\n    plain_fail()\nexcept ValueError as e:\n    assert e.__context__ is not None",
    "try:\n    coded_fail()\nexcept WithCode as e:\n    assert e.code == 7 and e.where == [7] and str(e) == 'boom'",
    "try:\n    coded_fail()\nexcept Exception as e:\n    assert e.code == 8",
]
SHAPE_TESTS = [
    "assert list(shrunk()) == [2, 9]",
    "assert shrunk().pop() == 9",
    "assert str(shrunk()) == '{9, 2}'",
    "assert str(shrunk()) == '{2, 9}' and next(iter(shrunk())) == 2",
    "s = shrunk()\nassert s.pop() == 2 and s.pop() == 9 and not s",
    "assert list(shrunk_frozen()) == [2, 9] and repr(shrunk_frozen()) == 'frozenset({2, 9})'",
    "assert shrunk() == {9, 2} and shrunk() == frozenset({2, 9}) and isinstance(shrunk(), set)",
    "assert list(words()) == list(words()) and str(words()) == str(words())",
    "assert ', '.join(words()) == str(words())[2:-2].replace(\"'\", '')",
    "s = words()\nassert drop_fig(s) == 5 and 'fig' not in s and len(list(s)) == 5 and s == words() - {'fig'}",
    "s = shrunk()\nassert same(s) is s and list(same(s)) == [2, 9]",
    "assert repr(point()) == 'P(x=1, y=2)' and str(point()) == 'P(x=1, y=2)'",
    "assert str(point()) == '(1, 2)'",
    "assert type(grid()[0]) is type(grid()[1]) and type(point()).__name__ == 'P'",
    "a, b = grid()\nassert type(a)(5, 6).y == 6 and b._replace(x=9) == (9, 3)",
    "assert q().b == 'z' and repr(q()) == \"Q(a=2, b='z')\" and q() == (2, 'z')",
    "assert shout().upper() == 'AB'",
]
# values the judge cannot rebuild as CPython has them: a subclass overriding a method of its base (__missing__,
# get, upper) does not cross (the call fails), and a NamedTuple's own methods are not kept
REFUSED_TESTS = [
    "assert zero()['b'] == 0",
    "assert zero() == {'a': 1}",
    "assert getter().get('zz') == 7",
    "assert shout() == 'ab'",
    "assert q().both() == 'zz'",
]
TESTS = [
    'assert counts("aab") == {"a": 2, "b": 1}',
    'assert counts("aab") == Counter(a=2, b=1)',
    'assert counts("aab") == {"a": 2}',
    'assert counts("aab")["z"] == 0',
    'assert counts("aab").most_common(1) == [("a", 2)]',
    'assert isinstance(counts("ab"), dict) and type(counts("ab")) is Counter',
    "assert groups() == {1: [2]}",
    "assert groups()[5] == []",
    "assert groups() == {1: [3]}",
    "assert ordered() == OrderedDict([(3, 4), (1, 2)])",
    "assert ordered() == {3: 4, 1: 2}",
    "assert list(ordered()) == [1, 3]",
    "assert list(recent()) == ['b', 'a'] and recent() == OrderedDict(b=2, a=1)",
    "assert recent() == OrderedDict(a=1, b=2)",
    "c = cache()\ntouch('a')\nassert list(c) == ['b', 'a']",
    "c = cache()\ntouch('a')\nassert list(c) == ['a', 'b']",
    "assert point() == (1, 2)",
    "assert point().x == 1 and point()._fields == ('x', 'y')",
    "assert point() == [1, 2]",
    "assert third() == Fraction(2, 6)",
    "assert third() == 1 / 3",
    "assert third() * 3 == 1",
    "assert upto(3) == [0, 1, 2]",
    "assert list(upto(3)) == [0, 1, 2]",
    "assert upto(3) == range(0, 3) and len(upto(3)) == 3",
    "assert list(gen(3)) == [0, 1, 2]",
    "assert gen(3) == [0, 1, 2]",
    "assert sum(gen(4)) == 6 and next(gen(2)) == 0",
    "assert list(strs()) == ['1', '2']",
    "assert window() == deque([1, 2]) and window().maxlen == 3",
    "assert window() == [1, 2]",
    "assert int_keys() == {1: 'a', 2: 'b'}",
    "assert int_keys() == {'1': 'a', '2': 'b'}",
    "assert pair_set() == frozenset({1, 2})",
    "assert big() == 1e18",
    "assert big() == 10**18 + 1",
    "assert negative_zero() == 0 and str(negative_zero()) == '-0.0'",
    "assert nan() != nan()",
    "assert yes() == 1 and yes() is True",
    "assert nested() == {'k': [{'a': 1, 'b': 1}, ((0, 1), range(0, 2))]}",
    "assert nested() == {'k': [{'a': 1, 'b': 1}, ((0, 1), [0, 1])]}",
    "assert list(rev([1, 2, 3])) == [3, 2, 1]",
    "assert list(rev({1: 2, 3: 4})) == [3, 1]",
    "assert list(chars('\u00e91')) == ['\u00e9', '1']",
    "assert list(huge_range(2**70)) == [2**70, 2**70 + 1]",
    "assert rev([1]) == [1]",
    "assert keys({1: 2, 3: 4}) == {1, 3}",
    "assert keys({1: 2}) == [1]",
    "assert sorted(values({1: 2, 3: 4})) == [2, 4]",
    "assert values({1: 2}) == values({1: 2})",
    "assert items({1: 2}) == {(1, 2)} and list(items({3: 4})) == [(3, 4)]",
    "assert dec() == 0.5 and dec() == Fraction(1, 2)",
    "assert dec() == 0.25",
    "assert color() == 1 and color() + 1 == 2 and {color(): 'x'}[1] == 'x'",
    "assert color() == 2",
    "assert tag() == 'a'",
    "assert name() == 'ab' and name().upper() == 'AB'",
    "assert buf() == b'ab' and buf() == bytearray(b'ab')",
    "assert list(arr()) == [1, 2] and arr() != [1, 2]",
    "assert view() == b'ab' and view() != b'ba'",
    "assert tally('aab')['z'] == 0 and tally('aab')['a'] == 2",
    "assert point()._asdict() == {'x': 1, 'y': 2} and point()._replace(x=5) == (5, 2)",
    "try:\n    fail(1)\nexcept ValueError as e:\n    assert str(e) == 'bad 1'\nelse:\n    assert False",
    "try:\n    fail(1)\nexcept ValueError as e:\n    assert str(e) == 'bad 2'",
    "try:\n    missing({})\nexcept KeyError as e:\n    assert e.args == ('nope',)",
    "l = [[2, 1]]\ninner = l[0]\nsort_inner(l)\nassert inner == [1, 2]",
    "l = [[2, 1]]\ninner = l[0]\nswap_inner(l)\nassert inner == [1, 2]",
    "l = [[2, 1]]\nswap_inner(l)\nassert l == [[1, 2]]",
    "a = []\nfill((a,))\nassert a == [1]",
    "a = [1]\nassert same(a) is a",
    "assert [same_nan()] == [same_nan()]",
    "assert [new_nan()] == [new_nan()]",
    "assert dots() is Ellipsis",
    "for i in range(8):\n    x, y = pair(i)\n    assert y - x == 1",
    "for i in range(8):\n    assert max(pair(i)) == i + 2",
    "a = tick()\nb = tick()\nassert a == [0]",
    "a = tick()\nb = tick()\nassert a is b and a == [0, 1]",
    "a = [1]\nassert same(a) is not a",
    "x = []\npush_first(x, x)\nassert x == [1]",
    "x = []\npush_first(x, x)\nassert x == []",
    "x = []\npush_first(x, [x])\nassert x == [1]",
    "r = [0, 0]\ng = [r, r]\nset_first_row(g)\nassert g == [[1, 0], [1, 0]] and g[0] is g[1] is r",
    "r = [0, 0]\ng = [r, r]\nset_first_row(g)\nassert g[1] == [0, 0]",
    "r = [0]\nd = {'a': r, 'b': (r,)}\nset_first_row([d['b'][0]])\nassert d == {'a': [1], 'b': ([1],)}",
    "x = []\ncount_into(x, b=x)\nassert x == [0]",
    "r = [0]\ng = [[1], r]\npop_row(g)\nassert r == [5] and g == [[1]]",
    "x = [1]\ntry:\n    spoil(x)\nexcept ValueError:\n    pass\nassert x == [1]",
    "x = [1]\ntry:\n    spoil(x)\nexcept ValueError:\n    pass\nassert x == [1, 9]",
    "x = [1]\ntry:\n    spoil_with(x)\nexcept ValueError as e:\n    assert e.args[0] is x and x == [1, 2]",
    "x = [1]\ntry:\n    spoil_with(x)\nexcept ValueError as e:\n    assert e.args[0] is not x",
    "x = []\nwrap_self(x)\nassert x[0] is x and len(x) == 1",
    "a = self_ref()\nassert a[0] is a",
    "x = [0]\nx.append(x)\nset_first_row([x])\nassert x[0] == 1 and x[1] is x",
    "q = deque(maxlen=1)\npush(q)\nassert list(q) == [1]",
    "q = deque([0], maxlen=1)\npush(q)\nassert q == deque([0])",
    "q = deque()\nd = {'a': q}\npush(d['a'])\nassert d['a'] is q and q == deque([1]) and same(q) is q",
    "b = bytearray()\npush(b)\nassert b == bytearray([1])",
    "c = Counter(a=1)\nbump(c)\nassert c == Counter(a=2) and type(c) is Counter",
    "c = OrderedDict(a=1)\nbump(c)\nassert list(c.items()) == [('a', 2)] and type(c) is OrderedDict",
    "from collections import defaultdict\nd = defaultdict(list)\nadd_to(d)\nassert d == {'k': [1]} and d['z'] == []",
    *SHAPE_TESTS,
    *EXCEPTION_TESTS,
]
TEST_IMPORTS = "from collections import Counter, OrderedDict, deque\nfrom fractions import Fraction\n"

_PLAIN_CPYTHON = """
import json, sys
program, tests = json.load(sys.stdin)
verdicts = []
for test in tests:
    namespace = {"__name__": "__main__"}
    exec(program, namespace)
    try:
        exec(test, namespace)
        verdicts.append(1.0)
    except AssertionError:
        verdicts.append(0.0)
print(json.dumps(verdicts))
"""


def plain_cpython_verdicts(program: str, tests: list[str]) -> list[float]:
    """The verdict of each assert test run directly on the program in plain CPython (our own trusted code)."""
    done = subprocess.run([sys.executable, "-c", _PLAIN_CPYTHON], input=json.dumps([program, tests]),
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return json.loads(done.stdout)


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = plain_cpython_verdicts(PROGRAM, [TEST_IMPORTS + t for t in TESTS])
    assert 0 < sum(verdicts) < len(verdicts)  # the differential test below compares both outcomes


# rlimit is left out here: as root it runs programs under a sandbox uid that cannot read this machine's Python
# standard library (it lives under /root), so PROGRAM's `import collections` fails there for every test alike.
@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_the_judge_gives_the_verdicts_of_plain_cpython(backend):
    tests = [TEST_IMPORTS + t for t in TESTS]
    expected = plain_cpython_verdicts(PROGRAM, tests)
    specs = [{"kind": "assert", "code": t} for t in tests]
    judged = CodeTests(timeout_s=5.0)([f"```python\n{PROGRAM}\n```"] * len(specs), tests=specs)
    assert dict(zip(TESTS, judged)) == dict(zip(TESTS, expected))


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_a_value_whose_equality_is_the_programs_own_code_is_not_judged_by_it(backend):
    """The deliberate difference from plain CPython: a str subclass whose ``__eq__`` says True to anything passes
    there, but the judge never runs the program's code, so such a value cannot cross (a plain subclass does); nor
    can a subclass overriding any other method of its base; a NamedTuple's own methods are not kept."""
    # a class with code of its own: the test's instance is made by the program (a call: red team R8-11)
    tests = ["assert loud() == 'zz'", "assert name() == 'ab'", "assert str(Coded(3)) == 'code 3'", *REFUSED_TESTS]
    assert plain_cpython_verdicts(PROGRAM, tests) == [1.0] * len(tests)
    judged = CodeTests(timeout_s=5.0)(
        [f"```python\n{PROGRAM}\n```"] * len(tests), tests=[{"kind": "assert", "code": t} for t in tests]
    )
    assert judged == [0.0, 1.0, 1.0] + [0.0] * len(REFUSED_TESTS)


CALLS = [  # (function, expected JSON value, verdict): the documented rule for JSON expected values
    ("int_keys", {"1": "a", "2": "b"}, 1.0),  # int keys match JSON's string keys as JSON writes them
    ("colliding_keys", {"1": "a", "2": "a"}, 0.0),  # {1: .., "1": ..} writes one key twice: never a match
    ("bool_keys", {"true": 1, "null": 2}, 1.0),
    ("counts", {"a": 2, "b": 1}, 1.0),  # a Counter is a dict
    ("point", [1, 2], 1.0),  # JSON has no tuples: a tuple (a namedtuple too) matches a list
    ("third", 0.5, 0.0),
    ("half", 0.5, 1.0),  # Fraction(1, 2) == 0.5 exactly
    ("upto", [0, 1, 2], 0.0),  # range(3) != [0, 1, 2], as in CPython
    ("gen", [0, 1, 2], 0.0),  # a generator equals only itself
    ("dec", 0.5, 1.0),  # Decimal("0.5") == 0.5 exactly
    ("keys", [1], 0.0),  # a dict view is no list, as in CPython
]
CALL_PROGRAM = (
    PROGRAM
    + """
def colliding_keys():
    return {1: "a", "1": "a"}
def bool_keys():
    return {True: 1, None: 2}
def half():
    return Fraction(1, 2)
"""
)


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_call_tests_follow_the_json_key_rule(backend):
    specs = [
        {"kind": "call", "fn_name": name, "cases": [{"args": [3] if name in ("upto", "gen") else [], "expected": exp}]}
        for name, exp, _ in CALLS
    ]
    specs[3]["cases"][0]["args"] = ["aab"]
    specs[-1]["cases"][0]["args"] = [{"1": 2}]
    judged = CodeTests(timeout_s=5.0)([f"```python\n{CALL_PROGRAM}\n```"] * len(specs), tests=specs)
    assert dict(zip([c[0] for c in CALLS], judged)) == {name: verdict for name, _, verdict in CALLS}


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_a_test_that_only_reads_the_programs_names_runs_the_program(backend):
    """The program's names are described by a run (no call needed), and a program that does not load fails:
    `callable(f)` used to pass without any run, for a program that raised at import too."""
    tests = ["assert callable(documented) and documented.__doc__ == 'adds one'", "assert documented.__doc__ is None"]
    broken = PROGRAM + "\nraise SystemExit(3)\n"
    assert plain_cpython_verdicts(PROGRAM, tests) == [1.0, 0.0]
    judged = CodeTests(timeout_s=5.0)(
        [f"```python\n{p}\n```" for p in (PROGRAM, PROGRAM, broken)],
        tests=[{"kind": "assert", "code": t} for t in (*tests, tests[0])],
    )
    assert judged == [1.0, 0.0, 0.0]
