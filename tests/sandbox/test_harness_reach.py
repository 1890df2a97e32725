"""Class 1 (red team round 10, R10J-1/3): without frames, a judged program reaches no namespace, code or class of the
harness. A program walks the object graph from every root it can name (every class from ``object`` down, the
modules, the ``sys`` hooks and finders, signal handlers, the ``FrameDenied`` it is raised) through functions'
globals, cells, defaults and code, bound methods, descriptors, partials and weak references, and reports what of
the harness it met; a control program plants harness-like objects in those roots and the same walk finds them.
R10J-1/3's wrong programs, which replaced a check through a harness class's method, score 0. Through ``CodeTests``
on the assert path, on the red team's four launches."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.rewards import CodeTests

SANDBOX = Path(__file__).resolve().parents[2] / "trl_ext" / "sandbox"
HARNESS_FILES = ["_harness_python.py", "_harness.py", "_harness_values.py", "_harness_library.py"]
HARNESS_FILES += ["_harness_program.py", "_harness_env.py", "_harness_live.py", "_harness_workdir.py"]
HARNESS_FILES += ["_harness_runtime.py"]
# the fork server's: its namespace is the harness's too, but its ctypes structures (confinement, used before the
# program only, no method) stay listed by object.__subclasses__() (docs/sandbox.md, class 1)
SERVER_FILES = ["_forkserver_main.py", "_confinement.py"]
HOOKS = ["wrapper", "mark", "find_spec", "exec_module", "wrap", "wrap_all"]  # reachable by design, own namespace


def _defined(kinds: tuple[type, ...], files: list[str]) -> list[str]:
    names = []
    for name in files:
        for node in ast.walk(ast.parse((SANDBOX / name).read_text())):
            if isinstance(node, kinds) and node.name not in HOOKS and not node.name.startswith("__"):
                names.append(node.name)
    return sorted(set(names))


WALKER = Path(__file__).with_name("_harness_walker.py").read_text()
WALKER += f"HARNESS_NAMES = frozenset({_defined((ast.FunctionDef,), HARNESS_FILES + SERVER_FILES)!r})\n"
WALKER += f"HARNESS_CLASSES = frozenset({[*_defined((ast.ClassDef,), HARNESS_FILES), 'Probe']!r})\n"
WALKER += f"HOOKS = frozenset({HOOKS!r})\n"
ROOTS = ["classes", "modules", "hooks", "raised"]
# harness-like objects planted in each root the control walks: a namespace with harness names, a harness class
PLANT = """
_space = dict.fromkeys(['_read_frame', '_parse_json', '_deny_frames', '_live_call'])
exec('def find_spec(name, path=None, target=None):\\n    return None', _space)
_finder = type(sys)('planted_finder')
_finder.find_spec = _space['find_spec']
sys.meta_path.append(_finder)
_module = type(sys)('planted')
_module.space = dict(_space)
sys.modules['planted'] = _module
_kept = [type('_Nested', (), {'__module__': '_harness_runtime'})]
"""
OPEN = """
def _open(check):
    match object:
        case type(__subclasses__=subclasses):
            pass
    for c in subclasses():
        match c:
            case type(__name__='_Nested', __init__=object(__globals__=G)):
                G[check] = lambda *a, **k: False if check != '_unchanged' else True
"""
CHECKS = {  # a check of the runtime, a wrong program it fails, the test (red team R10J-1 and R10J-3)
    "_unchanged": (
        "def total(a):\n    s = 0\n    while a:\n        s += a.pop()\n    return s\n",
        "a = [1, 2, 3]\nassert total(a) == 6\nassert a == [1, 2, 3]",
    ),
    "_module_changed": (
        "def f(s):\n    match f:\n        case object(__globals__=G):\n            G['len'] = lambda s: 0\n"
        "    return s[::-1]\n",
        "assert f('abc') == 'cba'\nassert len(f('abc')) == 3",
    ),
    "_raised_changed": (
        "_last = []\ndef check(x):\n    if x < 0:\n        e = ValueError('negative')\n        _last.append(e)\n"
        "        raise e\n    return x\ndef reset():\n    if _last:\n        _last[0].args = ('changed',)\n    return True\n",
        "try:\n    check(-1)\nexcept ValueError as e:\n    err = e\nassert reset()\nassert err.args == ('negative',)",
    ),
    "_decimal_changed": (
        "import decimal\ndef half(x):\n    decimal.getcontext().prec = 2\n    return x / 2\n",
        "from decimal import Decimal\nassert half(3) == 1.5\n"
        "assert Decimal(1) / Decimal(3) == Decimal('0.3333333333333333333333333333')",
    ),
    "_library_changed": (
        "from collections import Counter\ndef count(s):\n    return Counter(s)\ndef tidy():\n"
        "    Counter.most_common = lambda self, n=None: []\n    return True\n",
        "c = count('aab')\nassert tidy()\nassert c.most_common(1) == [('a', 2)]",
    ),
}
WRONG = [(OPEN + f"_open({check!r})\n" + program, test) for check, (program, test) in CHECKS.items()]
# the checks' builtins: rebound in the builtins module (reached through a builtin's __self__) before they run
REBIND = "def _rebind():\n    match print:\n        case object(__self__=B):\n            B.all = lambda *a: True\n"
REBIND += "            B.any = lambda *a: False\n_rebind()\n"
REVERSE = "def total(a):\n    a.reverse()\n    return sum(a)\n"
WRONG += [
    (REBIND + REVERSE, CHECKS["_unchanged"][1]),
    (REBIND + CHECKS["_module_changed"][0], CHECKS["_module_changed"][1]),
]
# setting a function's __code__ stays allowed (types.coroutine sets it when asyncio is imported): no function the
# program reaches is one a check depends on
SET_CODE = "def g():\n    return 1\ndef route():\n    try:\n        g.__code__ = (lambda: 2).__code__\n"
SET_CODE += "    except ValueError:\n        return 'denied'\n    return g()\n"
LAUNCHES = [("bwrap", "0"), ("landlock", "0"), ("landlock", "1"), ("remote", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test in WRONG] == [False] * len(WRONG)
    assert [cpython_passes(program, test) for program, test in CHECKS.values()] == [False] * len(CHECKS)
    assert cpython_passes(REVERSE, "assert total([1, 2, 3]) == 6")  # wrong only in what it does to its argument
    assert cpython_passes(SET_CODE, "assert route() == 2")
    planted = WALKER + PLANT + "\nassert reached('classes') and reached('modules') and reached('hooks')\n"
    assert cpython_passes(planted, "")


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_no_harness_object_is_reachable(launch, monkeypatch, request):
    sources = [WALKER] * len(ROOTS) + [WALKER + PLANT] * 3 + [program for program, _ in WRONG]
    tests = [f"assert reached({root!r}) == []" for root in ROOTS]
    tests += [f"assert reached({root!r}) != []" for root in ROOTS[:3]]  # the control: the walk finds the plants
    tests += [test for _, test in WRONG]
    scores, outcomes = grade_asserts(
        launch, [*sources, SET_CODE], [*tests, "assert route() == 2"], monkeypatch, request
    )
    names = [*ROOTS, *(f"control {root}" for root in ROOTS[:3]), *CHECKS, "rebound all", "rebound any", "__code__"]
    assert scores == [1.0] * (len(ROOTS) + 3) + [0.0] * len(WRONG) + [1.0], list(zip(names, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
    # stdio: the program runs as __main__ in a fork of the harness (grade_asserts pointed CodeTests at the launch)
    stdio = {"kind": "stdio", "cases": [{"input": "", "output": "[]"}]}
    walk = "print(reached('classes') + reached('hooks'))\n"
    programs = [f"```python\n{source}\n```" for source in (WALKER + walk, WALKER + PLANT + walk)]
    assert CodeTests(timeout_s=10.0, mode="binary")(programs, tests=[stdio, stdio]) == [1.0, 0.0]
