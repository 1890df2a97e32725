"""Class 9: the program's ``decimal`` context (precision, rounding, traps) is interpreter-global state that the
test's own decimal arithmetic reads in one interpreter; it does not cross the sandbox, so once a program call
changed it, a test that names decimal or holds a Decimal from the program is ``unsupported_test``, never judged at
the judge's own precision (red team R8-6: a program leaving ``prec = 2`` passed a test CPython fails). Through
``CodeTests`` on the per-run bwrap launch and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

SETS = "import decimal\ndef f():\n    decimal.getcontext().prec = 5\n    return 1\n"
BROKEN = "import decimal\ndef f():\n    decimal.getcontext().prec = 2\n    return 1\n"
LEAVES = "import decimal\ndef f():\n    return decimal.Decimal(1) / decimal.Decimal(3)\n"
CASES = [  # (program, test, CPython passes, judged score)
    (
        SETS,
        "from decimal import Decimal\nassert f() == 1\nassert Decimal(1) / Decimal(3) == Decimal('0.33333')",
        True,
        0.0,
    ),  # fmt: skip
    (
        BROKEN,
        "from decimal import Decimal\nassert f() == 1\nassert Decimal(1) / Decimal(3) == Decimal(1) / 3",
        True,
        0.0,
    ),  # fmt: skip
    (
        BROKEN,
        "import decimal\nassert f() == 1\nassert str(decimal.Decimal(2) / 3) == '0.6666666666666666666666666667'",
        False,
        0.0,
    ),  # fmt: skip
    (SETS, "assert f() == 1 and 1 / 3 < 0.34", True, 1.0),  # the test reads no decimal: judged
    (LEAVES, "from decimal import Decimal\nassert f() == Decimal(1) / Decimal(3)", True, 1.0),  # context unchanged
    (LEAVES, "from decimal import Decimal\nassert f() == Decimal('0.33333')", False, 0.0),
]


@pytest.mark.parametrize("launch", [("bwrap", "0"), ("landlock", "1")], ids=["bwrap-0", "landlock-1"])
def test_a_changed_decimal_context_refuses_a_test_that_reads_decimal(launch, monkeypatch):
    assert [cpython_passes(program, test) for program, test, _, _ in CASES] == [c[2] for c in CASES]
    scores, outcomes = grade_asserts(launch, [c[0] for c in CASES], [c[1] for c in CASES], monkeypatch)
    assert scores == [c[3] for c in CASES], list(zip([c[1] for c in CASES], scores))
    assert outcomes["code_tests/unsupported_test"] == 3 / len(CASES)
