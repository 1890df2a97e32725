"""Classes 8 and 1: the judge's stand-ins of the program's exception classes are one per class object of the run,
never one per name. A class redefined under its old name, or two classes a factory makes, are two classes in the
test as in CPython (``except MyErr`` catches the new one only), and one class raised twice is one stand-in. Same
verdicts as plain CPython, through ``CodeTests`` on the assert path, with the per-run bwrap launch, landlock
through its fork server and ``sandbox-serve`` (docs/sandbox.md, R6-7b)."""

from __future__ import annotations

import pytest

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.rewards import CodeTests
from trl_ext.sandbox import forkserver, get_backend
from trl_ext.sandbox.backends import BACKEND_ENV, URL_ENV
from trl_ext.sandbox.program_exceptions import _exception_class, exception_details
from trl_ext.sandbox.records import _described_names

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
# (backend, fork server): the per-run bwrap launch, landlock's fork server (the suite's default is fork servers)
# and sandbox-serve (the session's server, with its own default)
LAUNCHES = [("bwrap", "0"), ("landlock", "1"), ("remote", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(REDEFINED, test) for test in WRONG)
    assert all(cpython_passes(REDEFINED, test) for test in RIGHT)
    assert cpython_passes(SHIFTING, SHIFTING_TEST)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_program_exception_classes_keep_their_identity_through_code_tests(launch, monkeypatch, request):
    backend, fork = launch
    if backend == "landlock" and not forkserver.supported():
        pytest.fail("this kernel lacks Landlock ABI >= 6: fork servers are not used here")
    if backend == "remote":
        monkeypatch.setenv(URL_ENV, request.getfixturevalue("sandbox_server"))
    monkeypatch.setenv(BACKEND_ENV, backend)
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, fork)
    get_backend(backend)  # raises SandboxUnavailable where the backend cannot run
    outcomes: dict[str, float] = {}
    reward = CodeTests(timeout_s=10.0, mode="binary")
    tests = WRONG + RIGHT + [SHIFTING_TEST]
    programs = [f"```python\n{program}\n```" for program in [REDEFINED] * (len(tests) - 1) + [SHIFTING]]
    scores = reward(programs, tests=[{"kind": "assert", "code": t} for t in tests], log_metric=outcomes.__setitem__)
    assert scores == [0.0] * len(WRONG) + [1.0] * (len(RIGHT) + 1), list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0 and outcomes["code_tests/unsupported_test"] == 0.0


def test_stand_ins_are_one_per_class_number_and_a_forged_number_is_malformed():
    classes: dict = {"refuse": None}
    first = _exception_class([["MyErr", False, 0]], ValueError, classes)
    again = _exception_class([["MyErr", False, 0]], ValueError, classes, "doc")
    other = _exception_class([["MyErr", False, 1]], ValueError, classes)
    child = _exception_class([["Child", False, 2], ["MyErr", False, 0]], ValueError, classes)
    assert first is again and first is not other and first.__name__ == other.__name__ == "MyErr"
    assert issubclass(child, first) and not issubclass(child, other)
    for number in (-1, 1 << 20, 10**30, "0", True, 0.0, None):
        record = {"ok": False, "raised": "ValueError", "cls": [["MyErr", False, number]]}
        with pytest.raises(ValueError):
            exception_details(record, {"nans": {}, "classes": {}})
        assert _described_names({"names": [["E", ["exc", [["E", False, number]], "ValueError", None]]]}) is None
    assert _described_names({"names": [["E", ["exc", [["E", False]], "ValueError", None]]]}) is None  # no number
    assert _described_names({"names": [["E", ["exc", [["E", False, 3]], "ValueError", None]]]}) is not None
