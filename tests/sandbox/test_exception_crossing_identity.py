"""Class 9 (red team R9-2): the judge rebuilds an exception the program raised as a new object per record, so its
identity is not the program's. A test reading identity across records (``==``/``!=``, ``id()``, ``in``/``count``,
a set, ``is not`` on any expression, unittest's ``assertIsNot``) is refused, while what crosses exactly (its class,
``str``, ``args``, ``e == e``, ``pytest.raises``/``assertRaises`` matching, ``raise ... from``) still passes.
Through ``CodeTests`` with the per-run bwrap launch and landlock through its fork server."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts

ONE = "_E = ValueError('bad')\n\ndef f():\n    raise _E\n\nclass Mine(Exception):\n    pass\n\n_M = Mine('m')\n\n"
ONE += "def g():\n    raise _M\n"
CATCH = "def catch(h):\n    try:\n        h()\n    except Exception as e:\n        return e\n"
TWICE = "errs = []\nfor _ in range(2):\n    try:\n        f()\n    except ValueError as e:\n        errs.append(e)\n"
UNITTEST = (
    "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        with self.assertRaises(ValueError) as c1:\n"
    "            f()\n        with self.assertRaises(ValueError) as c2:\n            f()\n        {check}\n"
    "r = unittest.TextTestRunner(verbosity=0).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
    "assert r.wasSuccessful()\n"
)
REFUSED = [  # CPython fails each (one object raised twice); each passed the judge before
    CATCH + "assert catch(f) != catch(f)\n",
    CATCH + "assert catch(g) != catch(g)\n",  # the stand-in of a program class
    CATCH + "a = catch(f)\nb = catch(f)\nassert id(a) != id(b)\n",
    TWICE + "assert errs[0] is not errs[1]\n",
    TWICE + "assert errs.count(errs[0]) == 1\n",
    TWICE + "assert errs[1] not in errs[:1]\n",
    CATCH + "assert len({catch(f), catch(f)}) == 2\n",
    CATCH + "assert len({catch(g): 1, catch(g): 2}) == 2\n",
    "import sys\ntry:\n    f()\nexcept ValueError:\n    a = sys.exc_info()[1]\ntry:\n    f()\nexcept ValueError:\n"
    "    b = sys.exc_info()[1]\nassert a is not b\n",
    UNITTEST.format(check="self.assertIsNot(c1.exception, c2.exception)"),
    TWICE + "import operator\nassert operator.is_not(errs[0], errs[1])\n",
]
RIGHT = [  # CPython passes each: what crosses exactly
    CATCH + "e = catch(f)\nassert e == e and not e != e and e != 'bad' and e in [e]\n",
    CATCH + "e = catch(f)\nassert type(e) is ValueError and type(e) == ValueError and e.__class__ is ValueError\n",
    CATCH + "e = catch(f)\nassert str(e) == 'bad' and e.args == ('bad',) and repr(e) == \"ValueError('bad')\"\n",
    CATCH + "e = catch(f)\nassert isinstance(e, ValueError) and type(e) in (ValueError, TypeError)\n"
    "assert {ValueError: 1}[type(e)] == 1 and type(e).__name__ == 'ValueError' and type(e).__mro__[1] is Exception\n",
    CATCH + "e = catch(g)\nassert type(e) is Mine and str(e) == 'm' and e == e\n",
    CATCH + "import weakref\ne = catch(f)\ntry:\n    weakref.ref(e)\nexcept TypeError:\n    e = None\n"
    "assert e is None and not hasattr(catch(f), '__slots__')\n",
    CATCH + "import copy, pickle\ne = catch(f)\nc = copy.deepcopy(e)\n"
    "assert type(c) is ValueError and c.args == ('bad',) and b'ValueError' in pickle.dumps(e)\n",
    "import pytest\nwith pytest.raises(ValueError, match='bad'):\n    f()\n",
    UNITTEST.format(check="self.assertEqual(str(c1.exception), str(c2.exception))"),
    UNITTEST.format(check="self.assertIs(type(c1.exception), ValueError)"),
    CATCH + "import operator\ne = catch(f)\nassert operator.is_(e, e) and operator.is_not(e, None)\n",
    "try:\n    try:\n        f()\n    except ValueError as e:\n        raise KeyError('k') from e\nexcept KeyError as k:\n"
    "    assert type(k.__cause__) is ValueError and str(k.__cause__) == 'bad'\n",
    "import traceback\ntry:\n    f()\nexcept ValueError as e:\n    text = ''.join(traceback.format_exception_only(e))\n"
    "assert text == 'ValueError: bad\\n'\n",
]


@pytest.mark.parametrize("launch", [("bwrap", "0"), ("landlock", "1")], ids=["bwrap-0", "landlock-1"])
def test_identity_across_records_refused_and_exact_reads_pass(launch, monkeypatch) -> None:
    tests = REFUSED + RIGHT
    scores, outcomes = grade_asserts(launch, [ONE] * len(tests), tests, monkeypatch)
    assert scores == [0.0] * len(REFUSED) + [1.0] * len(RIGHT), list(zip(tests, scores))
    assert outcomes["code_tests/unsupported_test"] == len(REFUSED) / len(tests)
    assert outcomes["code_tests/infra_error"] == 0.0
