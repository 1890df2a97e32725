"""Classes 8 and 1: the judge's stand-ins of the program's exception classes are one per class object of the run,
never one per name. A class redefined under its old name, or two classes a factory makes, are two classes in the
test as in CPython (``except MyErr`` catches the new one only), and one class raised twice is one stand-in. Same
verdicts as plain CPython, through ``CodeTests`` on the assert path, with the per-run bwrap launch, landlock
through its fork server and ``sandbox-serve`` (docs/sandbox.md, R6-7b)."""

from __future__ import annotations

import functools
import re

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.program_exceptions import _MAX_CLASSES, _exception_class, exception_details, shadowed_reads
from trl_ext.sandbox.program_source import program_facts
from trl_ext.sandbox.records import RunHistory, _described_names

REDEFINED = """class MyErr(Exception):
    pass
Old = MyErr
class MyErr(Exception):
    pass
class Base(Exception):
    pass
class Child(Base):
    pass
class Base(Exception):
    pass
def make():
    class Made(ValueError):
        pass
    return Made
A, B = make(), make()
def old():
    raise Old("x")
def new():
    raise MyErr("y")
def child():
    raise Child("c")
def a():
    raise A("a")
def b():
    raise B("b")
def chained():
    try:
        old()
    except Exception as exc:
        raise MyErr("z") from exc
def steps():
    yield 1
    raise Old("g")
Same = MyErr
"""
CAUGHT = "try:\n    {call}()\n    ok = False\nexcept {name}:\n    ok = True\nassert ok"
NOT_CAUGHT = "try:\n    {call}()\nexcept {name}:\n    raise AssertionError('caught')\nexcept Exception:\n    pass"
WRONG = [  # CPython fails each; a judge keying stand-ins by name passed each
    CAUGHT.format(call="old", name="MyErr"),
    CAUGHT.format(call="child", name="Base"),
    CAUGHT.format(call="b", name="A"),
    "try:\n    chained()\nexcept MyErr as e:\n    assert type(e.__cause__) is MyErr",
    "it = steps()\nnext(it)\ntry:\n    next(it)\n    ok = False\nexcept MyErr:\n    ok = True\nassert ok",
    "assert Old is MyErr",
]
RIGHT = [  # CPython passes each; a judge keying stand-ins by name failed all but the one catching new() and a()
    NOT_CAUGHT.format(call="old", name="MyErr"),
    NOT_CAUGHT.format(call="child", name="Base"),
    NOT_CAUGHT.format(call="b", name="A"),
    "try:\n    chained()\nexcept MyErr as e:\n    assert type(e.__cause__) is not MyErr and str(e.__cause__) == 'x'",
    "it = steps()\nnext(it)\ntry:\n    next(it)\nexcept MyErr:\n    raise AssertionError\nexcept Old as e:\n    assert str(e) == 'g'",
    "assert Old is not MyErr and Same is MyErr and Old.__name__ == MyErr.__name__ and issubclass(Old, Exception)",
    CAUGHT.format(call="new", name="MyErr") + "\n" + CAUGHT.format(call="a", name="A"),
    "def kind(fn):\n    try:\n        fn()\n    except Exception as e:\n        return type(e)\n"
    "assert kind(old) is kind(old) and kind(old) is not kind(new) and kind(a) is not kind(b)\n"
    "assert kind(old).__name__ == kind(new).__name__ == 'MyErr' and issubclass(kind(b), ValueError)",
]
# red team round 7: the stand-ins keep each class's exact bases (mixins, diamonds, two builtin bases); where the
# judge cannot rebuild a class exactly (more classes than its cap, a group whose exceptions do not cross, a class
# renamed or rebased during the run) it refuses the test: never a class with fewer relations
BASES = """import json
class AppError(Exception):
    pass
class NotFound(AppError, KeyError):
    pass
class A(Exception):
    pass
class B(Exception):
    pass
class C(A, B):
    pass
class Both(KeyError, TypeError):
    pass
class E(TypeError):
    pass
def nf():
    raise NotFound("k")
def diamond():
    raise C("x")
def both():
    raise Both("x")
def per(i):
    class Per(KeyError):
        pass
    raise Per(i)
def group():
    raise ExceptionGroup("g", [ValueError(1), TypeError(2)])
class Done(StopIteration):
    pass
def done():
    raise Done("x")
def lib():
    json.loads("{")
"""
BASES_WRONG = [
    NOT_CAUGHT.format(call="nf", name="AppError"),
    NOT_CAUGHT.format(call="diamond", name="A"),
    NOT_CAUGHT.format(call="both", name="TypeError"),
    "bad = False\ntry:\n    group()\nexcept* ValueError:\n    bad = True\nexcept* Exception:\n    pass\nassert not bad",
    NOT_CAUGHT.format(call="done", name="StopIteration"),  # a call's StopIteration stays one (PEP 479: generators)
    "import json\n" + NOT_CAUGHT.format(call="lib", name="json.JSONDecodeError"),  # a library's class: refused
]
BASES_RIGHT = [
    CAUGHT.format(call="nf", name="AppError") + "\n" + CAUGHT.format(call="nf", name="KeyError"),
    CAUGHT.format(call="diamond", name="A")
    + "\nassert issubclass(C, A) and issubclass(C, B) and not issubclass(A, B)",
    CAUGHT.format(call="both", name="TypeError") + "\nassert Both.__mro__[1:] == (KeyError, LookupError, TypeError, "
    "Exception, BaseException, object)",
    "kinds = set()\nfor i in range(100):\n    try:\n        per(i)\n    except KeyError as e:\n        kinds.add(type(e))\n"
    "assert len(kinds) == 100",
    CAUGHT.format(call="done", name="Done"),
]
# a class whose bases or name the program changes, or whose base is an expression: its relations are not the
# source's, so the test is refused (red team R8b-1: a class statement is what the judge trusts, never the run)
DYNAMIC = """class E(TypeError):
    pass
def rebased():
    E.__bases__ = (ValueError,)
    raise E("x")
def renamed():
    E.__name__ = "Renamed"
    raise E("y")
def per(i):
    class Per(ValueError if i >= 260 else KeyError):
        pass
    raise Per(i)
"""
DYNAMIC_WRONG = [
    NOT_CAUGHT.format(call="rebased", name="E"),
    "try:\n    renamed()\nexcept Exception as e:\n    assert type(e).__name__ == 'E'",
    "for i in range(270):\n    try:\n        per(i)\n    except ValueError:\n        raise AssertionError(i)\n"
    "    except Exception:\n        pass",
]
# a first pass guesses f() > 0 and calls g(); the next run, without g(), must give h() the same record: a class's
# number may not depend on the calls a run makes first (the module's classes are numbered once it has loaded)
SHIFTING = """import collections
class Hidden1(Exception):
    pass
class Hidden2(Exception):
    pass
Pair = collections.namedtuple("Pair", "a b")
def f():
    return -1
def g():
    raise Hidden1()
def h():
    raise Hidden2(Pair(1, 2))
"""
SHIFTING_TEST = """if f() > 0:
    try:
        g()
    except Exception:
        pass
try:
    h()
except Exception as e:
    assert type(e).__name__ == "Hidden2" and e.args[0].b == 2 and type(e.args[0]).__name__ == "Pair"
"""
# classes numbered where they first cross (in a namespace class, made in a call): the binding rule compares
# records up to a consistent renaming of class numbers (red team R7-2)
NESTED = """def f():
    return -1
class Errors:
    class A(Exception):
        pass
    class B(KeyError):
        pass
def g():
    class Made(Exception):
        pass
    raise Errors.A(Made())
def h():
    raise Errors.B("k")
def j():
    class Late(ValueError):
        pass
    raise Late()
"""
NESTED_TEST = SHIFTING_TEST.replace('"Hidden2"', '"B" and isinstance(e, KeyError)').replace(
    ' and e.args[0].b == 2 and type(e.args[0]).__name__ == "Pair"', ""
)
NESTED_TEST += "try:\n    j()\nexcept ValueError as e:\n    assert type(e).__name__ == 'Late'\n"
# the test runs in the program's module in CPython: a builtin name the program rebinds is the program's object
# there (red team R7-5); the judge refuses a test that reads one, and judges one that reads none
SHADOW = "Exception = KeyError\nlen = None\ndef f():\n    raise TypeError('x')\ndef g():\n    raise ValueError('v')\n"
SHADOW_WRONG = "try:\n    f()\nexcept Exception:\n    pass"
SHADOW_RIGHT = "try:\n    g()\nexcept ValueError:\n    pass\nassert __name__ == '__main__'"
_NAME = re.compile(r"\w+")
_TWICE = {"MyErr", "Base", "Old", "Same", "old", "new", "child", "chained", "steps"}
# (backend, fork server): the per-run bwrap launch, landlock's fork server (the suite's default is fork servers)
# and sandbox-serve (the session's server, with its own default)
LAUNCHES = [("bwrap", "0"), ("landlock", "1"), ("remote", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(REDEFINED, test) for test in WRONG)
    assert all(cpython_passes(REDEFINED, test) for test in RIGHT)
    assert cpython_passes(SHIFTING, SHIFTING_TEST)
    assert cpython_passes(NESTED, NESTED_TEST) and "B" in NESTED_TEST
    assert not cpython_passes(SHADOW, SHADOW_WRONG) and cpython_passes(SHADOW, SHADOW_RIGHT)
    assert not any(cpython_passes(BASES, test) for test in BASES_WRONG)
    assert not any(cpython_passes(DYNAMIC, test) for test in DYNAMIC_WRONG)
    assert all(cpython_passes(BASES, test) for test in BASES_RIGHT)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_program_exception_classes_keep_their_identity_through_code_tests(launch, monkeypatch, request):
    tests = WRONG + RIGHT + [SHIFTING_TEST, NESTED_TEST]
    sources = [REDEFINED] * (len(tests) - 2) + [SHIFTING, NESTED]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch, request)
    # MyErr and Base are defined twice (Old, Same: other names of them): the source cannot say which class
    # statement a record names, so a test reaching them is refused (red team R8b-1), never judged either way
    right = [0.0 if set(_NAME.findall(test)) & _TWICE else 1.0 for test in RIGHT]
    assert scores == [0.0] * len(WRONG) + right + [1.0, 1.0], list(zip(tests, scores))
    assert right.count(1.0) == 1 and outcomes["code_tests/infra_error"] == 0.0
    tests = BASES_WRONG + DYNAMIC_WRONG + BASES_RIGHT + [SHADOW_WRONG, SHADOW_RIGHT]
    sources = [BASES] * len(BASES_WRONG) + [DYNAMIC] * len(DYNAMIC_WRONG) + [BASES] * len(BASES_RIGHT) + [SHADOW] * 2
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch, request)
    wrong = len(BASES_WRONG + DYNAMIC_WRONG)
    assert scores == [0.0] * wrong + [1.0] * len(BASES_RIGHT) + [0.0, 1.0], list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0


STAND_IN_SOURCE = """class MyErr(ValueError):
    pass
class Child(MyErr):
    pass
class AppError(Exception):
    pass
class NotFound(AppError, KeyError):
    pass
class Owner(ValueError):
    def __init__(self):
        pass
class Sub(Owner):
    pass
class Per(ValueError):
    pass
"""


def test_stand_ins_are_one_per_class_number_with_exact_bases_and_a_forged_record_is_malformed():
    refused: list = []

    def refuse(why: str) -> None:
        refused.append(why)
        raise LookupError(why)

    classes: dict = {"refuse": refuse, "source": program_facts(STAND_IN_SOURCE)}
    first = _exception_class([["MyErr", False, 0, ["ValueError"]]], None, classes)
    again = _exception_class([["MyErr", False, 0, ["ValueError"]]], None, classes, "doc")
    other = _exception_class([["MyErr", False, 1, ["ValueError"]]], None, classes)
    child = _exception_class([["Child", False, 2, [0]], ["MyErr", False, 0, ["ValueError"]]], None, classes)
    mixin = [["NotFound", False, 3, [4, "KeyError"]], ["AppError", False, 4, ["Exception"]]]
    not_found, app = _exception_class(mixin, None, classes), _exception_class(mixin[1:], None, classes)
    assert first is again and first is not other and first.__name__ == other.__name__ == "MyErr"
    assert issubclass(child, first) and not issubclass(child, other)
    assert not_found.__mro__[1:] == (app, KeyError, LookupError, Exception, BaseException, object)
    owned = [["Sub", False, 5, [6]], ["Owner", True, 6, ["ValueError"]]]  # Owner defines __init__: Sub runs it
    assert _exception_class(owned, None, classes)._trl_ext_own and not not_found._trl_ext_own
    for changed in (["MyErr", False, 0, ["TypeError"]], ["Renamed", False, 0, ["ValueError"]]):  # mid-run
        with pytest.raises(LookupError):
            _exception_class([changed], None, classes)
    with pytest.raises(LookupError):  # a base the judge cannot rebuild (C code, a metaclass)
        _exception_class([["Lib", False, 9, [None]]], None, classes)
    assert len(refused) == 3 and not refused[-1].startswith("the test makes")
    with pytest.raises(LookupError):  # the test makes an instance of Sub: Owner's __init__ is the program's code
        _exception_class(owned, None, classes)("x")
    many: dict = {"refuse": refuse, "source": classes["source"]}
    for number in range(_MAX_CLASSES):
        _exception_class([["Per", False, number, ["ValueError"]]], None, many)
    with pytest.raises(LookupError):  # past the cap: refused, not a class without its builtin base
        _exception_class([["Per", False, _MAX_CLASSES, ["ValueError"]]], None, many)
    for number in (-1, 1 << 20, 10**30, "0", True, 0.0, None):
        record = {"ok": False, "raised": "ValueError", "cls": [["MyErr", False, number, ["ValueError"]]]}
        with pytest.raises(ValueError):
            exception_details(record, {"nans": {}, "classes": {}})
        entry = ["exc", [["E", False, number, ["ValueError"]]], "ValueError", None]
        assert _described_names({"names": [["E", entry]]}) is None
    for chain in FORGED_CHAINS:
        assert _described_names({"names": [["E", ["exc", chain, "ValueError", None]]]}) is None, chain
    assert _described_names({"names": [["E", ["exc", mixin, "ValueError", None]]]}) is not None


FORGED_CHAINS = [
    [["E", False, 3]],  # no bases
    [["E", False, 3, []]],
    [["E", False, 3, [3]]],  # its own base: a cycle
    [["E", False, 3, [4]], ["B", False, 4, [3]]],  # a base before it in the MRO: a cycle
    [["E", False, 3, [5]]],  # a base not in the chain
    [["E", False, 3, ["NoSuchError"]]],
    [["E", False, 3, [["ValueError"]]]],  # unhashable
    [["E", False, 3, ["ValueError"]], ["E", False, 3, ["ValueError"]]],  # one number twice
    [["E", False, 3, "ValueError"]],
]


def _raised(*numbers: int) -> dict:
    return {"ok": False, "raised": "KeyError", "cls": [["E", False, n, ["KeyError"]] for n in numbers[:1]]}


def test_the_binding_rule_holds_records_up_to_a_consistent_renaming_of_class_numbers():
    calls = [["f", [], {}, []], ["g", [], {}, []], ["h", [], {}, []], ["k", [], {}, []]]
    first = [{"ok": True, "value": 1}, _raised(0), _raised(1), _raised(1)]  # g's class 0; h and k raise class 1
    without_g = [calls[0], calls[2], calls[3]]

    def after_first(run_calls: list, results: list) -> bool:
        history = RunHistory()
        assert not history.conflicts(calls, first)
        return history.conflicts(run_calls, [{"ok": True, "value": 1}, *results])

    assert not after_first(without_g, [_raised(0), _raised(0)])  # no g(): h's class is 0 now (0 -> 1), k's too
    assert after_first(without_g, [_raised(0), _raised(5)])  # h and k: one class, then two
    assert after_first(calls[:3], [_raised(2), _raised(2)])  # g and h: two classes, then one
    assert after_first(without_g, [_raised(0), {"ok": True, "value": 2}])  # not a class number: compared as it is
    history = RunHistory()  # a class first answered in a later run is bound under its renamed number
    assert not history.conflicts(calls[:2], first[:2])
    assert not history.conflicts(calls[:3], [{"ok": True, "value": 1}, _raised(4), _raised(0)])
    assert not history.conflicts(calls[:3], [{"ok": True, "value": 1}, _raised(1), _raised(2)])
    assert history.conflicts(calls[:3], [{"ok": True, "value": 1}, _raised(3), _raised(3)])


def test_a_builtin_the_test_reads_is_refused_unless_the_description_lists_it_as_kept():
    kept = [[name, ["builtin"]] for name in ("ValueError", "print", "TypeError")]
    program = [["Exception", ["shadow"]], ["len", ["shadow"]], ["f", ["fn", "f", None]], *kept]
    source = program_facts("Exception = KeyError\nlen = 3\ndef f():\n    print = 1\n    return print\n")
    assert source["rebound"] == ["Exception", "len"]  # a function's local print is no module binding
    reads = functools.partial(shadowed_reads, source=source)
    assert reads("try:\n    f()\nexcept Exception:\n    pass", None, program) == ["Exception"]
    assert reads("assert len(f()) == 1", "def helper():\n    return Exception", program) == [
        "Exception",
        "len",
    ]
    assert reads("Exception = ValueError\nimport len\nassert f()", None, program) == []  # its own
    assert reads("assert f() == 1", None, program) == []
    assert reads("print(f())\nassert f() != TypeError", None, program) == []
    # a description the program rewrote: a name it does not list, or lists both ways, is refused
    assert reads("assert sorted(f()) == [1]", None, program) == ["sorted"]
    assert reads("print(f())", None, [*program, ["print", ["shadow"]]]) == ["print"]
    assert reads("try:\n    f()\nexcept Exception:\n    pass", None, []) == ["Exception"]
    # red team R8b-1: the program's SOURCE decides; a description listing a rebound name as kept changes nothing
    forged = [[name, ["builtin"]] for name in ("Exception", "len", "sorted")]
    assert reads("assert len(f()) == 1 and sorted(f()) == []", None, forged) == ["len"]
    for unread in (None, {"dynamic": "uses globals", "rebound": [], "classes": {}}, {**source, "rebound": ["*"]}):
        assert shadowed_reads("assert sorted(f()) == []", None, forged, unread) == ["sorted"]
    assert _described_names({"names": program}) == program
    assert _described_names({"names": [["len", ["shadow", 1]]]}) is None
    assert _described_names({"names": [["len", ["builtin", 1]]]}) is None
