"""Class 8: a stdio test's float tolerance compares the printed numbers by their exact values where a float cannot
hold them. ``float()`` turns every token past 1.8e308 into inf (and every one below 5e-324 into 0), and
``math.isclose(inf, inf)`` holds: ``9e999`` was accepted for a 401-digit number and ``1e999`` for ``5e400``. Such
tokens are now compared as fractions under the same formula as the call path's ``_close`` (docs/sandbox.md, R8-9).
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

import pytest

from trl_ext.rewards import CodeTests
from trl_ext.sandbox import compare_stdio, forkserver, get_backend
from trl_ext.sandbox.backends import BACKEND_ENV

TOL = 1e-6
BIG = "1" + "0" * 400 + ".5"
WRONG = [("9e999", BIG), ("1e999", "5e400"), ("-1e999", "-2e999"), ("2e300", "1e300")]
RIGHT = [("5.0000001e400", "5e400"), ("1" + "0" * 400, "1e400"), ("1e-400", "0"), ("2.0000001", "2")]


def _exactly_close(printed: str, expected: str, tol: float) -> bool:
    a, e = Fraction(printed), Fraction(expected)
    return abs(a - e) <= max(Fraction(tol) * max(abs(a), abs(e)), Fraction(tol))


def test_tokens_past_the_float_range_compare_by_exact_value():
    for printed, expected in WRONG:
        assert not _exactly_close(printed, expected, TOL) and not compare_stdio(printed, expected, TOL)
    for printed, expected in RIGHT:
        assert _exactly_close(printed, expected, TOL) and compare_stdio(printed, expected, TOL)
    # below the float range, with no tolerance left to hide them: 0 == 0 no longer decides
    assert not compare_stdio("1e-400", "2e-400", 0.0) and compare_stdio("1e-400", "1.0e-400", 0.0)
    assert not compare_stdio("inf", "9e999", TOL) and compare_stdio("inf", "inf", TOL)
    assert not compare_stdio("nan", "9e999", TOL) and not compare_stdio("9e999", "-9e999", TOL)
    assert compare_stdio("1 9e999 x", "1 9.0e999 x", TOL) and not compare_stdio("1 9e999 x", "1 8e999 x", TOL)


def test_random_tokens_agree_with_exact_fractions():
    rng = random.Random(9)
    for _ in range(3000):
        exponents = [rng.choice([0, 5, 300, 308, 309, 400, -320, -330, -400]) for _ in range(2)]
        digits = [rng.choice(["1", "1.0000001", "9.99", "5", "0.5", "1" * 30]) for _ in range(2)]
        printed, expected = (f"{d}e{x}" for d, x in zip(digits, exponents))
        tol = rng.choice([TOL, 1e-9, 0.0])
        assert compare_stdio(printed, expected, tol) == _exactly_close(printed, expected, tol), (printed, expected)


def test_unbounded_tokens_are_equal_only_when_exactly_equal_and_stay_fast():
    huge_exponent = "1e" + "9" * 5000
    assert compare_stdio("1e99999", "10e99998", TOL) and not compare_stdio("1e99999", "1.0000001e99999", TOL)
    assert compare_stdio(huge_exponent, huge_exponent, TOL) and not compare_stdio(
        huge_exponent, "2" + huge_exponent[1:], TOL
    )
    start = time.monotonic()
    for token in ("9" * 1_000_000, "1e-" + "9" * 40, "0." + "0" * 500_000 + "1", huge_exponent):
        assert not compare_stdio(token, "1e999", TOL)
    assert time.monotonic() - start < 10.0  # a generous bound: a comparison is never quadratic in a token


LAUNCHES = [("bwrap", "0"), ("landlock", "1")]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["-".join(launch) for launch in LAUNCHES])
def test_stdio_tolerance_through_code_tests(launch, monkeypatch):
    monkeypatch.setenv(BACKEND_ENV, launch[0])
    monkeypatch.setenv(forkserver.FORKSERVER_ENV, launch[1])
    if launch == ("landlock", "1") and not forkserver.supported():
        pytest.fail("this kernel lacks Landlock ABI >= 6: fork servers are not used here")
    get_backend(launch[0])
    pairs = WRONG + RIGHT
    programs = [f"```python\nprint({printed!r})\n```" for printed, _ in pairs]
    specs = [{"kind": "stdio", "cases": [{"input": "", "output": expected}]} for _, expected in pairs]
    scores = CodeTests(timeout_s=10.0, mode="binary", float_tol=TOL)(programs, tests=specs)
    assert scores == [0.0] * len(WRONG) + [1.0] * len(RIGHT), list(zip(pairs, scores))
