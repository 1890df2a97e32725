"""Classes 8/9: interpreter state a test changes does not reach the sandboxed program (red team R8b-2): a test's
``random.seed(0)``, ``sys.setrecursionlimit(60)`` or ``collections.Counter.most_common = boom`` passed programs
CPython fails. Such a test is ``unsupported_test`` before any run (``test_state.state_change``), never judged.
Through ``CodeTests`` on the per-run bwrap launch and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests
from trl_ext.sandbox.assert_plan import parse_python, program_refusal, unsupported_plan
from trl_ext.sandbox.test_state import random_state, state_change

COUNTER = "from collections import Counter\ndef mode(xs):\n    return Counter(xs).most_common(1)[0][0]\n"
REC = "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
ROLL = "import random\ndef roll():\n    return random.random()\n"
SEEDED = "import random\nrandom.seed(0)\nx = random.random()\nrandom.seed(0)\nassert roll() {} x\n"
BOOM = "def _boom(self, n=None):\n    raise RuntimeError('use no Counter')\n"
SORT = "def sort_list(xs):\n    return sorted(xs)\n"
STRESS = "import random\nrandom.seed(0)\nfor _ in range(5):\n    xs = [random.randint(0, 9) for _ in range(6)]\n"
STRESS += "    assert sort_list(xs) == sorted(xs)\n"
OWN = "def fill(box, v):\n    box.v = v\nfill(cfg, 3)\nassert sort_list(cfg.xs) == [1, 2] and cfg.v == 3"
ENV = "import os\ndef level():\n    return os.environ.get('LEVEL', 'INFO')\n"
DIV = "from decimal import Decimal\ndef div(a, b):\n    return Decimal(a) / Decimal(b)\n"
SET_SEED = "import random\ndef set_seed(s):\n    random.seed(s)\n"
CASES = [  # (program, test, CPython passes, judged score)
    (
        COUNTER,
        "import collections\n" + BOOM + "collections.Counter.most_common = _boom\nassert mode([1, 2, 2]) == 2",
        False,
        0.0,
    ),
    (
        COUNTER,
        "from collections import Counter as C\n" + BOOM + "K = C\nK.most_common = _boom\nassert mode([2]) == 2",
        False,
        0.0,
    ),
    (REC, "import sys\nsys.setrecursionlimit(60)\nassert fact(200) > 0", False, 0.0),
    (ROLL, SEEDED.format("!="), False, 0.0),
    (ROLL, SEEDED.format("=="), True, 0.0),  # refused: a right program scores 0 here
    (ROLL, "import random\nassert getattr(random, 'getstate')() is not None and roll() < 1", True, 0.0),
    (
        COUNTER,
        "import math\nclass Box:\n    def __init__(self, v):\n        self.v = v\nb = Box(math.pi)\n"
        "assert mode([2, 2, 1]) == 2 and b.v > 3",
        True,
        1.0,
    ),  # judged: the test's own object, a module read
    (REC, "def check(candidate):\n    assert candidate(5) == 120\ncheck(fact)", True, 1.0),
    # red team R9-3: random seeded to make inputs for a program that never draws, the test's own objects: judged
    (SORT, STRESS, True, 1.0),
    ("def sort_list(xs):\n    return list(xs)\n", STRESS, False, 0.0),
    (SORT, "from types import SimpleNamespace\ncfg = SimpleNamespace()\ncfg.xs = [2, 1]\n" + OWN, True, 1.0),
    # R9-4, R9-16, R9-11: the test's environment or decimal context, a program seeding random, a helper's class
    (ENV, "import os\nos.environ['LEVEL'] = 'DEBUG'\nassert level() == 'INFO'", False, 0.0),
    (
        DIV,
        "import decimal\ndecimal.setcontext(decimal.Context(prec=4))\nassert str(div(2, 3)) != '0.6667'",
        False,
        0.0,
    ),
    (SET_SEED, "import random\nset_seed(7)\nassert random.random() != random.Random(7).random()", False, 0.0),
    (
        COUNTER,
        "import collections\ndef get():\n    return collections.Counter\nget().most_common = None\n"
        "assert mode([1]) == 1",
        False,
        0.0,
    ),
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_state_changes_are_found_in_the_test():
    trees = [parse_python(test) for _, test, *_ in CASES]
    assert [bool(state_change(tree)) for tree in trees] == [i in (0, 1, 2, 11, 12, 14) for i in range(len(CASES))]
    assert [bool(random_state(tree)) for tree in trees] == [i in (3, 4, 5, 8, 9) for i in range(len(CASES))]
    # random's generator matters only where the program may draw from it (or seeds it and the test reads it)
    assert program_refusal(ROLL, SEEDED.format("=="), ["roll"]) and not program_refusal(SORT, STRESS, ["sort_list"])
    assert program_refusal(SET_SEED, CASES[13][1], ["set_seed"]) and not program_refusal(
        SET_SEED, "set_seed(1)", ["set_seed"]
    )
    # a raised int-digits limit is judged (R10bJ-8: a common preamble); a lowered one fails in the harness
    assert not program_refusal("import sys\nsys.set_int_max_str_digits(0)\ndef f():\n    return 1\n", "f()", ["f"])
    # a seed however spelled (R10bJ-7: a class pattern's keyword, a string)
    for spelled in ("match random:\n    case object(seed=s):\n        s(1)", "getattr(random, 'seed')(1)"):
        program = f"import random\ndef f():\n    {spelled.replace(chr(10), chr(10) + '    ')}\n    return 1\n"
        assert program_refusal(program, "import random\nassert f() == 1\nx = random.random()", ["f"]), spelled
    assert state_change(parse_python("import heapq\nheapq.nlargest.__code__ = None"))  # a library function's
    assert state_change(parse_python("for k in [__import__('collections').deque]:\n    k.x = 1"))
    assert not state_change(parse_python("x = [1]\nassert f(x) == 1 and f.__name__ == 'f'"))
    assert not state_change(parse_python("import io, sys\nsys.stdout = io.StringIO()\nf()"))  # a module's own
    assert state_change(parse_python("import io, sys\nsys = io.StringIO\nsys.x = 1"))  # not only a module
    # standard modules the judge gives a test that does not import them are modules, not the program's functions
    assert random_state(parse_python("random.seed(0)\nassert f()"))
    assert random_state(parse_python("import random\nrandom._inst.__init__(0)\nassert f()"))
    assert state_change(parse_python("import random\ngetattr(random, 'dees'[::-1])(0)\nassert f()"))
    assert not state_change(parse_python("for name in ('a', 'b'):\n    assert getattr(f(), name) == 1"))
    assert state_change(parse_python("import gc, collections\ngc.get_referents(vars(collections.Counter))"))
    assert state_change(parse_python("K = collections.Counter\nK.x = 1"))
    assert not state_change(parse_python("m = Machine()\nm.get_state()\nm.v = 1"))  # a program result's own
    assert state_change(parse_python("import collections\nc = collections.Counter()\ntype(c).most_common = None"))
    assert unsupported_plan(
        "R.x = 1\nassert mode([2]) == 2", ["mode"], "import collections\nR = collections.Counter\n"
    )


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_state_changing_tests_are_refused(launch, monkeypatch, request):
    assert [cpython_passes(program, test) for program, test, *_ in CASES] == [passes for _, _, passes, _ in CASES]
    programs, tests = [c[0] for c in CASES], [c[1] for c in CASES]
    scores, outcomes = grade_asserts(launch, programs, tests, monkeypatch, request)
    assert scores == [c[3] for c in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/unsupported_test"] == 10 / len(CASES) and outcomes["code_tests/infra_error"] == 0.0, (
        outcomes
    )


SEED_PREFIX = "import random\n\n\ndef fresh_draw():\n    random.seed(0)\n    return random.random()\n\n\ndef roll():\n    'A draw.'\n"
CLASS_PREFIX = "import collections\n\n\ndef forbid(c=collections.Counter):\n    c.most_common = None\n\n\ndef mode(xs):\n    'The mode.'\n"


def test_the_prefix_helpers_are_read_with_the_test():
    """The prefix's helpers run as the test's code (red team R9-5): a helper that seeds random or patches a library
    class is refused like the same statement in the test; the program's function in the prefix is not read."""
    program = SEED_PREFIX + "    return random.random()\n"
    assert program_refusal(program, "fresh_draw()\nassert roll() < 1", ["roll"], SEED_PREFIX)
    assert unsupported_plan("forbid()\nassert mode([2]) == 2", ["mode"], CLASS_PREFIX)
    assert not unsupported_plan("assert roll() < 1", ["roll", "fresh_draw"], SEED_PREFIX)  # both the program's
    assert not unsupported_plan("assert roll() < 1", ["roll"], "import random\n\n\ndef roll():\n    pass\n")


def test_a_prefix_helper_changing_state_is_refused_through_the_judge():
    completion = "    return random.random()\n"
    test = "r = random.Random(0)\nr.random()\nsecond = r.random()\nfresh_draw()\nassert roll() != second\n"
    assert not cpython_passes(SEED_PREFIX + completion, test)
    spec = {"kind": "assert", "code": test, "prefix": SEED_PREFIX}
    report = run_tests(SEED_PREFIX + completion, spec, limits=Limits(timeout_s=10.0))
    assert report.passed == 0 and report.statuses == ["unsupported_test"], report
