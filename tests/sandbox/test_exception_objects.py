"""Classes 8/9: a program's exception is rebuilt in the judge from each record, so the identity of one exception
object raised twice, or a ``__cause__`` that is an earlier raised exception, does not cross: a test comparing the
program's exceptions with ``is`` is ``unsupported_test`` before any run, never judged (red team R8-3: ``catch(f) is
not catch(f)`` passed a program raising one object twice). An exception a call returns crosses as an exception.
Through ``CodeTests`` on the per-run bwrap launch and landlock's fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes
from trl_ext.sandbox.assert_plan import exception_identity

CATCH = "def catch(fn):\n    try:\n        fn()\n    except Exception as e:\n        return e\n"
ONE = "E = ValueError('x')\ndef f():\n    raise E\n"
CAUSE = "saved = []\ndef f():\n    e = KeyError('k')\n    saved.append(e)\n    raise e\n"
CAUSE += "def g():\n    raise ValueError('v') from saved[0]\n"
ALIAS = "class Err(Exception):\n    pass\nlst = [1]\ndef f():\n    e = Err('x')\n    e.data = lst\n    raise e\n"
ALIAS += "def g():\n    return lst\n"
CASES = [  # (program, test, CPython passes, judged score)
    (ONE, CATCH + "assert catch(f) is not catch(f)", False, 0.0),
    (ONE, CATCH + "assert catch(f) is catch(f)", True, 0.0),  # refused: a right program scores 0 here
    (CAUSE, CATCH + "e1 = catch(f)\ne2 = catch(g)\nassert e2.__cause__ is not e1", False, 0.0),
    (ALIAS, "try:\n    f()\nexcept Err as e:\n    err = e\nassert err.data is not g()", False, 0.0),
    (ONE, CATCH + "assert catch(f) is not None and catch(f).args == ('x',)", True, 1.0),  # no identity: judged
    (
        "def f():\n    return ValueError('bad')\n",
        "assert isinstance(f(), ValueError) and str(f()) == 'bad'",
        True,
        1.0,
    ),
    ("def f():\n    return KeyError('bad')\n", "assert isinstance(f(), ValueError)", False, 0.0),
    *(  # the caught exception's class compared by identity: judged (red team R9-13)
        (ONE, f"try:\n    f()\nexcept Exception as e:\n    cls = e.__class__\nassert cls is {kind}", passes, score)
        for kind, passes, score in (("ValueError", True, 1.0), ("KeyError", False, 0.0))
    ),
    (ONE, "try:\n    f()\nexcept Exception as e:\n    assert e.__class__ is ValueError", True, 1.0),
]


def test_identity_of_caught_exceptions_is_found_in_the_test():
    assert all(exception_identity(test) for _, test, _, score in CASES[:4])
    assert not any(exception_identity(test) for _, test, _, _ in CASES[4:])
    assert not exception_identity("x = f()\nassert x is f()")  # no exception of the test's is compared


@pytest.mark.parametrize("launch", [("bwrap", "0"), ("landlock", "1")], ids=["bwrap-0", "landlock-1"])
def test_exception_identity_is_refused_and_a_returned_exception_crosses(launch, monkeypatch):
    assert [cpython_passes(program, test) for program, test, _, _ in CASES] == [c[2] for c in CASES]
    scores, outcomes = grade_asserts(launch, [c[0] for c in CASES], [c[1] for c in CASES], monkeypatch)
    assert scores == [c[3] for c in CASES], list(zip([c[1] for c in CASES], scores))
    assert outcomes["code_tests/unsupported_test"] == 4 / len(CASES)
