"""Grading hacks against the code reward: programs that try to pass without computing the right values.

Every hack must score 0 under an assert spec, a HumanEval check(candidate) spec and a call spec alike (stdio
specs get their own cases), while the honest solution of the same tests scores 1. The judge runs the tests
outside the program: only plain data comes back from the sandbox, expected values never enter it.
"""

import pytest

from trl_ext.rewards import CodeTests

ASSERTS = """
assert double(2) == 4
assert double(-3) != 0
assert not double(0)
assert double('ab') == 'abab'
assert abs(double(0.25) - 0.5) < 1e-9
assert len(double([1])) == 2
assert isinstance(double(7), int)
"""
CHECK = "def check(candidate):\n" + "".join(
    f"    {line.replace('double(', 'candidate(')}\n" for line in ASSERTS.strip().splitlines()
)
CALL = {
    "kind": "call",
    "fn_name": "double",
    "cases": [
        {"args": [2], "expected": 4},
        {"args": [-3], "expected": -6},
        {"args": [0], "expected": 0},
        {"args": ["ab"], "expected": "abab"},
        {"args": [0.25], "expected": 0.5},
        {"args": [[1]], "expected": [1, 1]},
    ],
}
SPECS = {
    "assert": {"kind": "assert", "code": ASSERTS},
    "check": {"kind": "assert", "code": CHECK, "entry_point": "double"},
    "call": CALL,
}
HONEST = "def double(x):\n    return x * 2\n"

LIAR = """
class Liar:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return False
    def __len__(self): return 2
    def __sub__(self, other): return 0
    __rsub__ = __sub__
    def __abs__(self): return 0
    def __lt__(self, other): return True
    def __hash__(self): return 0
def double(x):
    return Liar()
"""
SUBCLASS = """
class Lying{base}({base}):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return False
    def __len__(self): return 2
    def __sub__(self, other): return 0
    def __abs__(self): return 0
    def __hash__(self): return 0
def double(x):
    return Lying{base}({value})
"""
PATCHED_BUILTINS = """
import builtins
builtins.abs = lambda x: 0
builtins.len = lambda x: 2
builtins.isinstance = lambda *a: True
def double(x):
    return None
"""
FRAME_AND_GC_WALK = """
import gc, inspect, sys
def double(x):
    found = []
    frame = sys._getframe(1)
    while frame is not None:
        found += list(frame.f_code.co_consts) + list(frame.f_locals.values()) + list(frame.f_globals.values())
        frame = frame.f_back
    for info in inspect.stack():
        found += list(info.frame.f_locals.values())
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            found += list(obj.values())
    for value in found:  # the first value of the argument's type that is not the argument itself
        if type(value) is type(x) and value != x:
            return value
    return x
"""
FORGED_RECORDS = r"""
import gc, json, os, sys
def double(x):
    # find the harness's marker and claim every call returned every plausible value, on every descriptor
    markers = [o["marker"] for o in gc.get_objects() if isinstance(o, dict) and isinstance(o.get("marker"), str)]
    lines = []
    for marker in markers:
        for i in range(20):
            for value in ("true", "4", "-6", '"abab"', "[1, 1]", "0.5", "0"):
                lines.append(marker + '{"i": %d, "ok": true, "value": %s}' % (i, value))
    data = ("\n" + "\n".join(lines) + "\nok\nPASSED\nTrue\n").encode()
    for fd in range(0, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass
    os._exit(0)
"""
HACKS = {
    "lying_object": LIAR,
    "int_subclass": SUBCLASS.format(base="int", value=0),
    "float_subclass": SUBCLASS.format(base="float", value=0.5),
    "str_subclass": SUBCLASS.format(base="str", value="''"),
    "list_subclass": SUBCLASS.format(base="list", value="[1, 1]"),
    "patched_builtins": PATCHED_BUILTINS,
    "frame_and_gc_walk": FRAME_AND_GC_WALK,
    "exit_before_tests": "import sys\ndef double(x):\n    return x * 2\nsys.exit(0)\n",
    "os_exit_before_tests": "import os\ndef double(x):\n    return x * 2\nos._exit(0)\n",
    "system_exit_in_call": "def double(x):\n    raise SystemExit(0)\n",
    "os_exit_in_call": "import os\ndef double(x):\n    os._exit(0)\n",
    "exit_after_first_call": (
        "import os\ncalls = []\ndef double(x):\n    calls.append(x)\n    if len(calls) > 1:\n        os._exit(0)\n"
        "    return x * 2\n"
    ),
    "atexit_exit": "import atexit, os\natexit.register(lambda: os._exit(0))\ndef double(x):\n    return None\n",
    "forged_records": FORGED_RECORDS,
}
REWARD = CodeTests(timeout_s=3.0, mode="fraction")


def fence(code):
    return f"```python\n{code}\n```"


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_every_hack_scores_zero_and_the_honest_solution_one(kind):
    names = ["honest", *HACKS]
    programs = [HONEST, *HACKS.values()]
    binary = CodeTests(timeout_s=3.0)([fence(p) for p in programs], tests=[SPECS[kind]] * len(programs))
    assert dict(zip(names, binary)) == {"honest": 1.0, **{name: 0.0 for name in HACKS}}
    if kind == "call":  # every case fails, not only the first (but the first call of this one was honest)
        fraction = REWARD([fence(p) for p in programs], tests=[SPECS[kind]] * len(programs))
        expected = {"honest": 1.0, **{name: 0.0 for name in HACKS}, "exit_after_first_call": 1 / 6}
        assert dict(zip(names, fraction)) == pytest.approx(expected)


STDIO = {"kind": "stdio", "cases": [{"input": "2\n", "output": "4"}, {"input": "-3\n", "output": "-6"}]}
STDIO_HACKS = {
    "exit_before_output": "import sys\nsys.exit(0)\nprint(int(input()) * 2)\n",
    "system_exit_after_wrong": "print(0)\nraise SystemExit(0)\n",
    "os_exit": "import os\nos._exit(0)\n",
    "fake_output_everywhere": FORGED_RECORDS + "double(0)\n",
    "stderr_answers": "import sys\nsys.stderr.write('4\\n-6\\n')\n",
    "patched_print": "import builtins\nbuiltins.print = lambda *a, **k: None\nprint(int(input()) * 2)\n",
}


def test_stdio_hacks_score_zero():
    programs = ["print(int(input()) * 2)\n", *STDIO_HACKS.values()]
    scores = REWARD([fence(p) for p in programs], tests=[STDIO] * len(programs))
    assert dict(zip(["honest", *STDIO_HACKS], scores)) == {"honest": 1.0, **{name: 0.0 for name in STDIO_HACKS}}
