"""Class 9, "Known limits": where identity or aliasing could not cross, a wrong program passed (red team R8-8): a
``defaultdict`` whose factory returns one shared object got a fresh copy per missing key, a NaN the test passed
came back as another NaN object (``[f([n])] != [n]``), a returned ``memoryview`` was a writable copy that a later
change of its buffer did not reach, and an exception chain past the judge's depth or an exception's notes were
dropped. Now a factory returning one shared object, a view over a mutable buffer, a chain past the depth and an
exception with notes are no plain data (the case fails: a right program scores 0, never a wrong one 1), a view over
bytes is rebuilt read-only over bytes, and a NaN argument crosses by its number in the run, so the program
returning it gives the test its own object (docs/sandbox.md)."""

from __future__ import annotations

import pytest

from tests.sandbox.assert_path import grade_asserts
from tests.sandbox.test_test_environment import cpython_passes

LIMITS = """import collections
shared = []
buf = bytearray(b'ab')
def dd():
    return collections.defaultdict(lambda: shared)
def fresh():
    return collections.defaultdict(lambda: [])
def counts():
    return collections.defaultdict(lambda: 0)
def echo(x):
    return x[0]
def nan():
    return float('nan')
def view():
    return memoryview(buf)
def change():
    buf[0] = 120
def frozen():
    return memoryview(b'ab')
def chained():
    e = None
    for i in range(8):
        try:
            raise KeyError(i) from e
        except KeyError as k:
            e = k
    raise ValueError('v') from e
def noted():
    e = ValueError('x')
    e.add_note('retry later')
    raise e
"""
DEPTH = "try:\n    chained()\nexcept ValueError as e:\n    c, n = e, 0\n    while c.__cause__ is not None:\n"
DEPTH += "        c, n = c.__cause__, n + 1\n    assert n {}"
WRONG = [  # CPython fails each; the judge passed each
    "d = dd()\nd['a'].append(1)\nassert d['b'] == []",
    "n = float('nan')\nassert [echo([n])] != [n]",
    "m = view()\nchange()\nassert bytes(m) == b'ab'",
    DEPTH.format("< 8"),  # a chain cut at the judge's depth (4) passed
    "try:\n    noted()\nexcept ValueError as e:\n    assert not getattr(e, '__notes__', None)",
    "assert not frozen().readonly",
]
RIGHT = [
    "d = fresh()\nd['a'].append(1)\nassert d['b'] == [] and d['a'] == [1]",
    "c = counts()\nc['x'] += 2\nassert c == {'x': 2} and c['y'] == 0",
    "n = float('nan')\nassert [echo([n])] == [n] and echo([n]) is n and echo((n,)) is n",
    "x = nan()\nassert echo([x]) is x and [echo([x])] == [x] and nan() is not x",
    "assert bytes(frozen()) == b'ab' and frozen().tolist() == [97, 98] and frozen().readonly",
    "assert frozen().obj == b'ab' and frozen().cast('B') == frozen()",
]
RIGHT_REFUSED = [  # CPython passes each; the judge fails them (documented: the value is no plain data)
    "d = dd()\nd['a'].append(1)\nassert d['b'] == [1]",
    "m = view()\nchange()\nassert bytes(m) == b'xb'",
    DEPTH.format("== 8"),
    "try:\n    noted()\nexcept ValueError as e:\n    assert str(e) == 'x'",
]
LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


def test_the_plain_cpython_verdicts():
    assert not any(cpython_passes(LIMITS, test) for test in WRONG)
    assert all(cpython_passes(LIMITS, test) for test in RIGHT + RIGHT_REFUSED)


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_identity_limits_never_pass_a_wrong_program(launch, monkeypatch, request):
    tests = WRONG + RIGHT + RIGHT_REFUSED
    scores, outcomes = grade_asserts(launch, [LIMITS] * len(tests), tests, monkeypatch, request)
    expected = [0.0] * len(WRONG) + [1.0] * len(RIGHT) + [0.0] * len(RIGHT_REFUSED)
    assert scores == expected, list(zip(tests, scores))
    assert outcomes["code_tests/infra_error"] == 0.0
