"""Class 9/1: the program's warnings and log records stay in the sandbox, so a test that would see them (warnings
made errors, ``catch_warnings(record=True)``, a logging handler it added) is ``unsupported_test``: never a pass
for a program plain CPython fails. A test that only runs (``unittest.main()`` resets the warning filters) is
judged as usual."""

from __future__ import annotations

from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox import Limits, run_tests

FAST = Limits(timeout_s=10.0)
NOISY = """import logging, warnings
def half(n):
    warnings.warn("half() is old", DeprecationWarning)
    logging.getLogger("calc").error("halving %s", n)
    return n // 2
"""
REFUSED = [  # CPython fails each: the test sees the warning or the log record
    "import warnings\nwarnings.simplefilter('error')\nassert half(4) == 2",
    "import warnings\nwith warnings.catch_warnings(record=True) as seen:\n    warnings.simplefilter('always')\n"
    "    assert half(4) == 2\nassert not seen",
    "import io, logging\nbuf = io.StringIO()\nlogging.getLogger('calc').addHandler(logging.StreamHandler(buf))\n"
    "assert half(4) == 2\nassert buf.getvalue() == ''",
]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(NOISY, test) for test in REFUSED)


def test_a_test_seeing_warnings_or_logs_never_passes_wrongly():
    for test in REFUSED:
        report = run_tests(NOISY, {"kind": "assert", "code": test}, limits=FAST)
        assert report.passed == 0 and report.statuses[-1] == "unsupported_test", (test, report)
    plain = "import unittest\nclass T(unittest.TestCase):\n    def test_half(self):\n        self.assertEqual(half(4), 2)\n"
    assert run_tests(NOISY, {"kind": "assert", "code": plain + "unittest.main()"}, limits=FAST).all_passed
