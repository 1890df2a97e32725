"""Classes 8 and 9: a program's iterator keeps its class in the test. The judge's object for it is an instance of
one class per class of the run (its number, never its name), named as the program's class and subclassing the
judge's classes of its program bases; every generator is of one class, ``generator``, and a builtin iterator of
one class per builtin type. So ``type(a) is type(b)``, ``type(a) == type(b)``, ``isinstance(b, type(a))``,
``type(a).__name__`` and ``a.__class__`` give CPython's verdicts, through ``CodeTests`` on the assert path with the
per-run bwrap launch, landlock through its fork server and ``sandbox-serve`` (docs/sandbox.md, "Live objects")."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.live import LiveObjects, ProgramIterator, iterator_class
from trl_ext.sandbox.plain_data import decode, decode_record
from trl_ext.sandbox.program_source import program_facts

PROGRAM = """class Count:
    def __init__(self):
        self.n = 0
    def __iter__(self):
        return self
    def __next__(self):
        self.n += 1
        if self.n > 2:
            raise StopIteration
        return self.n
class Other(Count):
    pass
Old = Count
class Count(Old):
    pass
def make():
    class Made:
        def __iter__(self):
            return self
        def __next__(self):
            raise StopIteration
    return Made
A, B = make(), make()
def old():
    return Old()
def other():
    return Other()
def new():
    return Count()
def a():
    return A()
def b():
    return B()
def gen():
    yield 1
def gen2():
    yield 2
def mapped():
    return map(abs, [1])
def filtered():
    return filter(None, [1])
def listed():
    return iter([1])
"""
WRONG = [  # CPython fails each; with one judge class for every program iterator, all but the last two passed
    "assert type(old()) is type(other())",
    "assert type(old()) == type(gen())",
    "assert type(a()) is type(b())",
    "assert type(mapped()) is type(filtered())",
    "assert type(mapped()) == type(listed())",
    "assert old().__class__ is new().__class__",
    "assert isinstance(old(), type(other()))",
    "assert type(gen()) is not type(gen2())",
    "assert type(old()).__name__ == 'Old'",
]
RIGHT = [  # CPython passes each; with one judge class, all but the first failed (and the SHIFTING test)
    "assert type(old()) is type(old()) and list(old()) == [1, 2] and list(other()) == [1, 2]",
    "assert type(old()) is not type(other()) and type(old()) != type(new())",
    "assert isinstance(other(), type(old())) and isinstance(new(), type(old()))\n"
    "assert not isinstance(old(), type(new()))",
    "assert type(old()).__name__ == type(new()).__name__ == 'Count' and type(other()).__name__ == 'Other'",
    "assert type(a()) is not type(b()) and type(a()).__qualname__ == 'make.<locals>.Made' == type(b()).__qualname__",
    "assert type(gen()) is type(gen2()) and type(gen()).__name__ == 'generator' and type(gen()) is not type(old())",
    "assert type(mapped()).__name__ == 'map' and type(listed()).__name__ == 'list_iterator'\n"
    "assert type(mapped()) is not type(filtered()) and type(mapped()) is type(mapped())",
    "it = other()\nassert it.__class__ is type(it) and type(it).__module__ == '__main__' and next(it) == 1",
    "assert issubclass(type(new()), type(old())) and not issubclass(type(old()), type(other()))",
]
# a first pass guesses f() > 0 and calls g(); the next run, without g(), must give h() the same record: the class
# numbers in an iterator's record may not depend on the calls a run makes first (the binding rule)
SHIFTING = """class Hidden1:
    def __iter__(self):
        return self
    def __next__(self):
        raise StopIteration
class Hidden2(Hidden1):
    pass
def f():
    return -1
def g():
    return Hidden1()
def h():
    return Hidden2()
"""
SHIFTING_TEST = """if f() > 0:
    assert list(g()) == []
it = h()
assert type(it).__name__ == "Hidden2" and type(it) is type(h()) and list(it) == []
"""
# a metaclass answers attribute reads on its classes: its properties hid a class's own protocol from the harness
# (a property __flags__ made a program class look builtin, so its __bool__ was never checked; a property __iter__
# hid the class's own __iter__; a property __dict__ hid an int subclass's own __eq__, which then crossed as its
# int), and a wrong program passed; the harness reads classes as CPython's protocols do
META = """import collections.abc
import enum
class Meta(type):
    @property
    def __flags__(cls):
        return 0
    @property
    def __iter__(cls):
        return lambda self: self
class Falsy(metaclass=Meta):
    def __iter__(self):
        return self
    def __next__(self):
        raise StopIteration
    def __bool__(self):
        return False
class Other(metaclass=Meta):
    def __init__(self):
        self.i = 0
    def __iter__(self):
        return iter([9])
    def __next__(self):
        self.i += 1
        if self.i > 3:
            raise StopIteration
        return self.i
class Abstract(collections.abc.Iterator):
    def __next__(self):
        raise StopIteration
class Hidden(type):
    @property
    def __dict__(cls):
        return {}
class Five(int, metaclass=Hidden):
    def __eq__(self, other):
        return False
    __hash__ = int.__hash__
class Color(enum.IntEnum):
    RED = 1
def five():
    return Five(5)
def red():
    return Color.RED
def falsy():
    return Falsy()
def other():
    return Other()
def abstract():
    return Abstract()
"""
META_WRONG = ["assert falsy()", "assert list(other()) == [1, 2, 3]", "assert five() == 5"]
META_RIGHT = ["assert red() == 1 and red() + 1 == 2"]
# a base the judge cannot rebuild (an ABC: its metaclass and registrations): refused (red team R8-7), never passed
META_REFUSED = ["assert type(abstract()).__name__ == 'Abstract' and list(abstract()) == [] and abstract()"]
LAUNCHES = [("bwrap", "0"), ("landlock", "1"), ("remote", "1")]
# PROGRAM defines Count twice (``Old = Count`` holds the first): the source cannot say which class statement a record
# names, so a test reaching those classes is refused (red team R8b-1: only the source is trusted), never judged
REDEFINED = ("old()", "other()", "new()")


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(PROGRAM, test) for test in WRONG)
    assert all(cpython_passes(PROGRAM, test) for test in RIGHT)
    assert cpython_passes(SHIFTING, SHIFTING_TEST)
    assert not any(cpython_passes(META, test) for test in META_WRONG)
    assert all(cpython_passes(META, test) for test in META_RIGHT + META_REFUSED)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_program_iterators_keep_their_class_through_code_tests(launch, monkeypatch, request):
    tests = WRONG + META_WRONG + RIGHT + [SHIFTING_TEST] + META_RIGHT + META_REFUSED
    sources = [PROGRAM] * len(WRONG) + [META] * len(META_WRONG) + [PROGRAM] * len(RIGHT) + [SHIFTING]
    sources += [META] * len(META_RIGHT + META_REFUSED)
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch, request)
    right = [0.0 if any(name in test for name in REDEFINED) else 1.0 for test in RIGHT]
    expected = [0.0] * len(WRONG + META_WRONG) + right + [1.0] * (1 + len(META_RIGHT)) + [0.0] * len(META_REFUSED)
    assert scores == expected, list(zip(tests, scores))
    assert right.count(1.0) == 2  # the made-in-a-call classes and the builtin iterator types
    assert outcomes["code_tests/infra_error"] == 0.0
    refused = len(META_REFUSED) + right.count(0.0)
    assert outcomes["code_tests/unsupported_test"] * len(tests) >= refused


def test_iterator_classes_are_one_per_class_number():
    made: dict = {"source": program_facts("class Count:\n    pass\ndef f():\n    class Child(Count):\n        pass\n")}
    count = iterator_class([["Count", "Count", "__main__", 3, ["object"], False]], made)
    again = iterator_class([["Count", "Count", "__main__", 3, ["object"], False]], made)
    other = iterator_class([["Count", "Count", "__main__", 4, ["object"], False]], made)
    child_entry = ["Child", "f.<locals>.Child", "__main__", 5, [3], False]
    child = iterator_class([child_entry, ["Count", "Count", "__main__", 3, ["object"], False]], made)
    mapped = iterator_class([["map", "map", "builtins", None]], made)
    generator = iterator_class(None, made)
    assert count is again and count is not other and count.__name__ == other.__name__ == "Count"
    assert issubclass(child, count) and not issubclass(child, other) and child.__qualname__ == "f.<locals>.Child"
    assert mapped is iterator_class([["map", "map", "builtins", None]], made) and mapped is not generator
    assert generator.__name__ == "generator" and generator.__module__ == "builtins"
    assert all(issubclass(k, ProgramIterator) for k in (count, other, child, mapped, generator))


FORGED = [
    [["C", "C", "__main__", -1]],
    [["C", "C", "__main__", 1 << 20]],
    [["C", "C", "__main__", "3"]],
    [["C", "C", "__main__", True]],
    [["C", "C", "__main__", 3.0]],
    [["C", "C", "__main__"]],
    [["", "C", "__main__", 3]],
    [["C", "C", 7, 3]],
    [["C", "x" * 201, "__main__", 3]],
    [["C", "C", "__main__", 3], ["map", "map", "builtins", None]],  # a builtin type as a program base
    [["map", "map", "builtins", None], ["C", "C", "__main__", 3]],
    [["C", "C", "__main__", 3]] * 17,
    [["C", "C", "__main__", 3, [4], False]],  # a base that is no later entry
    [["C", "C", "__main__", 3, [3], False]],  # its own base
    [["C", "C", "__main__", 3, [], False]],
    [["C", "C", "__main__", 3, ["object"], 1]],
    [["C", "C", "__main__", 3, ["int"], False]],
    [["C", "C", "__main__", 3, [4], False], ["B", "B", "__main__", 4, [3], False]],  # a cycle
    [["C", "C", "__main__", None, ["object"], False]],
    [],
    "C",
    [None],
]


@pytest.mark.parametrize("classes", FORGED)
def test_a_forged_iterator_class_is_a_malformed_record(classes):
    """A malformed class entry fails that call of the program (ValueError from the record), never anything else;
    the run's numbering stays as it was."""
    live = LiveObjects()
    table = {"source": program_facts("class C:\n    pass\n")}

    def made(number: int, chain: list | None) -> ProgramIterator:
        return live.iterator(number, chain, lambda n: None, lambda *args: None, table)

    with pytest.raises(ValueError):
        live.apply({"ok": True, "upd": [], "value": [{"gc": classes}]}, [], {"nans": {}, "live": made})
    assert live.graph == ({}, []) and not live.classes and list(table) == ["source"]
    entry = ["C", "C", "__main__", 3, ["object"], False]
    good = live.apply({"ok": True, "upd": [], "value": {"gc": [entry]}}, [], {"live": made})
    assert type(good).__name__ == "C" and live.graph[1][0]() is good and not live.generators
    for forged in ({"gen": 0}, {"gen": [entry]}, {"gc": None}, {"gc": 0}, {"g": 0}):
        with pytest.raises(ValueError):
            decode_record({"ok": True, "value": forged}, {"live": made, "refs": []})
    for outside in ({"gc": [entry]}, {"gen": None}):  # outside a run's objects (an exception's
        with pytest.raises(ValueError):  # attributes, a call test): no iterator stays in the sandbox there
            decode(outside)
    generator = live.apply({"ok": True, "upd": [], "value": {"gen": None}}, [], {"live": made})
    assert type(generator).__name__ == "generator" and live.generators == {1}


class _Refused(Exception):
    pass


def _refuse(why: str) -> None:
    raise _Refused(why)


def test_more_program_classes_than_the_bound_or_an_unbuildable_base_refuse_the_test():
    made: dict = {}
    for number in range(64):  # builtin iterator types: a bound per evaluation, malformed past it
        iterator_class([["C", f"C{number}", "m", None]], made)
    with pytest.raises(ValueError):
        iterator_class([["C", "C64", "m", None]], made)
    table: dict = {"refuse": _refuse, "source": program_facts("class C:\n    pass\nclass D:\n    pass\n")}
    # program classes: one table with the exception stand-ins, refused past it
    for number in range(256):
        iterator_class([["C", "C", "__main__", number, ["object"], False]], made, table)
    with pytest.raises(_Refused):
        iterator_class([["C", "C", "__main__", 256, ["object"], False]], made, table)
    known = iterator_class([["C", "C", "__main__", 255, ["object"], False]], made, table)
    assert known.__name__ == "C"  # a known one still is
    with pytest.raises(_Refused):  # the same number as another class: refused, never a second class
        iterator_class([["D", "D", "__main__", 255, ["object"], False]], made, table)
    with pytest.raises(_Refused):  # a base the judge cannot rebuild (a builtin base, a metaclass)
        iterator_class([["E", "E", "__main__", 300, [None], False]], made, {"refuse": _refuse})


def test_iterator_classes_keep_their_exact_bases_and_refuse_what_only_the_program_holds():
    source = "class Base1:\n    pass\nclass Base2:\n    x = 1\nclass It(Base1, Base2):\n    pass\n"
    table: dict = {"refuse": _refuse, "source": program_facts(source)}
    base1, base2 = (
        ["Base1", "Base1", "__main__", 1, ["object"], False],
        ["Base2", "Base2", "__main__", 2, ["object"], True],
    )
    it = iterator_class([["It", "It", "__main__", 3, [1, 2], False], base1, base2], {}, table)
    alone = iterator_class([base1], {}, table)
    assert [k.__name__ for k in it.__mro__[:3]] == ["It", "Base1", "Base2"] and issubclass(it, alone)
    made = it(lambda n: None, 0, lambda *args: None)
    with pytest.raises(_Refused):  # an attribute the program's object may hold
        made.limit  # noqa: B018
    with pytest.raises(_Refused):  # Base2 defines members of its own: hash, repr, == are the program's
        hash(made)
    plain = alone(lambda n: None, 1, lambda *args: None)
    assert hash(plain) == hash(plain) and plain == plain


# red team R8-7: the judge's iterator class is one per class number with the program class's exact bases; what the
# judge cannot rebuild or answer (a class attribute, an own __hash__/__repr__, an exception base) never passes
IT = "    def __iter__(self):\n        return self\n    def __next__(self):\n        raise StopIteration\n"
MIXIN = "class Base1:\n" + IT + "class Base2:\n    pass\nclass It(Base1, Base2):\n    pass\n"
MIXIN += "def f():\n    return Base1()\ndef g():\n    return It()\n"
R87_WRONG = [  # (program, test): CPython fails each
    (MIXIN, "assert not isinstance(g(), type(f()))"),
    ("class It:\n    limit = 3\n" + IT + "def f():\n    return It()\n", "assert not hasattr(f(), 'limit')"),
    (
        "class It:\n" + IT + "    def __hash__(self):\n        return 1\ndef f():\n    return It()\n",
        "assert hash(f()) != 1",
    ),
    (
        "class It:\n" + IT + "    def __repr__(self):\n        return 'It()'\ndef f():\n    return It()\n",
        "assert repr(f()) != 'It()'",
    ),  # fmt: skip
    ("class E(Exception):\n" + IT + "def f():\n    return E()\n", "assert not isinstance(f(), Exception)"),
]
R87_RIGHT = [(MIXIN, "assert isinstance(g(), type(f())) and type(g()).__mro__[1] is type(f())")]


@pytest.mark.parametrize("launch", LAUNCHES[:2], ids=["-".join(launch) for launch in LAUNCHES[:2]])
def test_iterator_classes_keep_their_bases_and_never_pass_what_the_judge_cannot_answer(launch, monkeypatch):
    cases = R87_WRONG + R87_RIGHT
    assert [cpython_passes(program, test) for program, test in cases] == [False] * len(R87_WRONG) + [True]
    scores, outcomes = grade_asserts(launch, [p for p, _ in cases], [t for _, t in cases], monkeypatch)
    assert scores == [0.0] * len(R87_WRONG) + [1.0], list(zip(cases, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
