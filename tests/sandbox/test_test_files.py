"""Class 9/1: files do not cross between the test (run in the evaluation worker) and the program (its sandbox's
scratch), so a test that opens files, uses ``os``'s file functions or a module about files is
``unsupported_test`` before any run: never a pass for a program plain CPython fails (a test checking that the
program removed its temporary file passed a program that left it)."""

from __future__ import annotations

import os

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests
from trl_ext.sandbox.assert_plan import introspection

FAST = Limits(timeout_s=10.0)
PROBE = "/tmp/trl_ext_left_behind_probe"
LEAVES = "def save(path):\n    with open(path, 'w') as fh:\n        fh.write('x')\n    return True\n"
TESTS = [  # CPython fails each: the program leaves its file behind
    "import os\np = '/tmp/trl_ext_left_behind_probe'\nassert save(p)\nassert not os.path.exists(p)",
    "from os import path\np = '/tmp/trl_ext_left_behind_probe'\nassert save(p)\nassert not path.exists(p)",
    "from pathlib import Path\np = Path('/tmp/trl_ext_left_behind_probe')\nassert save(str(p))\nassert not p.exists()",
    *(  # other spellings of opening a file (red team R9-14)
        "import codecs, io, os\nimport io as i\nfrom io import open as o\ndef gone(p):\n    try:\n        "
        + opens
        + "\n        return False\n"
        "    except FileNotFoundError:\n        return True\nassert save('/tmp/trl_ext_left_behind_probe')\n"
        "assert gone('/tmp/trl_ext_left_behind_probe')"
        for opens in (
            "io.open(p).close()",
            "codecs.open(p).close()",
            "io.FileIO(p).close()",
            "i.open(p).close()",
            "o(p).close()",
        )
    ),
]


def test_the_plain_cpython_verdicts():
    try:
        assert not any(cpython_passes(LEAVES, test) for test in TESTS)
    finally:
        if os.path.exists(PROBE):
            os.remove(PROBE)


def test_a_test_touching_files_is_refused():
    for test in TESTS:
        report = run_tests(LEAVES, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses == ["unsupported_test"], (test, report)
    assert not introspection("import io, os\nbuf = io.StringIO()\nassert os.sep in '/'")
    assert not introspection(
        "import io\nclass Door:\n    def open(self):\n        return 1\nassert Door().open() == f()"
    )
    assert introspection("import os\nfd = os.open('x', os.O_RDONLY)") and introspection("f = open\nf('x')")
