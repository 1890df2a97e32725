"""Class 1, leniency (red team R10J-6): state of the interpreter that a program changes and that the test shares in
one interpreter but not in the judge's: a recursion limit lowered under CPython's default (the test's own nested
comparison raises), and a standard module the test uses, changed by the program at load or in a call
(``math.isclose = ...``). Such a program fails as in CPython; right programs that raise the limit, or import and
use those modules as they are, still pass. Through ``CodeTests`` on the assert path, on the per-run bwrap launch
and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.assert_plan import watched_modules

DIGITS = "assert double(3) == 6\nassert len(str(10 ** 700)) == 701"
NESTED = "a = b = []\nfor _ in range(60):\n    a, b = [a], [b]\n"
CASES = [  # (program, test, CPython's verdict)
    ("import sys\ndef double(x):\n    sys.setrecursionlimit(40)\n    return x * 2\n", NESTED + "assert double(3) == 6\nassert a == b", False),
    ("import sys\nsys.setrecursionlimit(45)\ndef double(x):\n    return x * 2\n", NESTED + "assert double(3) == 6\nassert a == b", False),
    ("import sys\ndef double(x):\n    sys.setrecursionlimit(10 ** 5)\n    return x * 2\n", NESTED + "assert double(3) == 6\nassert a == b", True),
    ("import math\ndef twice(x):\n    math.isclose = lambda *a, **k: False\n    return 2 * x\n", "import math\nx = twice(0.1)\nassert math.isclose(x, 0.2)", False),
    ("import math\nmath.isclose = lambda *a, **k: False\ndef twice(x):\n    return 2 * x\n", "import math\nassert math.isclose(twice(0.1), 0.2)", False),
    ("def twice(x):\n    import string\n    string.digits = 'x'\n    return 2 * x\n", "assert twice(1) == 2\nassert string.digits == '0123456789'", False),
    ("import math\ndef twice(x):\n    return 2 * x * math.cos(0)\n", "import math\nassert math.isclose(twice(0.1), 0.2)", True),
    ("def twice(x):\n    import fractions\n    return 2 * x\n", "import fractions\nassert twice(3) == 6\nassert fractions.Fraction(1, 2) * 2 == 1", True),
    # the int-digits limit lowered, at load or in a call, however spelled (R10bJ-2); raised, it is judged (R10bJ-8)
    ("import sys\ndef double(x):\n    sys.set_int_max_str_digits(640)\n    return x * 2\n", DIGITS, False),
    ("import sys\nmatch sys:\n    case object(set_int_max_str_digits=s):\n        s(640)\ndef double(x):\n    return x * 2\n", DIGITS, False),
    ("import sys\nsys.set_int_max_str_digits(0)\ndef double(x):\n    return x * 2\n", DIGITS, True),
    # submodules: the test's are watched (R10bJ-3); a package gaining a submodule the program loads is no change (R10bJ-4)
    ("import collections.abc\ndef twice(x):\n    collections.abc.Sequence = dict\n    return 2 * x\n", "from collections import abc\nassert twice(1) == 2\nassert isinstance([], abc.Sequence)", False),
    ("import sys\ndef twice(x):\n    sys.modules['urllib.parse'] = None\n    return 2 * x\n", "assert twice(1) == 2\nimport urllib.parse\nassert urllib.parse.quote(' ') == '%20'", False),
    ("def twice(x):\n    import email.utils\n    return 2 * x\n", "import email\nassert twice(1) == 2\nassert email.message_from_string('a: b')['a'] == 'b'", True),
]  # fmt: skip
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert [cpython_passes(program, test) for program, test, _ in CASES] == [passes for _, _, passes in CASES]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_shared_interpreter_state_is_judged_as_cpython_has_it(launch, monkeypatch):
    sources, tests = [program for program, _, _ in CASES], [test for _, test, _ in CASES]
    scores, outcomes = grade_asserts(launch, sources, tests, monkeypatch)
    assert scores == [float(passes) for _, _, passes in CASES], list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0


def test_the_watched_modules_are_the_standard_ones_the_test_uses():
    test = "import math\nfrom os.path import join\nimport numpy\ncode = 1\nassert f(code) == string.digits\nsys.exit()"
    watched = watched_modules(test, "import collections\ndef f(x):\n    pass\n")
    assert watched == ("collections", "math", "os.path", "os.path.join", "string")
