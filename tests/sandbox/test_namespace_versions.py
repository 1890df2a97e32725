"""Class 9/1, at O(1) a call: the evaluation's checks of module namespaces and ``sys.modules`` compare every entry
only where a dict's version moved (``dict_versions.py``, ``module_watch.py``). Every way of changing a dict moves
its version (C code included), so every way of changing a watched namespace is still refused before the next call
of the program, also after a first call found the module clean; a change put back is judged as usual; and the
verdicts are the same where versions cannot be read (every entry compared on every call)."""

from __future__ import annotations

import builtins
import ctypes
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import dict_versions, judge
from trl_ext.sandbox.program_source import program_facts

PROGRAM = """import math
def root(x):
    return math.sqrt(x)
def biggest(xs):
    return max(xs)
def smallest(xs):
    import heapq
    return heapq.nsmallest(1, xs)[0]
"""
ROOT = Path(__file__).resolve().parents[2]  # the subprocess imports this file's module from the repository
NAMES = ["root", "biggest", "smallest"]
# each changes what the program's own code reads (plain CPython fails each) and leaves it changed at the call
CHANGED = {
    "setattr": "import math\nsetattr(math, 'sqrt', abs)\nassert root(9) == 3",
    "module __setattr__": "import heapq, types\ntypes.ModuleType.__setattr__(heapq, 'nsmallest', lambda n, xs: [9])\n"
    "assert smallest([4, 2]) == 2",
    "vars() item": "import math\nvars(math)['sqrt'] = abs\nassert root(9) == 3",
    "__dict__.update": "import math\nmath.__dict__.update(sqrt=abs)\nassert root(9) == 3",
    "__dict__.pop": "import math\nmath.__dict__.pop('sqrt')\nassert root(9) == 3",
    "del vars() item": "import heapq\ndel vars(heapq)['nsmallest']\nassert smallest([4, 2]) == 2",
    "__globals__": "import heapq\nheapq.nlargest.__globals__['nsmallest'] = lambda n, xs: [9]\n"
    "assert smallest([4, 2]) == 2",
    "builtins __dict__": "import builtins\nbuiltins.__dict__['max'] = min\nassert biggest([1, 3]) == 3",
    "builtins setdefault": "import builtins\nb = builtins.__dict__\nb.pop('max')\nb.setdefault('max', min)\n"
    "assert biggest([1, 3]) == 3",
    "sys.modules item": "import sys, types\nsys.modules['heapq'] = types.ModuleType('heapq')\n"
    "assert smallest([4, 2]) == 2",
    "sys.modules update": "import sys, types\nsys.modules.update(heapq=types.SimpleNamespace(nsmallest=None))\n"
    "assert smallest([4, 2]) == 2",
    "after a first call": "import math\nassert root(4) == 2\nvars(math)['sqrt'] = abs\nassert root(9) == 3",
    "after a put-back and a call": "import math\nsaved = math.sqrt\nvars(math)['sqrt'] = abs\n"
    "vars(math)['sqrt'] = saved\nassert root(4) == 2\nvars(math)['sqrt'] = abs\nassert root(9) == 3",
    "class made plain, then setattr": "import math, types\nmath.__class__ = types.ModuleType\n"
    "setattr(math, 'sqrt', abs)\ndel math\nassert root(9) == 3",  # math is in no global of the test's then
    "imported after a call": "assert root(4) == 2\nimport math\nmath.__dict__['sqrt'] = abs\nassert root(9) == 3",
    "sys.modules after a call": "import sys, types\nassert smallest([4, 2]) == 2\n"
    "sys.modules['heapq'] = types.ModuleType('heapq')\nassert smallest([5, 3]) == 3",
}
# plain CPython passes these (the program's import finds a fresh module), which the sandbox cannot show: refused
REFUSED_ANYWAY = {
    "sys.modules pop": "import heapq, sys\nsys.modules.pop('heapq')\nassert smallest([4, 2]) == 2",
    "del sys.modules item": "import heapq, sys\ndel sys.modules['heapq']\nassert smallest([4, 2]) == 2",
    "sys.modules pop after a call": "import sys\nassert smallest([4, 2]) == 2\nsys.modules.pop('heapq')\n"
    "assert smallest([5, 3]) == 3",
}
# the module is as loaded again at every call: judged (plain CPython passes each)
PUT_BACK = [
    "import math\nsaved = vars(math)['sqrt']\nvars(math)['sqrt'] = abs\nvars(math)['sqrt'] = saved\nassert root(9) == 3",
    "import math\nassert root(4) == 2\nsaved = math.__dict__.pop('sqrt')\nmath.__dict__['sqrt'] = saved\n"
    "assert root(9) == 3",
    "import heapq, sys\nh = sys.modules.pop('heapq')\nsys.modules['heapq'] = h\nassert smallest([4, 2]) == 2",
    "import builtins\nassert biggest([1, 3]) == 3\nb = builtins.__dict__\nm = b.pop('max')\nb['max'] = m\n"
    "assert biggest([1, 5]) == 5",
]


KEPT = [[name, ["builtin"]] for name in vars(builtins) if name[:1] != "_"]  # the builtins the program keeps


def _task(test: str) -> dict:
    task = {"test": test, "prefix": None, "entry_point": None, "names": NAMES, "modules": [], "seed": 1}
    program = [[name, ["fn", name, None]] for name in NAMES] + KEPT  # as the harness describes an honest program
    task.update(calls=[], results=[], program=program, source=program_facts(""))  # no class, no builtin rebound
    return task


def test_every_change_of_a_dict_moves_its_version_and_reading_does_not():
    assert dict_versions.AVAILABLE  # CPython 3.11-3.13: the version is read, not the fallback
    module = types.ModuleType("probe")
    module.f = len
    namespace = module.__dict__
    view = dict_versions.watch(namespace)
    set_item = ctypes.pythonapi.PyDict_SetItem
    set_item.argtypes = (ctypes.py_object, ctypes.py_object, ctypes.py_object)
    changes = [
        lambda: setattr(module, "f", abs),
        lambda: types.ModuleType.__setattr__(module, "f", min),
        lambda: namespace.update(g=1),
        lambda: namespace.pop("g"),
        lambda: namespace.setdefault("h", 2),
        lambda: namespace.__delitem__("h"),
        lambda: exec("f = max", namespace),
        lambda: set_item(namespace, "f", sorted),  # C code, past every Python-level hook
        lambda: sys.modules.__setitem__("trl_ext_probe", module),
        lambda: sys.modules.pop("trl_ext_probe"),
    ]
    modules_view = dict_versions.watch(sys.modules)
    for change in changes:
        before, modules_before = view.value, modules_view.value
        change()
        assert (view.value, modules_view.value) != (before, modules_before), change
        before, modules_before = view.value, modules_view.value
        _ = (namespace.get("f"), len(namespace), list(namespace), dict(sys.modules))
        assert (view.value, modules_view.value) == (before, modules_before)


def test_one_read_of_many_namespaces_gives_each_version_and_moves_with_each():
    modules = [types.ModuleType(f"probe{k}") for k in range(40)]  # spread over the heap as they come
    views = [dict_versions.watch(module.__dict__) for module in modules]
    read = dict_versions.reader(views)
    assert read() == tuple(view.value for view in views)
    for k in (0, 17, 39):
        before = read()
        vars(modules[k])["x"] = k  # past the module's own __setattr__
        after = read()
        assert [j for j in range(40) if after[j] != before[j]] == [k]
        assert after == tuple(view.value for view in views)
    assert dict_versions.reader(views[:1])() == (views[0].value,) and dict_versions.reader([])() == ()


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(PROGRAM, test) for test in CHANGED.values())
    assert all(cpython_passes(PROGRAM, test) for test in [*REFUSED_ANYWAY.values(), *PUT_BACK])


def test_each_way_of_changing_a_watched_namespace_is_refused_in_the_evaluation_worker():
    """Through the confined evaluation worker (a forked process per evaluation, modules watched before the fork)."""
    for how, test in {**CHANGED, **REFUSED_ANYWAY}.items():
        answer = judge.EVALUATORS.evaluate(_task(test), 60.0)
        assert answer["verdict"] == "unsupported" and "the program may" in answer["detail"], (how, answer)
    for test in PUT_BACK:
        answer = judge.EVALUATORS.evaluate(_task(test), 60.0)
        assert answer["verdict"] == "incomplete" and answer["calls"], (test, answer)  # judged: it asks for calls


_FORKED = """
import json, os, sys
from trl_ext.sandbox import dict_versions, replay, replay_env
from tests.sandbox.test_namespace_versions import _task
dict_versions.AVAILABLE = sys.argv[1] == "1"
replay_env.watch_modules()  # as the evaluation worker does before it forks a process per evaluation
for test in json.loads(sys.argv[2]):
    read, write = os.pipe()
    if os.fork() == 0:  # each evaluation in a fork, as in the worker: what a test changes goes with it
        os.write(write, json.dumps(replay.evaluate(_task(test))).encode())
        os._exit(0)
    os.close(write)
    print(os.read(read, 1 << 20).decode())
    os.wait()
"""


@pytest.mark.parametrize("versions", ["1", "0"])
def test_the_same_verdicts_with_and_without_versions(versions):
    """In a process of the judge's code, with versions read and with every entry compared on every call."""
    tests = [*CHANGED.values(), *REFUSED_ANYWAY.values(), *PUT_BACK]
    done = subprocess.run([sys.executable, "-c", _FORKED, versions, json.dumps(tests)], capture_output=True, cwd=ROOT,
                          text=True, check=True, timeout=120)  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(tests), done.stderr
    for test, answer in zip(tests, answers):
        if test in PUT_BACK:
            assert answer["verdict"] == "incomplete", (test, answer)
        else:
            assert answer["verdict"] == "unsupported" and "the program may" in answer["detail"], (test, answer)


_CLOCKS = """
import json, time
from trl_ext.sandbox import replay, replay_env
real = time.monotonic
replay_env.watch_modules()  # the worker's: the virtual clocks in place for good, then the modules remembered
test = "import time\\nt = time.monotonic()\\nassert f(1) == 1\\nassert time.monotonic() - t >= 100"
task = {"test": test, "prefix": None, "entry_point": None, "names": ["f"], "modules": [], "seed": 1,
        "program": [["f", ["fn", "f", None]], ["abs", ["builtin"]]], "calls": [["f", [1], {"d": []}, []]],
        "source": {"dynamic": "", "rebound": [], "classes": {}},
        "results": [{"ok": True, "upd": [], "value": 1, "dt": 120.0}]}
drifts = [abs(time.monotonic() - real())]
verdict = replay.evaluate(task)["verdict"]
drifts.append(abs(time.monotonic() - real()))
print(json.dumps([time.monotonic is not real, verdict, max(drifts) < 1.0]))
"""


def test_clocks_in_place_for_good_read_the_real_clock_between_evaluations():
    """``watch_modules`` puts the test's virtual clocks in place once (no evaluation patches them): outside an
    evaluation they read the real clock; in one, the real clock plus the replayed calls' durations."""
    done = subprocess.run([sys.executable, "-c", _CLOCKS], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert json.loads(done.stdout.splitlines()[-1]) == [True, "passed", True], done.stderr
