"""Classes 8/9: what a test does around a call reaches the program, and what the program does reaches the test,
as in one interpreter (``replay_env.py``): captured stdout, a ``sys.stdin`` the test sets, the test's clocks,
``sys.exit``/``unittest.main()``, names the test rebinds (refused), and rounds that replay the same calls give the
same results (``random`` seeded per evaluation, one hash secret). A differential test: each case runs as one
plain CPython process (program, then test: exit status 0 is a pass) and through the judge, on every backend; a
case the judge refuses is ``unsupported_test`` and never a pass."""

from __future__ import annotations

import functools
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests._backends import ISOLATED
from trl_ext.sandbox import Limits, run_tests
from trl_ext.sandbox.assert_plan import shadowed_names
from trl_ext.sandbox.forkserver import FORKSERVER_ENV

FAST = Limits(timeout_s=5.0)
STARS = "def f(n):\n    print('*' * n)\n"
CHATTY = "def f(n):\n    print('debug', n)\n    return n\n"
QUIET = "def f(n):\n    return n\n"
RAW = "import os\ndef f(n):\n    os.write(1, b'*' * n + b'\\n')\n"  # fd 1: never the test's captured stdout
READ_ONE = "def f():\n    return int(input())\n"
READ_ALL = "import sys\ndef f():\n    return int(sys.stdin.read().split()[0])\n"
SLOW = "import time\ndef f(n):\n    time.sleep(1.5)\n    return n\n"
CALLS_G = "def f():\n    return g()\ndef g():\n    return 1\n"
PLUS = "def f(x):\n    return x + 1\n"
SORTS = "def f(xs):\n    return sorted(xs)\n"
DICE = "import random\ndef f():\n    return random.randint(1, 6)\n"
EXITS = "import sys\ndef f(x):\n    sys.exit(0)\n"
CAPTURE = "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    r = f(3)\n"
TIMED = "import time\nt = {clock}()\nassert f(3) == 3\nassert {clock}() - t < {bound}\n"
UNITTEST = "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(1), {})\n"

# (program, test): the judge's verdict must be plain CPython's
SAME = [
    ("def f():\n    return '[1, (2, 3)]'\n", "import ast\nassert ast.literal_eval(f()) == [1, (2, 3)]"),
    ("def f():\n    return '[1, 2]'\n", "import ast\nassert ast.literal_eval(f()) == [2, 1]"),
    (PLUS, "assert f.__module__ == __name__ == '__main__' and f.__name__ == 'f'"),
    (STARS, CAPTURE + "assert buf.getvalue() == '***\\n'"),
    (CHATTY, CAPTURE + "assert r == 3 and buf.getvalue() == ''"),
    (QUIET, CAPTURE + "assert r == 3 and buf.getvalue() == ''"),
    (RAW, CAPTURE + "assert buf.getvalue() == '***\\n'"),
    (
        STARS,
        "import io, sys\nsys.stdout = io.StringIO()\nf(2)\nf(1)\nout = sys.stdout.getvalue()\n"
        "sys.stdout = sys.__stdout__\nassert out == '**\\n*\\n'",
    ),  # fmt: skip
    (STARS, "import io, sys\nsys.stdout = io.StringIO()\nf(2)\nsys.stdout = sys.__stdout__\nf(5)\nassert True"),
    (READ_ONE, "import io, sys\nsys.stdin = io.StringIO('5\\n7\\n')\nassert f() == 5 and f() == 7"),
    (READ_ONE, "import io, sys\nsys.stdin = io.StringIO('5\\n7\\n')\nassert f() == 5 and input() == '7'"),
    (READ_ALL, "import io, sys\nsys.stdin = io.StringIO('5\\n7\\n')\nassert f() == 5 and input() == '7'"),
    (SLOW, TIMED.format(clock="time.perf_counter", bound=0.75)),
    (QUIET, TIMED.format(clock="time.perf_counter", bound=0.75)),
    (SLOW, TIMED.format(clock="time.monotonic_ns", bound=750_000_000)),
    (SLOW, "from time import time as now\nt = now()\nassert f(3) == 3\nassert now() - t < 0.75"),
    (
        SLOW.replace("import time", "from time import sleep, perf_counter").replace("time.sleep", "sleep"),
        "from time import perf_counter\nt = perf_counter()\nassert f(3) == 3\nassert perf_counter() - t < 0.75",
    ),
    (SLOW, TIMED.format(clock="time.perf_counter", bound=60)),
    (
        SLOW,
        "import datetime\nt = datetime.datetime.now()\nassert f(3) == 3\n"
        "assert (datetime.datetime.now() - t).total_seconds() < 0.75",
    ),  # fmt: skip
    (
        QUIET,
        "import datetime\nt = datetime.datetime.now()\nassert f(3) == 3\n"
        "assert (datetime.datetime.now() - t).total_seconds() < 0.75",
    ),  # fmt: skip
    (
        "import sys\ndef f(n):\n    print('oops', file=sys.stderr)\n    return n\n",
        "import io, contextlib\nerr = io.StringIO()\nwith contextlib.redirect_stderr(err):\n    r = f(3)\n"
        "assert r == 3 and err.getvalue() == ''",
    ),  # fmt: skip
    (
        QUIET,
        "import io, contextlib\nerr = io.StringIO()\nwith contextlib.redirect_stderr(err):\n    r = f(3)\n"
        "assert r == 3 and err.getvalue() == ''",
    ),  # fmt: skip
    (PLUS, "import sys\nassert f(1) == 2\nsys.exit(0)"),
    (PLUS, "import sys\nassert f(1) == 2\nsys.exit()"),
    (PLUS, "assert f(1) == 2\nraise SystemExit(256)"),  # exit status 256 & 0xFF = 0
    (PLUS, "import sys\nassert f(1) == 2\nsys.exit(1)"),
    (PLUS, "import sys\nassert f(1) == 2\nsys.exit('done')"),
    (PLUS, "import sys\nif f(1) != 3:\n    sys.exit(2)"),
    (PLUS, UNITTEST.format(2) + "unittest.main()"),
    (PLUS, UNITTEST.format(3) + "unittest.main()"),
    (CALLS_G, "helper = lambda: 2\nassert f() == 1"),  # a name the program does not read: judged
    (PLUS, "import json.tool\nimport encodings.idna\nassert f(1) == 2"),  # submodules bound by the import system
    (
        SORTS,
        "import builtins\nsaved = builtins.sorted\nbuiltins.sorted = None\nbuiltins.sorted = saved\n"
        "assert f([3, 1, 2]) == [1, 2, 3]",
    ),  # put back before the call: judged  # fmt: skip
    (
        DICE,
        "from unittest import mock\nwith mock.patch('random.randint', return_value=4):\n    pass\n"
        "assert 1 <= f() <= 6",
    ),  # fmt: skip
]
# the judge refuses these (unsupported_test, never a pass)
REFUSED = [
    (SORTS, "import builtins\nbuiltins.sorted = None\nassert f([3, 1, 2]) == [1, 2, 3]"),  # CPython fails it
    (DICE, "from unittest import mock\nwith mock.patch('random.randint', return_value=4):\n    assert f() == 4"),
    (DICE, "import random\nrandom.randint = lambda a, b: 4\nassert f() == 4"),
    (DICE, "import random\ndel random.randint\nassert f() == 4"),  # CPython fails it
    (CALLS_G, "g = lambda: 2\nassert f() == 1"),  # CPython fails it: f() calls the test's g
    (CALLS_G, "g = lambda: 2\nassert f() == 2"),  # CPython passes it; the sandbox cannot give f the test's g
    (CALLS_G, "globals()['g'] = lambda: 2\nassert f() == 2"),
    (CALLS_G, "import sys\nsetattr(sys.modules['__main__'], 'g', lambda: 2)\nassert f() == 2"),
    (CALLS_G, "def g():\n    return 2\nassert f() == 2"),
    (SLOW, "from time import time\nassert f(3) == 3"),  # CPython fails it: f's time.sleep reads the test's time
    (
        READ_ONE,
        "import sys\nclass In:\n    def readline(self):\n        return '5\\n'\nsys.stdin = In()\nassert f() == 5",
    ),  # fmt: skip
    ("def f(n):\n    print('x' * n)\n", CAPTURE.replace("f(3)", "f(1 << 17)") + "assert len(buf.getvalue()) > 0"),
    (SORTS, "assert f([3, 1, 2]) == [1, 2, 3]\nassert 'sorted' not in f.__code__.co_names"),  # CPython fails it
    (PLUS, "import inspect\nassert list(inspect.signature(f).parameters) == ['x']"),  # CPython passes it
    (PLUS, "assert f.__defaults__ is None"),
]


@functools.cache  # a case's plain-CPython verdict is fixed: computed once per pytest process, for every backend
def cpython_passes(program: str, test: str) -> bool:
    """One plain interpreter, program then test (our own trusted code): exit status 0."""
    done = subprocess.run([sys.executable, "-I", "-c", program + "\n" + test], capture_output=True, timeout=60)
    return done.returncode == 0


def cpython_verdicts(cases: list[tuple[str, str]]) -> list[bool]:
    """``cpython_passes`` of every case, the interpreters run side by side (one process each, as one at a time:
    the SLOW cases' sleeps overlap instead of adding up)."""
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda case: cpython_passes(*case), cases))


def test_the_plain_cpython_verdicts_are_mixed():
    verdicts = cpython_verdicts(SAME)
    assert 0 < sum(verdicts) < len(verdicts)


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_the_judge_gives_plain_cpythons_verdicts_around_calls(backend):
    for (program, test), passes in zip(SAME, cpython_verdicts(SAME)):
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.all_passed == passes, (program, test, report)
        assert "unsupported_test" not in report.statuses, (program, test, report)


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_what_cannot_cross_is_refused_never_passed(backend):
    for program, test in REFUSED:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and "unsupported_test" in report.statuses, (program, test, report)


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_an_exit_raised_by_the_program_is_no_pass(backend):
    """In one interpreter a program's ``sys.exit(0)`` ends the test with status 0; the judge does not count it."""
    report = run_tests(EXITS, {"kind": "assert", "code": "assert f(1) == 2"}, limits=FAST)
    assert report.passed == 0 and "unsupported_test" not in report.statuses
    report = run_tests(EXITS, {"kind": "assert", "code": "try:\n    f(1)\nexcept SystemExit:\n    pass"}, limits=FAST)
    assert report.all_passed  # the test caught it itself


EXITS_ELSEWHERE = [  # the program's exit from every path the judge runs program code by (red team round 12, R12J-4)
    ("import sys\ndef f(n):\n    sys.exit(0)\n    yield", "assert list(f(3)) == [0, 1, 2]"),
    ("def f(n):\n    yield 7\n    raise SystemExit", "assert list(f(3)) == [0, 1, 2]"),
    ("import sys\ndef f(xs):\n    return map(lambda x: sys.exit(0), xs)", "assert list(f([1])) == [2]"),
    (
        "import sys\nclass It:\n    def __iter__(self):\n        return self\n    def __next__(self):\n"
        "        sys.exit(0)\ndef f():\n    return It()",
        "assert next(f()) == 1",
    ),
    (
        "import sys\ndef g():\n    try:\n        yield 1\n    finally:\n        sys.exit(0)\ndef f(x):\n    return x",
        "it = g()\nassert next(it) == 1\nit.close()\nassert f(2) == 3",
    ),
    (
        "import sys\nclass MyErr(Exception):\n    def __init__(self, m):\n        sys.exit(0)\ndef f(x):\n"
        "    return x",
        "e = MyErr('x')\nassert f(2) == 3",
    ),
]


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
def test_an_exit_the_program_raises_anywhere_is_no_pass(backend):
    """Items of the program's iterators, its generator's ``close()``, a class of the program's the test makes:
    an exit the program raises on any of these paths fails the test, as from a call; CPython's script would have
    exited 0 with the test's asserts unchecked."""
    for program, test in EXITS_ELSEWHERE:
        report = run_tests(program, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and "unsupported_test" not in report.statuses, (program, test, report)
    right = "def f(n):\n    yield from range(n)"
    assert run_tests(right, {"kind": "assert", "code": "assert list(f(3)) == [0, 1, 2]"}, limits=FAST).all_passed


CHAINS = [  # a right program whose result is no pure function of its arguments, fed to a later call
    "import random\ndef f():\n    return random.randint(1, 10**9)\ndef g(x):\n    return x\n",
    "import random\ndef f():\n    return random.sample(range(100), 5)\ndef g(x):\n    return x\n",
    "def f():\n    return list({'apple', 'banana', 'cherry', 'date', 'elder', 'fig'})\ndef g(x):\n    return x\n",
]
CHAIN_TEST = "x = f()\nassert g(x) == x\ny = f()\nassert g(y) == y and g([x, y]) == [x, y]"


@pytest.mark.parametrize("backend", ISOLATED, indirect=True)
@pytest.mark.parametrize("forkserver", ["0", "1"])
def test_rounds_of_one_evaluation_replay_the_same_results(backend, forkserver, monkeypatch):
    """Every sandbox run of one evaluation draws the same `random` numbers and has the same hash secret, on the
    per-run and the fork-server path; a program drawing on os.urandom still changes between runs: refused."""
    monkeypatch.setenv(FORKSERVER_ENV, forkserver)
    for program in CHAINS:
        assert cpython_passes(program, CHAIN_TEST)
        report = run_tests(program, {"kind": "assert", "code": CHAIN_TEST}, limits=FAST)
        assert report.all_passed and len(report.statuses) >= 2, (program, report)
    urandom = "import os\ndef f():\n    return os.urandom(8).hex()\ndef g(x):\n    return x\n"
    report = run_tests(urandom, {"kind": "assert", "code": CHAIN_TEST}, limits=FAST)
    assert report.passed == 0 and report.statuses[-1] == "unsupported_test" and "os.urandom" in report.detail


FORGER = """
import sys, time
def f(n):
    try:
        harness = sys._getframe(1).f_globals  # the caller is the harness's _call_record, in the program's process
    except ValueError:  # the harness's audit hook denies frames (FrameDenied): nothing to forge, a slow call
        harness = {}
    if "_call_record" in harness and "_real" not in harness:
        real = harness["_real"] = harness["_call_record"]
        harness["_call_record"] = lambda *args: (real(*args)[0][:-1] + ', "dt": 0.0}', real(*args)[1])
        return n
    time.sleep(1.5)
    return n
"""


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_a_call_duration_is_measured_where_the_program_cannot_forge_it(backend):
    """The program's process writes its record body; the harness appends the measured duration after it, and of
    two "dt" keys JSON keeps the last: a body that claims 0 s does not make a slow call fast."""
    test = "assert f(0) == 0\nimport time\nt = time.perf_counter()\nassert f(3) == 3\nassert time.perf_counter() - t < 0.75"
    report = run_tests(FORGER, {"kind": "assert", "code": test}, limits=FAST)
    assert report.passed == 0 and "invalid_result" not in report.statuses, report
    assert "AssertionError" in report.detail  # the timing assert failed, not the program


def test_a_name_bound_by_the_same_import_is_not_shadowed():
    reads_math = "import math\ndef f():\n    return math.pi\n"
    assert shadowed_names(reads_math, {"math": "module:math"}) == []
    assert shadowed_names(reads_math, {"math": None}) == ["math"]
    assert shadowed_names("import time\ndef f():\n    return time.sleep\n", {"time": "time.time"}) == ["time"]
    assert shadowed_names("from time import time\ndef f():\n    return time()\n", {"time": "time.time"}) == []
    assert shadowed_names("def f():\n    x = 1\n    return x\n", {"x": None}) == []  # a local of f's
    assert shadowed_names("def f(:\n", {"x": None}) == ["x"]  # scopes unknown: every name the test bound


_WATCHED_ONCE = """
import json, random, sys
from trl_ext.sandbox import replay, replay_env
replay_env.watch_modules()  # as the evaluation worker does once, before it forks an evaluation per task
random.seed = random.seed  # outside an evaluation: not the test's change
def verdict(test):
    task = {"test": test, "prefix": None, "entry_point": None, "names": ["f"], "modules": [], "seed": 1}
    task.update(calls=[], results=[])
    return replay.evaluate(task)["verdict"]
print(json.dumps([verdict(t) for t in sys.argv[1:]]))
"""


def test_modules_watched_once_still_refuse_a_patch():
    """``watch_modules`` (the evaluation worker's, before its forks) watches every module for good; a test's patch is
    still refused in each evaluation after it, a change outside an evaluation is not the test's, and the next
    evaluation starts clean."""
    tests = [
        "import random\nrandom.randint = lambda a, b: 4\nassert f() == 4",
        "assert f() == 4",
        "import fractions\nfractions.gcd = len\nassert f() == 4",  # imported by the test, then patched
        "assert f() == 4",
    ]
    done = subprocess.run([sys.executable, "-c", _WATCHED_ONCE, *tests], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == '["unsupported", "incomplete", "unsupported", "incomplete"]', done.stdout


def test_a_module_the_evaluation_worker_preloads_is_still_watched():
    """The evaluation worker imports the fork server's common modules (heapq, string, copy...) before its forks; a
    test that patches one of them is refused as for any module, and one that only uses them is judged."""
    spec = "import heapq\nassert f([3, 1, 2]) == heapq.nsmallest(2, [3, 1, 2])\n"
    assert run_tests(SORTS.replace("sorted(xs)", "sorted(xs)[:2]"), {"kind": "assert", "code": spec}).all_passed
    patched = spec + "heapq.heappush = None\nassert f([1]) == [1]\n"
    report = run_tests(SORTS, {"kind": "assert", "code": patched}, limits=FAST)
    assert report.statuses[-1] == "unsupported_test" and "heapq.heappush" in report.detail, report


SEED_ZERO = "import random\n_draws = random.Random(0)\ndef f():\n    return _draws.random()\n"  # predicts seed 0
RANDOM_INPUTS = (
    "import random\nxs = [random.randint(0, 99) for _ in range(20)]\nys = f(xs)\n"
    "zs = ys[::-1] + [random.randint(0, 9)]\nassert f(zs) == sorted(zs)"
)


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_the_tests_random_inputs_are_not_known_to_the_program(backend):
    """The test's ``random`` is seeded with a secret of the trainer's (CPython's is unseeded): a program replaying
    a guessed seed's draws does not pass, and the draws of every pass of one evaluation are still the same (the
    second call's argument, drawn after the first call's result, replays)."""
    test = "import random\nx = random.random()\nassert f() == x"
    assert not cpython_passes(SEED_ZERO, test)
    report = run_tests(SEED_ZERO, {"kind": "assert", "code": test}, limits=FAST)
    assert report.passed == 0 and "unsupported_test" not in report.statuses, report
    report = run_tests(SORTS, {"kind": "assert", "code": RANDOM_INPUTS}, limits=FAST)
    assert report.all_passed and len(report.statuses) >= 2, report


def test_the_tests_seed_is_secret_per_process_and_fixed_per_test():
    from trl_ext.sandbox.judge import _test_seed

    assert _test_seed("assert f() == 1") == _test_seed("assert f() == 1") != _test_seed("assert f() == 2")
    show = "from trl_ext.sandbox.judge import _test_seed; print(_test_seed('assert f() == 1'))"
    seeds = {subprocess.run([sys.executable, "-c", show], capture_output=True, text=True).stdout for _ in range(2)}
    assert len(seeds) == 2 and "" not in seeds


WAITS_ONCE_PER_RUN = """
import time
_loaded = time.monotonic()
def step(x):
    time.sleep(max(0.0, 0.9 - (time.monotonic() - _loaded)))  # until 0.9 s after this run loaded
    return x + 1
"""
EIGHT_STEPS = "x = 0\nfor _ in range(8):\n    x = step(x)\nassert x == 8"


@pytest.mark.parametrize("backend", ISOLATED[:1], indirect=True)
def test_the_rounds_of_one_test_share_one_time_budget(backend):
    """Eight result-dependent calls need eight sandbox runs, each loading the program again: a program that waits
    once per run took eight timeouts. The runs of one test share 1.5 timeouts: a timeout after about two runs."""
    report = run_tests(WAITS_ONCE_PER_RUN, {"kind": "assert", "code": EIGHT_STEPS}, limits=Limits(timeout_s=1.0))
    assert report.passed == 0 and report.statuses[-1] == "timeout", report
    assert 2 <= len(report.statuses) <= 4, report
    fast = WAITS_ONCE_PER_RUN.replace("0.9 -", "0.0 -")
    assert run_tests(fast, {"kind": "assert", "code": EIGHT_STEPS}, limits=Limits(timeout_s=1.0)).all_passed
