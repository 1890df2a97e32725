"""Classes 8 and 9 (red team R8-3, R8-7, R8-8, R8-13): what the judge cannot give the test as CPython would is
refused or failed, never passed: an exception the program raised and changed later (its args replaced, a list in
its attributes changed), an attribute set on a builtin exception (it crosses now), a class registered with an ABC,
``type(f()) is map`` against the real builtin type, and ``is`` on immutable values (made anew from each record).
Through ``CodeTests`` on the assert path, the per-run bwrap launch and landlock's fork server, one batch each."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import replay
from trl_ext.sandbox.program_exceptions import real_types

IT = "    def __iter__(self):\n        return self\n    def __next__(self):\n        raise StopIteration\n"
SAVED = "saved = []\ndef f():\n    e = ValueError('x')\n    saved.append(e)\n    raise e\n"
SAVED += "def g():\n    saved[0].args = ('changed',)\n    return 1\n"
CATCH = "def catch(fn):\n    try:\n        fn()\n    except Exception as e:\n        return e\n"
LIST_ATTR = (
    "class Err(Exception):\n    pass\nlst = []\ndef f():\n    lst.append(1)\n    e = Err('x')\n    e.data = lst\n"
)
LIST_ATTR += "    raise e\ndef g():\n    lst.append(2)\n    return 0\n"
LIST_ATTR_TEST = "try:\n    f()\nexcept Err as e:\n    err = e\ng()\nassert err.data == [1]\n"
LIST_ARGS = (
    "lst = []\ndef f():\n    lst.append(1)\n    raise ValueError(lst)\ndef g():\n    lst.append(2)\n    return 0\n"
)
LIST_ARGS_TEST = "try:\n    f()\nexcept ValueError as e:\n    err = e\ng()\nassert err.args[0] == [1, 2]\n"
CODE = "def f():\n    e = ValueError('bad')\n    e.code = 7\n    raise e\n"
CODE_TEST = "try:\n    f()\nexcept ValueError as e:\n    assert {}\n"
REGISTERED = (
    "import collections.abc\nclass It:\n" + IT + "collections.abc.Sequence.register(It)\ndef f():\n    return It()\n"
)
MAPPED = "def f():\n    return map(str, [1])\n"
CASES = [  # (program, test, CPython's verdict)
    (SAVED, CATCH + "err = catch(f)\ng()\nassert err.args == ('x',)\n", False),
    (LIST_ATTR, LIST_ATTR_TEST, False),
    (CODE, CODE_TEST.format("not hasattr(e, 'code')"), False),
    (REGISTERED, "import collections.abc\nassert not isinstance(f(), collections.abc.Sequence)\n", False),
    (MAPPED, "assert type(f()) is not map\n", False),
    (MAPPED, "assert type(f()) is not type(iter(map(str, [])))\n", False),
    ("T = (1, 2)\ndef f():\n    return T\n", "assert f() is not f()\n", False),
    (LIST_ARGS, LIST_ARGS_TEST, True),  # the args' list is the run's numbered object: its change crosses
    (CODE, CODE_TEST.format("e.code == 7 and e.args == ('bad',)"), True),
    (MAPPED, "assert type(f()).__name__ == 'map' and list(f()) == ['1']\n", True),
    ("def f(xs):\n    xs.append(1)\n    return xs\n", "a = []\nassert f(a) is a and f(None or []) is not a\n", True),
    ("def f():\n    return None\n", "assert f() is None\n", True),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test, _ in CASES] == [passes for _, _, passes in CASES]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_what_cannot_cross_as_cpython_has_it_never_passes(launch, monkeypatch):
    sources, tests = [program for program, _, _ in CASES], [test for _, test, _ in CASES]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    assert scores == [float(passes) for _, _, passes in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0


def test_the_tests_that_can_hold_a_real_builtin_iterator_type_are_found():
    held = ["assert type(f()) is not map", "assert type(f()) is type(iter([]))", "m = map\nassert type(f()) is m"]
    held += ["import itertools\nassert not isinstance(f(), itertools.count)", "assert [].__class__ is not type(f())"]
    judged = ["assert list(map(str, f())) == ['1']", "x = f()\ny = x\nassert type(y) is type(f())"]
    judged += ["for row in f():\n    assert type(row) == list", "assert all(type(x) is int for x in f())"]
    assert all(real_types(test, "", ("f",)) for test in held)
    assert not any(real_types(test, "", ("f",)) for test in judged)


def test_an_evaluation_finds_the_rule_the_worker_prepared_before_its_fork():
    """The evaluation worker reads the rule in its parent, before each fork (``replay.prepare`` with the task's
    names): the evaluation finds it computed for its very test, prefix and names instead of parsing the test again
    in every forked evaluation."""
    task = {"test": "assert type(f()) is not map\n", "prefix": None, "entry_point": None, "names": ["f"]}
    task.update(modules=[], seed=1, calls=[], results=[])
    real_types.cache_clear()
    replay.prepare(task["test"], task["prefix"], task["names"])
    prepared = real_types.cache_info()
    answer = replay.evaluate(task)
    assert answer["verdict"] == "incomplete" and answer["calls"], answer
    assert prepared.misses == 1 and real_types.cache_info().misses == 1 and real_types.cache_info().hits > 0
